package node

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// The images of the monitoring stack, built here from the binaries
// hack/build-control-plane.sh caches.
const (
	prometheusImage     = "registry.local/prometheus:dev"
	configReloaderImage = "registry.local/prometheus-config-reloader:dev"
)

// kube-prometheus-stack's names for Helm release kps in the namespace monitoring:
// docs/monitoring.md's overlay for that install names them, and this test runs
// Prometheus as that install does.
const (
	kpsRelease        = "kps"
	kpsServiceAccount = "kps-kube-prometheus-prometheus"
	monitoringNS      = "monitoring"
)

// The shipped monitoring, as a platform team runs it: the real Prometheus Operator
// (on the host, against the node's apiserver) runs a real Prometheus on the node as
// kube-prometheus-stack configures it (its ServiceAccount, its release-label
// selectors), from deploy/monitoring with docs/monitoring.md's overlay for that stack
// and deploy/serving-cert. Prometheus scrapes the three replicas over TLS it verifies
// against the CA of their certificate, with the token of its ServiceAccount, and
// evaluates the shipped alerts:
//   - in steady state no alert is pending or firing;
//   - with one replica killed (and killed again as the kubelet restarts it),
//     MiniKCMReplicaDown goes pending (its 10 minutes of `for` are the operator's to
//     wait, not the test's) and MiniKCMNoLeader does not;
//   - with the Lease held by someone else, so that no replica leads while all three
//     are scraped, MiniKCMNoLeader fires, and resolves when a replica leads again;
//   - with the scrape refused (the scraper's binding deleted) while a replica leads,
//     MiniKCMNotScraped and MiniKCMReplicaDown go pending and MiniKCMNoLeader does not.
func TestPrometheusScrapesTheReplicasAndEvaluatesTheShippedAlerts(t *testing.T) {
	cp := framework.ControlPlane(t)
	importImages(t)
	importMonitoringImages(t, cp)
	installOperatorCRDs(t, "alertmanagerconfigs", "alertmanagers", "podmonitors", "probes", "prometheusagents",
		"prometheuses", "prometheusrules", "scrapeconfigs", "servicemonitors", "thanosrulers")
	createNamespaceOnCleanupDelete(t, monitoringNS)

	// What kube-prometheus-stack installs for its Prometheus: the ServiceAccount and
	// its grant to discover pods.
	kubectl(t, "create", "serviceaccount", kpsServiceAccount, "-n", monitoringNS)
	kubectl(t, "create", "clusterrole", "e2e-kps-prometheus", "--verb=get,list,watch", "--resource=pods,services,endpoints")
	kubectl(t, "create", "clusterrolebinding", "e2e-kps-prometheus", "--clusterrole=e2e-kps-prometheus",
		"--serviceaccount="+monitoringNS+":"+kpsServiceAccount)
	t.Cleanup(func() {
		_, _ = kubectlErr(t, "delete", "clusterrolebinding,clusterrole", "e2e-kps-prometheus", "--ignore-not-found")
	})

	// What docs/monitoring.md leaves to the user: the serving certificate from their
	// CA, the CA for the PodMonitor, and the scraper's token, made as the docs say.
	caPEM, certPEM, keyPEM := servingCertificate(t, "mini-kcm.kube-system.svc")
	client := cp.Client()
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "mini-kcm-serving", Namespace: leaseNamespace}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}},
		{ObjectMeta: metav1.ObjectMeta{Name: "mini-kcm-ca", Namespace: monitoringNS}, Data: map[string][]byte{"ca.crt": caPEM}},
		{ObjectMeta: metav1.ObjectMeta{Name: "prometheus-mini-kcm-token", Namespace: monitoringNS},
			Data: map[string][]byte{"token": []byte(strings.TrimSpace(kubectl(t, "create", "token", kpsServiceAccount,
				"-n", monitoringNS, "--duration=24h")))}},
	} {
		if _, err := client.CoreV1().Secrets(s.Namespace).Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Secrets(leaseNamespace).Delete(context.Background(), "mini-kcm-serving", metav1.DeleteOptions{})
	})

	dir := monitoredOverlay(t)
	if out, err := kubectlErr(t, "apply", "-k", dir); err != nil {
		t.Fatalf("kubectl apply -k of deploy/ with deploy/monitoring, deploy/serving-cert and the kube-prometheus-stack overlay: %v", err)
	} else {
		t.Logf("kubectl apply -k:\n%s", out)
	}
	uninstallDeployOnCleanup(t, "deploy with monitoring", dir)
	waitPodsReady(t, leaseNamespace, miniKCMLabels, 3, 3*time.Minute)

	startPrometheusOperator(t, cp)
	createPrometheus(t)
	prom := waitPodsReady(t, monitoringNS, "operator.prometheus.io/name="+kpsRelease, 1, 4*time.Minute)[0]
	api := &prometheusAPI{t: t, cp: cp, base: "http://" + net.JoinHostPort(prom.Status.PodIP, "9090")}
	if t.Failed() {
		return
	}
	t.Cleanup(func() {
		if t.Failed() {
			logPods(t, monitoringNS, "operator.prometheus.io/name="+kpsRelease)
			t.Logf("Prometheus' targets: %s", api.raw("/api/v1/targets"))
			t.Logf("Prometheus' alerts: %s", api.raw("/api/v1/alerts"))
		}
	})

	// All three replicas are scraped, over verified TLS (the PodMonitor's CA and
	// serverName; a certificate Prometheus could not verify would be a scrape error).
	framework.EventuallyEvery(t, 3*time.Minute, time.Second, func() error {
		targets := api.targets()
		var up []string
		for _, tg := range targets {
			if tg.Health == "up" && tg.Labels["job"] == "mini-kcm" && tg.Labels["namespace"] == leaseNamespace {
				up = append(up, tg.Labels["pod"])
			}
		}
		if len(up) != 3 || len(targets) != 3 {
			return fmt.Errorf("targets up %v of %d, want the 3 replicas: %+v", up, len(targets), targets)
		}
		return nil
	})
	upAt := time.Now()

	// The operator turned the PodMonitor into a scrape that verifies the certificate.
	api.assertVerifiedScrape()

	// Every shipped alert is loaded and evaluates without error, and has been evaluated
	// since all three targets were up: an evaluation before the first scrapes finds
	// no replica up, rightly.
	want := shippedAlerts(t)
	framework.EventuallyEvery(t, time.Minute, time.Second, func() error {
		rules := api.rules()
		var names []string
		for _, r := range rules {
			names = append(names, r.Name)
			if r.Health != "ok" {
				return fmt.Errorf("rule %s has health %q (%s)", r.Name, r.Health, r.LastError)
			}
			if !r.LastEvaluation.After(upAt) {
				return fmt.Errorf("rule %s was last evaluated at %s, before the targets were up", r.Name, r.LastEvaluation)
			}
		}
		slices.Sort(names)
		if !slices.Equal(names, want) {
			return fmt.Errorf("Prometheus evaluates %v, want the shipped %v", names, want)
		}
		return nil
	})

	// Steady state: nothing pending or firing over six evaluations.
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		if alerts := api.alerts(); len(alerts) > 0 {
			t.Fatalf("in steady state Prometheus has alerts %v, want none", alerts)
		}
	}
	t.Log("steady state: 3 targets up, every shipped alert loaded, none pending or firing for 30s")

	// The runbooks' commands work on this install, as the person on call runs them.
	runRunbookCommands(t, caPEM)

	// One replica killed, and killed again each time the kubelet restarts it.
	leader := holderPod(leaseHolder(t))
	victim := "mini-kcm-0"
	if victim == leader {
		victim = "mini-kcm-1"
	}
	phase := time.Now()
	framework.EventuallyEvery(t, 3*time.Minute, time.Second, func() error {
		killRunningReplica(t, victim)
		alerts := api.alerts()
		if s := alerts["MiniKCMNoLeader"]; s != "" {
			t.Errorf("MiniKCMNoLeader is %s with one standby killed and %s leading", s, leader)
		}
		if alerts["MiniKCMReplicaDown"] == "" {
			return fmt.Errorf("MiniKCMReplicaDown is not pending with %s killed: %v", victim, alerts)
		}
		return nil
	})
	t.Logf("replica %s killed: MiniKCMReplicaDown pending after %.0fs, MiniKCMNoLeader silent", victim, time.Since(phase).Seconds())
	waitPodsReady(t, leaseNamespace, miniKCMLabels, 3, 3*time.Minute)
	api.waitResolved("MiniKCMReplicaDown", 2*time.Minute)

	// No replica leads while all three are scraped: the test holds the Lease.
	stopHolding := holdLease(t)
	phase = time.Now()
	framework.EventuallyEvery(t, 3*time.Minute, time.Second, func() error {
		if s := api.alerts()["MiniKCMNoLeader"]; s != "firing" {
			return fmt.Errorf("MiniKCMNoLeader is %q with the Lease held by the test", s)
		}
		return nil
	})
	t.Logf("Lease held by the test: MiniKCMNoLeader fired after %.0fs", time.Since(phase).Seconds())
	stopHolding()
	phase = time.Now()
	api.waitResolved("MiniKCMNoLeader", 2*time.Minute)
	t.Logf("Lease released: MiniKCMNoLeader resolved after %.0fs", time.Since(phase).Seconds())

	// The scrape refused while a replica leads: NotScraped, not NoLeader.
	kubectl(t, "delete", "clusterrolebinding", "prometheus-mini-kcm")
	phase = time.Now()
	framework.EventuallyEvery(t, 3*time.Minute, time.Second, func() error {
		alerts := api.alerts()
		if s := alerts["MiniKCMNoLeader"]; s != "" {
			t.Errorf("MiniKCMNoLeader is %s while a replica leads and none is scraped", s)
		}
		if alerts["MiniKCMNotScraped"] == "" || alerts["MiniKCMReplicaDown"] == "" {
			return fmt.Errorf("with the scraper's binding deleted, want MiniKCMNotScraped and MiniKCMReplicaDown pending: %v", alerts)
		}
		return nil
	})
	if leaseHolder(t) == "" {
		t.Error("no replica held the Lease while the scrape was refused; the check of MiniKCMNoLeader proved nothing")
	}
	t.Logf("scrape refused: MiniKCMNotScraped and MiniKCMReplicaDown pending after %.0fs, MiniKCMNoLeader silent",
		time.Since(phase).Seconds())
}

