package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"strconv"
	"time"
)

// auditPolicy records every request at Metadata level (user, user agent, verb,
// resource, response code, timestamps) once the response is complete. The apiserver's
// own loopback traffic and health probes are left out: they are noise to every test.
// Writes of Leases are recorded with their bodies, so that a test can rebuild each
// Lease's history (holder, labels, annotations, resourceVersion) from the log alone and
// judge every other write against who held which Lease at that moment.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  users: ["system:apiserver"]
- level: None
  nonResourceURLs: ["/healthz*", "/livez*", "/readyz*", "/version"]
- level: RequestResponse
  resources: [{group: coordination.k8s.io, resources: [leases]}]
  verbs: [create, update, patch, delete, deletecollection]
- level: Metadata
`

// Service and pod addresses. They do not overlap, so a test can tell a pod IP from a
// cluster IP at a glance; the pod range fits 65k pods, enough for any benchmark.
const (
	serviceClusterIPRange = "10.96.0.0/16"
	podCIDR               = "10.244.0.0/16"
)

func (cp *ControlPlane) pkiPath(name string) string { return filepath.Join(cp.dir, "pki", name) }

// nodeEgressPath is the unix socket of the node's egress proxy (startNodeEgress).
func (cp *ControlPlane) nodeEgressPath() string { return filepath.Join(cp.dir, "node-egress.sock") }

// egressSelectorConfig sends the apiserver's connections into the cluster (kubelets,
// pods, services) through the node's egress proxy, an HTTP CONNECT proxy on the unix
// socket %s; its own etcd and the control plane's traffic go direct.
const egressSelectorConfig = `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %s
`

// writeAPIServerFiles writes the CA, the apiserver serving certificate, the service
// account signing key and the audit policy.
func (cp *ControlPlane) writeAPIServerFiles() error {
	var err error
	if cp.ca, err = newCertificateAuthority(); err != nil {
		return err
	}
	// The node's pods reach the apiserver at the kubernetes Service's ClusterIP, which
	// kube-proxy translates to the forwarded address: both must be in the certificate.
	serving, err := cp.ca.issue(pkix.Name{CommonName: "kube-apiserver"}, x509.ExtKeyUsageServerAuth,
		kubernetesServiceIP, nodeAPIServerIP)
	if err != nil {
		return err
	}
	saKey, err := newServiceAccountKey()
	if err != nil {
		return err
	}
	etcdFiles, err := cp.etcdPKI()
	if err != nil {
		return err
	}
	// The apiserver's client certificate for the kubelet (logs, exec, port-forward),
	// as kubeadm's apiserver-kubelet-client: a member of system:masters, which the
	// kubelet's webhook authorization allows.
	kubeletClient, err := cp.ca.issue(pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		x509.ExtKeyUsageClientAuth)
	if err != nil {
		return err
	}
	files := map[string][]byte{
		cp.pkiPath("apiserver-kubelet-client.crt"): kubeletClient.certPEM,
		cp.pkiPath("apiserver-kubelet-client.key"): kubeletClient.keyPEM,
		cp.pkiPath("ca.crt"):                       []byte(cp.ca.certPEM),
		cp.pkiPath("apiserver.crt"):                serving.certPEM,
		cp.pkiPath("apiserver.key"):                serving.keyPEM,
		cp.pkiPath("service-account.key"):          saKey,
		filepath.Join(cp.dir, "audit.yaml"):        []byte(auditPolicy),
	}
	maps.Copy(files, etcdFiles)
	if cp.opts.Node {
		files[filepath.Join(cp.dir, "egress-selector.yaml")] = []byte(fmt.Sprintf(egressSelectorConfig, cp.nodeEgressPath()))
	}
	return writeFiles(files)
}

// etcdPKI makes etcd's certificates, under a CA of its own that signs nothing else:
// etcd serves its clients and its peer port with mutual TLS and trusts only that CA, so
// that only kube-apiserver and the harness itself, which hold its client certificates,
// reach it. Anyone who could write to etcd would own the cluster, and in node mode the
// root kubelet runs what the cluster asks: a local user must not get that far. The
// certificates of the apiserver's users, signed by the cluster CA, do not open etcd.
func (cp *ControlPlane) etcdPKI() (map[string][]byte, error) {
	var err error
	if cp.etcdCA, err = newCertificateAuthority(); err != nil {
		return nil, err
	}
	files := map[string][]byte{cp.pkiPath("etcd/ca.crt"): cp.etcdCA.certPEM}
	for _, c := range []struct {
		name   string
		usages []x509.ExtKeyUsage
	}{
		{"server", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
		// The peer certificate serves the peer port and authenticates etcd to its peers.
		{"peer", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}},
		{"apiserver-client", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
		{"harness-client", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
	} {
		pair, err := cp.etcdCA.issueFor(pkix.Name{CommonName: "etcd-" + c.name}, c.usages)
		if err != nil {
			return nil, err
		}
		files[cp.pkiPath("etcd/"+c.name+".crt")] = pair.certPEM
		files[cp.pkiPath("etcd/"+c.name+".key")] = pair.keyPEM
	}
	return files, nil
}

// EtcdClientURL is etcd's client address (https, mutual TLS).
func (cp *ControlPlane) EtcdClientURL() string {
	return "https://127.0.0.1:" + strconv.Itoa(cp.ports.etcdClient)
}

// etcdHTTPClient is the harness's client of etcd's HTTP endpoints (/health), with the
// harness's etcd client certificate; without it, etcd refuses the connection.
func (cp *ControlPlane) etcdHTTPClient() (*http.Client, error) {
	cert, err := tls.LoadX509KeyPair(cp.pkiPath("etcd/harness-client.crt"), cp.pkiPath("etcd/harness-client.key"))
	if err != nil {
		return nil, fmt.Errorf("loading the harness's etcd client certificate: %w", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cp.etcdCA.cert)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: roots, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}}, nil
}

func (cp *ControlPlane) startEtcd(ctx context.Context) error {
	clientURL := cp.EtcdClientURL()
	peerURL := "https://127.0.0.1:" + strconv.Itoa(cp.ports.etcdPeer)
	client, err := cp.etcdHTTPClient()
	if err != nil {
		return err
	}
	p, err := cp.start(Etcd, []string{
		"--name=default",
		"--data-dir=" + filepath.Join(cp.dir, "etcd"),
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		// Mutual TLS on both ports, trusting etcd's own CA only (see etcdPKI).
		"--cert-file=" + cp.pkiPath("etcd/server.crt"),
		"--key-file=" + cp.pkiPath("etcd/server.key"),
		"--client-cert-auth=true",
		"--trusted-ca-file=" + cp.pkiPath("etcd/ca.crt"),
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=default=" + peerURL,
		"--peer-cert-file=" + cp.pkiPath("etcd/peer.crt"),
		"--peer-key-file=" + cp.pkiPath("etcd/peer.key"),
		"--peer-client-cert-auth=true",
		"--peer-trusted-ca-file=" + cp.pkiPath("etcd/ca.crt"),
		// Durability is worthless for a throwaway cluster, and fsync dominates etcd's
		// latency on a shared CI disk.
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	}, nil)
	if err != nil {
		return err
	}
	return cp.waitReady(ctx, p, func(ctx context.Context) error {
		body, err := httpGet(ctx, client, clientURL+"/health")
		if err != nil {
			return err
		}
		var health struct {
			Health string `json:"health"`
		}
		if err := json.Unmarshal(body, &health); err != nil || health.Health != "true" {
			return fmt.Errorf("etcd not healthy: %s", body)
		}
		return nil
	})
}

func (cp *ControlPlane) apiServerArgs() []string {
	args := []string{
		"--etcd-servers=" + cp.EtcdClientURL(),
		"--etcd-cafile=" + cp.pkiPath("etcd/ca.crt"),
		"--etcd-certfile=" + cp.pkiPath("etcd/apiserver-client.crt"),
		"--etcd-keyfile=" + cp.pkiPath("etcd/apiserver-client.key"),
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(cp.ports.apiServer),
		"--cert-dir=" + filepath.Join(cp.dir, "pki"),
		"--tls-cert-file=" + cp.pkiPath("apiserver.crt"),
		"--tls-private-key-file=" + cp.pkiPath("apiserver.key"),
		"--client-ca-file=" + cp.pkiPath("ca.crt"),
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=" + serviceClusterIPRange,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + cp.pkiPath("service-account.key"),
		"--service-account-signing-key-file=" + cp.pkiPath("service-account.key"),
		"--allow-privileged=true",
		"--audit-policy-file=" + filepath.Join(cp.dir, "audit.yaml"),
		"--audit-log-path=" + cp.AuditLogPath(),
		"--audit-log-maxsize=0",
		"--audit-log-maxbackup=0",
		// Tests clean their namespaces with DeleteCollection, which deletes one object
		// at a time by default (about 10s per 600 pods).
		"--delete-collection-workers=8",
	}
	if cp.opts.Node {
		// As in a real cluster: the kubernetes Service's endpoint is the apiserver's
		// advertised address, here the forwarded one inside the node's network
		// namespace, and every admission plugin is on (kube-controller-manager runs the
		// service account and node lifecycle controllers they rely on).
		args = append(args,
			"--advertise-address="+nodeAPIServerIP.String(),
			"--endpoint-reconciler-type=lease",
			// What the apiserver dials in the cluster (the kubelet for logs, exec and
			// port-forward; pods and services for their proxy) goes through the
			// harness's CONNECT proxy on a unix socket, which dials inside the node's
			// network namespace (see nodeEgress): the host has no route there.
			"--egress-selector-config-file="+filepath.Join(cp.dir, "egress-selector.yaml"),
			"--kubelet-client-certificate="+cp.pkiPath("apiserver-kubelet-client.crt"),
			"--kubelet-client-key="+cp.pkiPath("apiserver-kubelet-client.key"))
	} else {
		args = append(args,
			// The apiserver would publish its advertise address as the endpoints of the
			// default/kubernetes Service, which must not be a loopback address; nothing
			// here needs those endpoints, and loopback keeps the harness off the host's
			// network.
			"--advertise-address=127.0.0.1",
			"--endpoint-reconciler-type=none",
			// No service account controller runs, so no pod could pass ServiceAccount;
			// the signer stays configured so that TokenRequest still works.
			// TaintNodesByCondition taints every new node not-ready until the node
			// lifecycle controller (which no one runs here) lifts it, so no pod would
			// ever schedule.
			"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition")
	}
	return append(args, cp.opts.ExtraAPIServerArgs...)
}

// StartAPIServer starts kube-apiserver on the control plane's port and waits until it
// is ready. Start calls it; tests call it after StopAPIServer.
func (cp *ControlPlane) StartAPIServer(ctx context.Context) error {
	cp.mu.Lock()
	running := cp.processes[KubeAPIServer] != nil
	cp.mu.Unlock()
	if running {
		return fmt.Errorf("%s is already running", KubeAPIServer)
	}
	p, err := cp.start(KubeAPIServer, cp.apiServerArgs(), nil)
	if err != nil {
		return err
	}
	return cp.waitReady(ctx, p, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		// /readyz covers etcd and every post-start hook, including the bootstrap RBAC
		// roles that every client's permissions depend on.
		_, err := cp.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	})
}

// StopAPIServer stops kube-apiserver with SIGTERM and leaves the rest of the control
// plane running. The apiserver stops listening at once but then waits for open watches
// to end, which clients never do on their own; after 3 seconds it is killed.
func (cp *ControlPlane) StopAPIServer() {
	cp.stopComponent(KubeAPIServer, 3*time.Second)
}

// KillAPIServer kills kube-apiserver with SIGKILL, as a crash would.
func (cp *ControlPlane) KillAPIServer() {
	cp.mu.Lock()
	p := cp.processes[KubeAPIServer]
	delete(cp.processes, KubeAPIServer)
	cp.mu.Unlock()
	if p != nil {
		p.Kill()
	}
}

// RestartAPIServer stops kube-apiserver gracefully and starts it again on the same
// port with the same etcd, so that clients reconnect to the same address and find the
// same objects.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context) error {
	cp.StopAPIServer()
	return cp.StartAPIServer(ctx)
}

// StopEtcd stops etcd with SIGTERM (killing it after 3 seconds) and leaves
// kube-apiserver running: every request that needs storage then fails, while the
// apiserver itself keeps answering, until StartEtcd.
func (cp *ControlPlane) StopEtcd() {
	cp.stopComponent(Etcd, 3*time.Second)
}

// StartEtcd starts etcd again on the same ports and data directory after StopEtcd,
// and waits until it is healthy; kube-apiserver reconnects on its own.
func (cp *ControlPlane) StartEtcd(ctx context.Context) error {
	cp.mu.Lock()
	running := cp.processes[Etcd] != nil
	cp.mu.Unlock()
	if running {
		return fmt.Errorf("%s is already running", Etcd)
	}
	return cp.startEtcd(ctx)
}

// httpGet returns the body of a 200 response.
func httpGet(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return body, nil
}
