package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
)

// UpstreamEnv, set to 1, runs the e2e suites that support it against the real
// kube-controller-manager v1.37.2 instead of mini-kcm. It checks the tests rather than
// the product: every expectation is meant to be upstream's behaviour, so a suite must
// pass against upstream too.
const UpstreamEnv = "MINI_KCM_E2E_UPSTREAM"

// AgainstUpstream reports whether UpstreamEnv asks for upstream.
func AgainstUpstream() bool { return os.Getenv(UpstreamEnv) == "1" }

// StartKubeControllerManager runs the real kube-controller-manager on cp with only the
// given controllers (its --controllers syntax), as its own user in system:masters,
// without leader election or serving: nothing else competes for a test's namespace,
// and tests read only the API. It is killed when the test ends, and its log's tail is
// printed if the test failed. extraArgs are appended to its flags (e.g. a controller's
// options).
func StartKubeControllerManager(t testing.TB, cp *controlplane.ControlPlane, user, controllers string, extraArgs ...string) *controlplane.Process {
	t.Helper()
	kubeconfig, err := cp.AddUser(user, "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	path, err := controlplane.Binary(controlplane.KubeControllerManager)
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(cp.Dir(), "logs", user+".log")
	p, err := controlplane.StartProcess(controlplane.ProcessSpec{
		Name: user,
		Path: path,
		Args: append([]string{
			"--kubeconfig=" + kubeconfig,
			"--controllers=" + controllers,
			"--leader-elect=false",
			"--secure-port=0",
			"--v=2",
		}, extraArgs...),
		LogPath: logPath,
	})
	if err != nil {
		t.Fatalf("starting kube-controller-manager %s: %v", user, err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("---- last 80 lines of %s ----\n%s", logPath, controlplane.Tail(logPath, 80))
		}
	})
	return p
}

// StartElectedKubeControllerManager runs the real kube-controller-manager as user with
// the given kubeconfig (which may point at a proxy in front of the apiserver), with
// leader election on the Lease leaseNamespace/leaseName and only the controllers named.
// extraArgs (e.g. election timings) come last; none means upstream's own defaults. Its
// log is logs/<user>.log, appended to across restarts. It is killed when the test
// ends (continued first, in case the test stopped it), and its log's tail is printed
// if the test failed.
func StartElectedKubeControllerManager(t testing.TB, cp *controlplane.ControlPlane, user, kubeconfig, controllers,
	leaseNamespace, leaseName string, extraArgs ...string) *controlplane.Process {
	t.Helper()
	path, err := controlplane.Binary(controlplane.KubeControllerManager)
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(cp.Dir(), "logs", user+".log")
	p, err := controlplane.StartProcess(controlplane.ProcessSpec{
		Name: user,
		Path: path,
		Args: append([]string{
			"--kubeconfig=" + kubeconfig,
			"--controllers=" + controllers,
			"--leader-elect=true",
			"--leader-elect-resource-namespace=" + leaseNamespace,
			"--leader-elect-resource-name=" + leaseName,
			"--secure-port=0",
			"--v=2",
		}, extraArgs...),
		LogPath: logPath,
	})
	if err != nil {
		t.Fatalf("starting kube-controller-manager %s: %v", user, err)
	}
	t.Cleanup(func() {
		_ = p.Signal(syscall.SIGCONT)
		p.Kill()
		if t.Failed() {
			t.Logf("---- last 40 lines of %s ----\n%s", logPath, controlplane.Tail(logPath, 40))
		}
	})
	return p
}

// WriteKubeControllerManagerManifest writes kube-controller-manager's static pod
// manifest to path as kubeadm lays it out (the pod in kube-system, the component label,
// the command's flags), with the given --controllers value, for `mini-kcm handover
// check --kcm-manifest` to read. Nothing runs it: it is the file a hand-over edits.
func WriteKubeControllerManagerManifest(t testing.TB, path, controllers string) {
	t.Helper()
	pod := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: kube-controller-manager
  namespace: kube-system
  labels: {component: kube-controller-manager, tier: control-plane}
spec:
  containers:
  - name: kube-controller-manager
    image: registry.k8s.io/kube-controller-manager:v1.37.2
    command: [kube-controller-manager, "--controllers=%s", --leader-elect=false, --use-service-account-credentials=true]
`, controllers)
	if err := os.WriteFile(path, []byte(pod), 0o600); err != nil {
		t.Fatal(err)
	}
}