// runRunbookCommands runs what docs/runbooks.md shows that only reads: its blocks that
// read a replica's /statusz/replica through a tunnel (as an account it binds to
// mini-kcm:status-reader, with the CA of the serving certificate as ca.crt), and every
// inline kubectl get, logs or describe and mini-kcm leader, with <pod> a replica and
// <admin kubeconfig> the admin's. Each must succeed. mini-kcm handover check is the
// walk-through's (walkthrough_test.go); the fixes (apply, delete) are not run.
func runRunbookCommands(t *testing.T, caPEM []byte) {
	t.Helper()
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "ca.crt"), caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := documentedBinaries(t)
	run := func(command string) string {
		t.Helper()
		out, err := runDocumented(t, bin, work, command)
		if err != nil {
			t.Fatalf("docs/runbooks.md's\n%s\nfailed: %v\n%s", command, err, out)
		}
		return out
	}
	run(documentedBlock(t, "docs/runbooks.md", "<!-- runbooks: status account"))
	t.Cleanup(func() {
		_, _ = kubectlErr(t, "delete", "clusterrolebinding", "mini-kcm-oncall", "--ignore-not-found")
		_, _ = kubectlErr(t, "-n", leaseNamespace, "delete", "serviceaccount", "mini-kcm-oncall", "--ignore-not-found")
	})
	status := documentedBlock(t, "docs/runbooks.md", "<!-- runbooks: read status")
	// The permission takes the authorizer's cache of a denial (10 s) at most to show.
	var out string
	framework.EventuallyEvery(t, time.Minute, 2*time.Second, func() error {
		var err error
		if out, err = runDocumented(t, bin, work, status); err != nil || !strings.Contains(out, "Informers") {
			return fmt.Errorf("the runbook's read of /statusz/replica printed no Informers line (%v):\n%s", err, out)
		}
		return nil
	})
	t.Logf("docs/runbooks.md's read of /statusz/replica, through kubectl port-forward:\n%s", out)
	doc, err := os.ReadFile(repoPath(t, "docs/runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]bool{}
	for _, m := range inlineCommand.FindAllStringSubmatch(string(doc), -1) {
		command := m[1]
		// The pod proxy's --raw is shown as what does not work.
		if !readOnlyCommand.MatchString(command) || strings.Contains(command, "--raw") || ran[command] {
			continue
		}
		out := run(command)
		t.Logf("$ %s\n%s", command, out)
		ran[command] = true
	}
	if len(ran) < 5 {
		t.Errorf("ran %d of docs/runbooks.md's inline commands; the page's commands are no longer found", len(ran))
	}
}

// runDocumented runs a documented command with bash in work, with the binaries of bin
// first on the PATH and the admin's kubeconfig, <pod> a replica and <admin kubeconfig>
// that kubeconfig's path.
func runDocumented(t *testing.T, bin, work, command string) (string, error) {
	kubeconfig := framework.ControlPlane(t).KubeconfigPath()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	replaced := strings.NewReplacer("<pod>", "mini-kcm-0", "<admin kubeconfig>", kubeconfig).Replace(command)
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", replaced)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+kubeconfig)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// inlineCommand is a command in backquotes; readOnlyCommand the ones that only read.
var (
	inlineCommand   = regexp.MustCompile("`((?:kubectl|mini-kcm) [^`]+)`")
	readOnlyCommand = regexp.MustCompile(`^(kubectl( -n [a-z-]+)? (get|logs|describe) |mini-kcm leader )`)
)

// importMonitoringImages builds the images of Prometheus and the operator's config
// reloader from the cached binaries and imports them into the node's containerd.
func importMonitoringImages(t *testing.T, cp *controlplane.ControlPlane) {
	t.Helper()
	begin := time.Now()
	tools, err := controlplane.Binary(controlplane.NodeImages)
	if err != nil {
		t.Fatal(err)
	}
	var images []string
	for ref, name := range map[string]string{prometheusImage: controlplane.Prometheus, configReloaderImage: controlplane.PrometheusConfigReloader} {
		path, err := controlplane.Binary(name)
		if err != nil {
			t.Fatal(err)
		}
		images = append(images, ref+"="+path)
	}
	tarball := filepath.Join(cp.Dir(), "monitoring-images.tar")
	if out, err := exec.Command(tools, append([]string{"--out", tarball}, images...)...).CombinedOutput(); err != nil {
		t.Fatalf("node-images: %v: %s", err, out)
	}
	if _, err := cp.Ctr(t.Context(), "images", "import", tarball); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(tarball)
	t.Logf("Prometheus' images built and imported in %v", time.Since(begin).Round(10*time.Millisecond))
}

// monitoredOverlay writes the user's overlay: deploy/ with the Components
// deploy/monitoring and deploy/serving-cert, the image, and docs/monitoring.md's
// patches for kube-prometheus-stack as they stand there.
func monitoredOverlay(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, repoPath(t, "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	i := strings.LastIndex(miniKCMImage, ":")
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- %[1]s
components:
- %[1]s/monitoring
- %[1]s/serving-cert
images:
- name: %[2]s
  newName: %[3]s
  newTag: %[4]s
`, rel, deployImageName, miniKCMImage[:i], miniKCMImage[i+1:])
	kustomization += documentedBlock(t, "docs/monitoring.md", "<!-- kube-prometheus-stack overlay")
	// The test's own patch, not the stack's: a scrape every 5 s instead of the shipped
	// 30 s, so that a killed replica is seen down within seconds of its kill rather
	// than by luck; the rules, and their `for`, are as shipped.
	kustomization += `- target: {group: monitoring.coreos.com, kind: PodMonitor, name: mini-kcm}
  patch: |
    - op: replace
      path: /spec/podMetricsEndpoints/0/interval
      value: 5s
`
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// documentedBlock returns the fenced code block that follows the line starting with
// marker in the repository's file doc.
func documentedBlock(t *testing.T, doc, marker string) string {
	t.Helper()
	data, err := os.ReadFile(repoPath(t, doc))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	for i, line := range lines {
		if !strings.HasPrefix(line, marker) {
			continue
		}
		if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "```") {
			t.Fatalf("%s: the line after %q opens no code block", doc, marker)
		}
		var b strings.Builder
		for _, l := range lines[i+2:] {
			if strings.HasPrefix(l, "```") {
				return b.String()
			}
			b.WriteString(l + "\n")
		}
		t.Fatalf("%s: the code block after %q is not closed", doc, marker)
	}
	t.Fatalf("%s has no line starting with %q", doc, marker)
	return ""
}

// startPrometheusOperator runs the operator on the host, watching the namespace
// monitoring, with the cluster admin's kubeconfig: its own RBAC is the stack's, not
// ours to test. It serves its metrics on loopback only.
func startPrometheusOperator(t *testing.T, cp *controlplane.ControlPlane) {
	t.Helper()
	path, err := controlplane.Binary(controlplane.PrometheusOperator)
	if err != nil {
		t.Fatal(err)
	}
	port, err := controlplane.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(cp.Dir(), "logs", "prometheus-operator.log")
	p, err := controlplane.StartProcess(controlplane.ProcessSpec{
		Name: "prometheus-operator",
		Path: path,
		Args: []string{
			"--namespaces=" + monitoringNS,
			"--prometheus-config-reloader=" + configReloaderImage,
			"--web.listen-address=" + net.JoinHostPort("127.0.0.1", fmt.Sprint(port)),
		},
		Env:     append(os.Environ(), "KUBECONFIG="+cp.KubeconfigPath()),
		LogPath: logPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("---- last 60 lines of %s ----\n%s", logPath, controlplane.Tail(logPath, 60))
		}
		p.Kill()
	})
}

