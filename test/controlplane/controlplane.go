package controlplane

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Options configures Start. The zero value runs etcd and kube-apiserver only, which is
// enough for tests that never need a pod to run.
type Options struct {
	// BinDir holds the binaries; empty means BinDir().
	BinDir string
	// Dir holds certificates, etcd data, logs and the audit log. Empty means a new
	// temporary directory that Stop removes (kept when MINI_KCM_KEEP_DIR=1).
	Dir string
	// Scheduler runs kube-scheduler, so that pods get bound to nodes.
	Scheduler bool
	// KWOK runs the KWOK fake kubelet, which makes pods on fake nodes Running and Ready
	// with a pod IP and completes their deletion.
	KWOK bool
	// Nodes is the number of fake nodes to register; it needs KWOK. The nodes are
	// untainted and schedulable, so plain pod templates need no tolerations.
	Nodes int
	// Node runs one real node (kubelet, containerd, CNI, kube-proxy) in a network
	// namespace of its own, and with it what a real cluster runs besides: the
	// ServiceAccount admission plugin, kube-controller-manager with the controllers
	// mini-kcm replaces turned off, and a kubernetes Service that pods reach. It needs
	// root and a few system packages (see NodeSupported) and implies Scheduler; see
	// node_linux.go for where everything listens.
	Node bool
	// NodeControllersOff are the controllers of kube-controller-manager that node mode
	// turns off: mini-kcm's (the suites pass its registry's names). The rest run, as
	// kubeadm runs them (--controllers=*,bootstrapsigner,tokencleaner).
	NodeControllersOff []string
	// ExtraAPIServerArgs are appended to the kube-apiserver flags and so override them.
	ExtraAPIServerArgs []string
	// StartTimeout bounds the start of each component; zero means 2 minutes, enough for
	// a loaded 2-core machine.
	StartTimeout time.Duration
	// Logf, when set, receives progress messages.
	Logf func(format string, args ...any)
}

// Component names, also the names of their log files.
const (
	Etcd          = "etcd"
	KubeAPIServer = "kube-apiserver"
	KubeScheduler = "kube-scheduler"
	KWOK          = "kwok"
	// KubeControllerManager is part of a ControlPlane only in node mode; the e2e suites
	// and the benchmarks start it beside mini-kcm to compare the two.
	KubeControllerManager = "kube-controller-manager"
)

// Binaries are every binary the harness, the e2e suites and the benchmarks launch.
// hack/build-control-plane.sh builds exactly these (a test checks it), so that
// `make test` on an empty cache builds all it needs.
var Binaries = []string{Etcd, KubeAPIServer, KubeScheduler, KWOK, KubeControllerManager,
	Kubelet, KubeProxy, Kubectl, "pause", "sample-server", NodeImages, Prometheus, PrometheusOperator,
	PrometheusConfigReloader}

// Kubectl applies deploy/ to the node (with its built-in kustomize, as users do),
// NodeImages builds the node's images (hack/tools/images), and the Prometheus Operator
// runs Prometheus on the node from deploy/monitoring (hack/tools/prometheus and
// hack/tools/prometheus-operator).
const (
	Kubectl                  = "kubectl"
	NodeImages               = "node-images"
	Prometheus               = "prometheus"
	PrometheusOperator       = "prometheus-operator"
	PrometheusConfigReloader = "prometheus-config-reloader"
)

// ControlPlane is a running local control plane. Its methods are safe for concurrent
// use.
type ControlPlane struct {
	opts      Options
	dir       string
	removeDir bool
	ca        *certificateAuthority
	// etcdCA signs etcd's certificates and no one else's (see etcdPKI).
	etcdCA     *certificateAuthority
	ports      ports
	adminPath  string
	restConfig *rest.Config
	client     kubernetes.Interface
	nodeNames  []string
	node       *node

	// mu guards the processes, which StopAPIServer and StartAPIServer replace.
	mu        sync.Mutex
	processes map[string]*Process

	stopOnce sync.Once
	stopErr  error
}

// ports are the loopback ports of the control plane; they stay the same across
// apiserver restarts so that clients reconnect to the same address.
type ports struct {
	etcdClient, etcdPeer, apiServer, scheduler int
}

// Start starts a control plane and returns once every component is ready: the
// apiserver answers /readyz, the scheduler answers /readyz and every fake node is
// Ready. On error, everything already started is stopped.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, err error) {
	if opts.Nodes > 0 && !opts.KWOK {
		return nil, errors.New("fake nodes need KWOK: set Options.KWOK")
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 2 * time.Minute
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.BinDir == "" {
		opts.BinDir = BinDir()
	}
	if opts.Node {
		if opts.KWOK {
			return nil, errors.New("Options.Node and Options.KWOK are exclusive: a real node runs the pods")
		}
		opts.Scheduler = true
	}
	if err := checkBinaries(opts); err != nil {
		return nil, err
	}

	cp := &ControlPlane{opts: opts, dir: opts.Dir, processes: map[string]*Process{}}
	if cp.dir == "" {
		// Abandoned nodes first: their mounts live in the abandoned directories.
		cleanupAbandonedNodes()
		removeAbandonedDirs()
		if cp.dir, err = os.MkdirTemp("", tempDirPrefix); err != nil {
			return nil, fmt.Errorf("creating control plane directory: %w", err)
		}
		cp.removeDir = os.Getenv("MINI_KCM_KEEP_DIR") != "1"
		if err := markOwner(cp.dir, cp.removeDir); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			cp.Stop()
		}
	}()
	for _, sub := range []string{"pki", "pki/etcd", "logs", "kubeconfigs", "etcd", "kube-scheduler", "kwok"} {
		if err := os.MkdirAll(filepath.Join(cp.dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("creating control plane directory: %w", err)
		}
	}
	if cp.ports, err = freePorts(); err != nil {
		return nil, err
	}
	if err := cp.writeAPIServerFiles(); err != nil {
		return nil, err
	}
	if cp.adminPath, err = cp.AddUser("mini-kcm-admin", "system:masters"); err != nil {
		return nil, err
	}
	adminKubeconfig, err := os.ReadFile(cp.adminPath)
	if err != nil {
		return nil, fmt.Errorf("reading admin kubeconfig: %w", err)
	}
	if cp.restConfig, err = clientcmd.RESTConfigFromKubeConfig(adminKubeconfig); err != nil {
		return nil, fmt.Errorf("loading admin kubeconfig: %w", err)
	}
	cp.restConfig.UserAgent = "mini-kcm-test-harness"
	// Tests and `make run` read core/v1 Endpoints on purpose; the apiserver's
	// deprecation warning on every such request is only noise in their output.
	cp.restConfig.WarningHandler = rest.NoWarnings{}
	// The harness creates nodes and test objects in bulk; the default limit of 5 QPS
	// would only slow tests down.
	cp.restConfig.QPS, cp.restConfig.Burst = 200, 400
	if cp.client, err = kubernetes.NewForConfig(cp.restConfig); err != nil {
		return nil, fmt.Errorf("creating admin client: %w", err)
	}

	begin := time.Now()
	if err := cp.startEtcd(ctx); err != nil {
		return nil, err
	}
	if err := cp.StartAPIServer(ctx); err != nil {
		return nil, err
	}
	if opts.Scheduler {
		if err := cp.startScheduler(ctx); err != nil {
			return nil, err
		}
	}
	if opts.Node {
		if err := cp.startControllerManager(ctx); err != nil {
			return nil, err
		}
		if err := cp.startNode(ctx); err != nil {
			return nil, err
		}
	}
	if opts.KWOK {
		if err := cp.startKWOK(ctx); err != nil {
			return nil, err
		}
		if err := cp.registerNodes(ctx, opts.Nodes); err != nil {
			return nil, err
		}
	}
	opts.Logf("control plane ready in %v (dir %s)", time.Since(begin).Round(10*time.Millisecond), cp.dir)
	return cp, nil
}

// Dir returns the directory holding all state of the control plane.
func (cp *ControlPlane) Dir() string { return cp.dir }

// KubeconfigPath returns the admin kubeconfig (group system:masters).
func (cp *ControlPlane) KubeconfigPath() string { return cp.adminPath }

// RESTConfig returns a copy of the admin client configuration.
func (cp *ControlPlane) RESTConfig() *rest.Config { return rest.CopyConfig(cp.restConfig) }

// Client returns an admin clientset.
func (cp *ControlPlane) Client() kubernetes.Interface { return cp.client }

// APIServerURL returns the https URL of the apiserver.
func (cp *ControlPlane) APIServerURL() string {
	return "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(cp.ports.apiServer))
}

// NodeNames returns the names of the fake nodes.
func (cp *ControlPlane) NodeNames() []string { return append([]string(nil), cp.nodeNames...) }

// Pid returns the process id of a running component (Etcd, KubeAPIServer,
// KubeScheduler, KWOK), or 0 when it does not run: what benchmarks read the
// component's CPU time and memory from.
func (cp *ControlPlane) Pid(component string) int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if p := cp.processes[component]; p != nil && !p.Exited() {
		return p.Pid()
	}
	return 0
}

// AuditLogPath returns the audit log: one JSON audit.k8s.io/v1 Event per line.
func (cp *ControlPlane) AuditLogPath() string { return filepath.Join(cp.dir, "logs", "audit.log") }

// LogPath returns the log file of a component (Etcd, KubeAPIServer, KubeScheduler, KWOK).
func (cp *ControlPlane) LogPath(component string) string {
	return filepath.Join(cp.dir, "logs", component+".log")
}