// createPrometheus creates the Prometheus that kube-prometheus-stack's release kps
// would: its ServiceAccount, and PodMonitors and rules selected by the release label.
// The image is Prometheus v0.316 (3.16) built here; its binaries are in
// /usr/local/bin, so the config reloader's containers, which the operator runs as
// /bin/prometheus-config-reloader, are given that path.
func createPrometheus(t *testing.T) {
	t.Helper()
	release := map[string]any{"matchLabels": map[string]string{"release": kpsRelease}}
	reloader := []string{"/usr/local/bin/prometheus-config-reloader"}
	prometheus := map[string]any{
		"apiVersion": "monitoring.coreos.com/v1",
		"kind":       "Prometheus",
		"metadata":   map[string]any{"name": kpsRelease, "namespace": monitoringNS},
		"spec": map[string]any{
			"image":                  prometheusImage,
			"version":                "v3.16.0",
			"replicas":               1,
			"serviceAccountName":     kpsServiceAccount,
			"podMonitorSelector":     release,
			"serviceMonitorSelector": release,
			"ruleSelector":           release,
			// Rules evaluated every 5 s (the stack's default is 30 s), so that pending
			// shows within seconds of the condition.
			"evaluationInterval": "5s",
			"containers":         []map[string]any{{"name": "config-reloader", "command": reloader}},
			"initContainers":     []map[string]any{{"name": "init-config-reloader", "command": reloader}},
		},
	}
	data, err := json.Marshal(prometheus)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "prometheus.json")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	kubectl(t, "create", "-f", file)
	// Before the operator stops (cleanups run last first): it removes what it made.
	t.Cleanup(func() {
		if out, err := kubectlErr(t, "delete", "-f", file, "--ignore-not-found", "--wait=true", "--timeout=2m"); err != nil {
			t.Logf("deleting the Prometheus: %v\n%s", err, out)
		}
	})
}

// shippedAlerts returns the alert names of deploy/monitoring/prometheusrule.yaml, sorted.
func shippedAlerts(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(repoPath(t, "deploy/monitoring/prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		Spec struct {
			Groups []struct {
				Rules []struct {
					Alert string `json:"alert"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &rule); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
		}
	}
	slices.Sort(names)
	return names
}

// killRunningReplica sends SIGKILL to the pod's mini-kcm process if it runs.
func killRunningReplica(t *testing.T, pod string) {
	t.Helper()
	cp := framework.ControlPlane(t)
	p, err := cp.Client().CoreV1().Pods(leaseNamespace).Get(t.Context(), pod, metav1.GetOptions{})
	if err != nil {
		return
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.Name != "mini-kcm" || c.State.Running == nil {
			continue
		}
		if pid, err := cp.ContainerPID(t.Context(), strings.TrimPrefix(c.ContainerID, "containerd://")); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// holdLease makes the test the holder of mini-kcm's Lease, renewing it every second
// as a live holder would, until the function it returns is called, which deletes the
// Lease so that a replica takes it at once.
func holdLease(t *testing.T) (stop func()) {
	t.Helper()
	client := framework.ControlPlane(t).Client().CoordinationV1().Leases(leaseNamespace)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	renew := func() error {
		lease, err := client.Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.NewMicroTime(time.Now())
		if ptr.Deref(lease.Spec.HolderIdentity, "") != "e2e-test-holder" {
			lease.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr.To("e2e-test-holder"), AcquireTime: &now,
				LeaseTransitions: ptr.To(ptr.Deref(lease.Spec.LeaseTransitions, 0) + 1)}
		}
		lease.Spec.RenewTime, lease.Spec.LeaseDurationSeconds = &now, ptr.To[int32](60)
		_, err = client.Update(ctx, lease, metav1.UpdateOptions{})
		return err
	}
	framework.EventuallyEvery(t, 30*time.Second, 100*time.Millisecond, renew)
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if err := renew(); err != nil && ctx.Err() == nil && !apierrors.IsConflict(err) {
				t.Logf("renewing the test's hold on the Lease: %v", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	return func() {
		cancel()
		<-done
		if err := client.Delete(context.Background(), leaseName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting the Lease the test held: %v", err)
		}
	}
}

// prometheusAPI reads Prometheus' HTTP API on its pod's address, from inside the node's
// network namespace.
type prometheusAPI struct {
	t    *testing.T
	cp   *controlplane.ControlPlane
	base string
}

type promTarget struct {
	Labels    map[string]string `json:"labels"`
	Health    string            `json:"health"`
	LastError string            `json:"lastError"`
}

type promRule struct {
	Name           string    `json:"name"`
	Health         string    `json:"health"`
	LastError      string    `json:"lastError"`
	LastEvaluation time.Time `json:"lastEvaluation"`
}

// get decodes the data of an API response into out; an error is the test's failure.
func (p *prometheusAPI) get(path string, out any) error {
	resp, err := p.cp.PodNetworkClient().Get(p.base + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
		Error  string          `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("GET %s: %d, %w", path, resp.StatusCode, err)
	}
	if body.Status != "success" {
		return fmt.Errorf("GET %s: %s", path, body.Error)
	}
	return json.Unmarshal(body.Data, out)
}

func (p *prometheusAPI) raw(path string) string {
	var out json.RawMessage
	if err := p.get(path, &out); err != nil {
		return err.Error()
	}
	return string(out)
}

func (p *prometheusAPI) targets() []promTarget {
	var data struct {
		ActiveTargets []promTarget `json:"activeTargets"`
	}
	if err := p.get("/api/v1/targets?state=active", &data); err != nil {
		p.t.Logf("Prometheus' targets: %v", err)
	}
	return data.ActiveTargets
}

func (p *prometheusAPI) rules() []promRule {
	var data struct {
		Groups []struct {
			Rules []promRule `json:"rules"`
		} `json:"groups"`
	}
	if err := p.get("/api/v1/rules?type=alert", &data); err != nil {
		p.t.Logf("Prometheus' rules: %v", err)
	}
	var rules []promRule
	for _, g := range data.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules
}

// alerts returns the state (pending or firing) of each active alert by its name. An
// API error fails the test: an empty answer would pass every "silent" check.
func (p *prometheusAPI) alerts() map[string]string {
	p.t.Helper()
	var data struct {
		Alerts []struct {
			Labels map[string]string `json:"labels"`
			State  string            `json:"state"`
		} `json:"alerts"`
	}
	if err := p.get("/api/v1/alerts", &data); err != nil {
		p.t.Fatalf("Prometheus' alerts: %v", err)
	}
	states := map[string]string{}
	for _, a := range data.Alerts {
		if states[a.Labels["alertname"]] != "firing" {
			states[a.Labels["alertname"]] = a.State
		}
	}
	return states
}

// assertVerifiedScrape checks the scrape configuration the operator generated for the
// PodMonitor: https to the server name the certificate is for, against the CA of the
// Secret mini-kcm-ca, verification on, and a bearer token.
func (p *prometheusAPI) assertVerifiedScrape() {
	p.t.Helper()
	var data struct {
		YAML string `json:"yaml"`
	}
	if err := p.get("/api/v1/status/config", &data); err != nil {
		p.t.Fatal(err)
	}
	var config struct {
		ScrapeConfigs []struct {
			JobName       string `json:"job_name"`
			Scheme        string `json:"scheme"`
			Authorization struct {
				Type        string `json:"type"`
				Credentials string `json:"credentials"`
			} `json:"authorization"`
			TLSConfig struct {
				CAFile             string `json:"ca_file"`
				ServerName         string `json:"server_name"`
				InsecureSkipVerify bool   `json:"insecure_skip_verify"`
			} `json:"tls_config"`
		} `json:"scrape_configs"`
	}
	if err := yaml.Unmarshal([]byte(data.YAML), &config); err != nil {
		p.t.Fatal(err)
	}
	for _, sc := range config.ScrapeConfigs {
		if sc.JobName != "podMonitor/"+monitoringNS+"/mini-kcm/0" {
			continue
		}
		if sc.Scheme != "https" || sc.TLSConfig.InsecureSkipVerify || sc.TLSConfig.CAFile == "" ||
			sc.TLSConfig.ServerName != "mini-kcm.kube-system.svc" || sc.Authorization.Credentials == "" {
			p.t.Errorf("the PodMonitor's scrape does not verify the replicas' certificate with a token: %+v", sc)
		}
		p.t.Logf("scrape %s: %s, CA %s, server name %s, authorization %s", sc.JobName, sc.Scheme, sc.TLSConfig.CAFile,
			sc.TLSConfig.ServerName, sc.Authorization.Type)
		return
	}
	p.t.Errorf("Prometheus has no scrape of the PodMonitor: %s", data.YAML)
}

// waitResolved waits until the alert is neither pending nor firing.
func (p *prometheusAPI) waitResolved(alert string, timeout time.Duration) {
	p.t.Helper()
	framework.EventuallyEvery(p.t, timeout, time.Second, func() error {
		if s := p.alerts()[alert]; s != "" {
			return fmt.Errorf("%s is still %s", alert, s)
		}
		return nil
	})
}

// servingCertificate returns a new CA's certificate, and a serving certificate and key
// it issued for name, PEM-encoded: what the user's CA (cert-manager's Certificate in
// docs/monitoring.md) puts in the Secret mini-kcm-serving.
func servingCertificate(t *testing.T, name string) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTemplate := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e monitoring CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}