// userNamePattern keeps user names usable as file names.
var userNamePattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9:._-]*$`)

// AddUser issues a client certificate for user name in groups and writes a kubeconfig
// for it, returning the kubeconfig's path. The user has no permissions unless a group
// grants them (e.g. system:masters) or RBAC objects name it.
func (cp *ControlPlane) AddUser(name string, groups ...string) (string, error) {
	return cp.addUserAt(name, cp.APIServerURL(), groups...)
}

// addUserAt is AddUser with the apiserver at server, e.g. the forwarded address that
// the node's components reach.
func (cp *ControlPlane) addUserAt(name, server string, groups ...string) (string, error) {
	if !userNamePattern.MatchString(name) {
		return "", fmt.Errorf("invalid user name %q: want letters, digits and :._-", name)
	}
	pair, err := cp.ca.issue(pkix.Name{CommonName: name, Organization: groups}, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return "", err
	}
	config := clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{"mini-kcm-local": {
			Server:                   server,
			CertificateAuthorityData: cp.ca.certPEM,
		}},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{name: {
			ClientCertificateData: pair.certPEM,
			ClientKeyData:         pair.keyPEM,
		}},
		Contexts: map[string]*clientcmdapi.Context{"mini-kcm-local": {
			Cluster:  "mini-kcm-local",
			AuthInfo: name,
		}},
		CurrentContext: "mini-kcm-local",
	}
	path := filepath.Join(cp.dir, "kubeconfigs", strings.ReplaceAll(name, ":", "_")+".kubeconfig")
	if err := clientcmd.WriteToFile(config, path); err != nil {
		return "", fmt.Errorf("writing kubeconfig for %q: %w", name, err)
	}
	return path, nil
}

// Stop stops every component (KWOK, scheduler, apiserver, etcd, in that order) and
// removes the directory if Start created it. It is safe to call more than once.
func (cp *ControlPlane) Stop() error {
	cp.stopOnce.Do(func() {
		cp.stopNode()
		for _, name := range []string{KWOK, KubeControllerManager, KubeScheduler, KubeAPIServer, Etcd} {
			cp.stopComponent(name, 10*time.Second)
		}
		if cp.removeDir {
			// Not through a node's mounts its cleanup could not undo.
			cp.stopErr = removeUnmounted(cp.dir)
		}
	})
	return cp.stopErr
}

// stopComponent stops one component if it runs, killing it after grace: the state is
// disposable, and a component that hangs on SIGTERM must not slow every test down.
func (cp *ControlPlane) stopComponent(name string, grace time.Duration) {
	cp.mu.Lock()
	p := cp.processes[name]
	delete(cp.processes, name)
	cp.mu.Unlock()
	if p != nil {
		p.Stop(grace)
	}
}

// start runs a component and records it.
func (cp *ControlPlane) start(name string, args []string, env []string) (*Process, error) {
	p, err := StartProcess(ProcessSpec{
		Name:    name,
		Path:    filepath.Join(cp.opts.BinDir, name),
		Args:    args,
		Env:     env,
		LogPath: cp.LogPath(name),
	})
	if err != nil {
		return nil, err
	}
	cp.mu.Lock()
	cp.processes[name] = p
	cp.mu.Unlock()
	return p, nil
}

// waitReady polls ready until it succeeds, the process exits, ctx ends or the start
// timeout passes. Errors carry the last check error and the end of the process log.
func (cp *ControlPlane) waitReady(ctx context.Context, p *Process, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, cp.opts.StartTimeout)
	defer cancel()
	begin := time.Now()
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	var lastErr error
	for {
		if lastErr = ready(ctx); lastErr == nil {
			cp.opts.Logf("%s ready in %v", p.Name(), time.Since(begin).Round(10*time.Millisecond))
			return nil
		}
		select {
		case <-p.Done():
			code, _ := p.Wait(0)
			return fmt.Errorf("%s exited with code %d while starting; end of %s:\n%s",
				p.Name(), code, p.LogPath(), Tail(p.LogPath(), 30))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %v: %v; end of %s:\n%s",
				p.Name(), time.Since(begin).Round(time.Second), lastErr, p.LogPath(), Tail(p.LogPath(), 30))
		case <-ticker.C:
		}
	}
}

// freePorts asks the kernel for free loopback ports. The listeners stay open until
// all ports are known, so the same port is never handed out twice.
func freePorts() (ports, error) {
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	next := func() (int, error) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("finding a free port: %w", err)
		}
		listeners = append(listeners, l)
		return l.Addr().(*net.TCPAddr).Port, nil
	}
	var p ports
	for _, port := range []*int{&p.etcdClient, &p.etcdPeer, &p.apiServer, &p.scheduler} {
		var err error
		if *port, err = next(); err != nil {
			return ports{}, err
		}
	}
	return p, nil
}

// FreePort returns a loopback port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
