package node

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mini-kcm/mini-kcm/sharding"
	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// The images the node runs, spelled out in full (the CRI rewrites short names).
const (
	miniKCMImage = "registry.local/mini-kcm:dev"
	sampleImage  = "registry.local/sample-server:dev"
)

// The names deploy/ and deploy/sample give them, which the overlays replace.
const (
	deployImageName = "mini-kcm"
	agnhostImage    = "registry.k8s.io/e2e-test-images/agnhost"
)

const (
	leaseNamespace = "kube-system"
	leaseName      = "mini-kube-controller-manager"
	sampleNS       = "mini-kcm-demo"
	miniKCMLabels  = "app.kubernetes.io/name=mini-kcm"
)

var imagesOnce struct {
	sync.Once
	err error
}

// importImages builds the node's images (mini-kcm from the static binary, the pause
// and sample images) and imports them into its containerd, once per test binary. With
// MINI_KCM_RELEASE_DIR set (make test-e2e sets it to the release it built), mini-kcm's
// image is instead the release's: its OCI archive imported for the node's platform and
// tagged with the names the tests use, so that the suite runs the very image that make
// release ships.
func importImages(t *testing.T) {
	t.Helper()
	cp := framework.ControlPlane(t)
	imagesOnce.Do(func() {
		begin := time.Now()
		tools, err := controlplane.Binary(controlplane.NodeImages)
		if err != nil {
			imagesOnce.err = err
			return
		}
		images := []string{
			controlplane.PauseImage + "=" + filepath.Join(controlplane.BinDir(), "pause"),
			sampleImage + "=" + filepath.Join(controlplane.BinDir(), "sample-server"),
		}
		releaseDir := os.Getenv("MINI_KCM_RELEASE_DIR")
		if releaseDir == "" {
			binary, err := staticMiniKCM(t)
			if err != nil {
				imagesOnce.err = err
				return
			}
			images = append(images, miniKCMImage+"="+binary, miniKCMNextImage+"="+binary)
		}
		tarball := filepath.Join(cp.Dir(), "images.tar")
		out, err := exec.Command(tools, append([]string{"--out", tarball}, images...)...).CombinedOutput()
		if err != nil {
			imagesOnce.err = fmt.Errorf("node-images: %w: %s", err, out)
			return
		}
		if _, err := cp.Ctr(t.Context(), "images", "import", tarball); err != nil {
			imagesOnce.err = err
			return
		}
		if releaseDir != "" {
			release, err := importReleaseImage(t, releaseDir)
			if err != nil {
				imagesOnce.err = fmt.Errorf("the release's image (MINI_KCM_RELEASE_DIR=%s): %w", releaseDir, err)
				return
			}
			t.Logf("the release's image %s imported as %s and %s", release, miniKCMImage, miniKCMNextImage)
		}
		t.Logf("images built and imported in %v", time.Since(begin).Round(10*time.Millisecond))
	})
	if imagesOnce.err != nil {
		t.Fatalf("node images: %v", imagesOnce.err)
	}
}

// importReleaseImage imports the OCI archive of make release in dir for the node's
// platform, tags it with the tests' names for mini-kcm's image and returns the release's
// name for it with the index's digest. The name comes from the layout's index.json,
// which names it for containerd (io.containerd.image.name), as ctr import does.
func importReleaseImage(t *testing.T, dir string) (string, error) {
	cp := framework.ControlPlane(t)
	raw, err := os.ReadFile(filepath.Join(dir, "image", "index.json"))
	if err != nil {
		return "", err
	}
	var layout struct {
		Manifests []struct {
			Digest      string            `json:"digest"`
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(raw, &layout); err != nil {
		return "", fmt.Errorf("image/index.json: %w", err)
	}
	if len(layout.Manifests) != 1 || layout.Manifests[0].Annotations["io.containerd.image.name"] == "" {
		return "", fmt.Errorf("image/index.json lists %d images, want one named by io.containerd.image.name:\n%s", len(layout.Manifests), raw)
	}
	name := layout.Manifests[0].Annotations["io.containerd.image.name"]
	if _, err := cp.Ctr(t.Context(), "images", "import", "--platform", "linux/"+runtime.GOARCH, filepath.Join(dir, "mini-kcm-image.oci.tar")); err != nil {
		return "", err
	}
	if _, err := cp.Ctr(t.Context(), "images", "tag", "--force", name, miniKCMImage, miniKCMNextImage); err != nil {
		return "", err
	}
	return name + "@" + layout.Manifests[0].Digest, nil
}

// staticMiniKCM returns $MINI_KCM_NODE_BINARY or builds a static binary: the image
// runs the release build, which needs no libc (the race build does).
func staticMiniKCM(t *testing.T) (string, error) {
	if path := os.Getenv("MINI_KCM_NODE_BINARY"); path != "" {
		return filepath.Abs(path)
	}
	out := filepath.Join(framework.ControlPlane(t).Dir(), "mini-kcm")
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "github.com/mini-kcm/mini-kcm/cmd/mini-kcm")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if output, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building a static mini-kcm: %w: %s", err, output)
	}
	return out, nil
}

// repoPath returns a path of the repository, from this package's directory.
func repoPath(t *testing.T, rel string) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "..", "..", rel))
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// overlay writes a kustomization in a temporary directory that takes base (a
// directory of the repository) and changes only its images, as a user's overlay
// would, and returns the directory.
func overlay(t *testing.T, base string, images map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, repoPath(t, base))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- %s\nimages:\n", rel)
	for name, ref := range images {
		i := strings.LastIndex(ref, ":")
		fmt.Fprintf(&b, "- name: %s\n  newName: %s\n  newTag: %s\n", name, ref[:i], ref[i+1:])
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// kubectl runs the kubectl built with the control plane (its kustomize is the one
// users get with `kubectl apply -k`) as the cluster admin.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := kubectlErr(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func kubectlErr(t *testing.T, args ...string) (string, error) {
	t.Helper()
	path, err := controlplane.Binary(controlplane.Kubectl)
	if err != nil {
		t.Fatal(err)
	}
	cp := framework.ControlPlane(t)
	// Not t.Context(): uninstalling runs in cleanups, after it is canceled.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, append([]string{"--kubeconfig", cp.KubeconfigPath()}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// installDeploy applies one of deploy/'s kustomizations with the image overridden and
// removes it when the test ends (kubectl delete -k, then waits for the pods to go).
func installDeploy(t *testing.T, base string) string {
	t.Helper()
	dir := overlay(t, base, map[string]string{deployImageName: miniKCMImage})
	if out, err := kubectlErr(t, "apply", "-k", dir); err != nil {
		t.Fatalf("kubectl apply -k %s (an overlay of %s setting the image): %v", dir, base, err)
	} else if strings.Contains(out, "Warning") {
		t.Logf("kubectl apply -k %s warned:\n%s", base, out)
	}
	uninstallDeployOnCleanup(t, base, dir)
	return dir
}

// uninstallDeployOnCleanup removes the install of dir (an overlay of base) when the test
// ends, and leaves the cluster as a fresh one for the next install.
func uninstallDeployOnCleanup(t *testing.T, base, dir string) {
	t.Helper()
	t.Cleanup(func() {
		logWarnings(t, leaseNamespace)
		if t.Failed() {
			logPods(t, leaseNamespace, miniKCMLabels)
		}
		if out, err := kubectlErr(t, "delete", "-k", dir, "--ignore-not-found", "--wait=true", "--timeout=2m"); err != nil {
			t.Logf("uninstalling %s: %v\n%s", base, err, out)
		}
		waitNoPods(t, leaseNamespace, miniKCMLabels)
		// The next install starts from no leader, as on a fresh cluster.
		cp := framework.ControlPlane(t)
		_ = cp.Client().CoordinationV1().Leases(leaseNamespace).Delete(context.Background(), leaseName, metav1.DeleteOptions{})
		// And, after the sharded install, its shard, plan and membership Leases, as
		// deploy/README's uninstall removes them: the next test's checks of what an
		// uninstall leaves would find them.
		_ = cp.Client().CoordinationV1().Leases(leaseNamespace).DeleteCollection(context.Background(), metav1.DeleteOptions{},
			metav1.ListOptions{LabelSelector: sharding.LabelSet + "=" + leaseName})
		// Reinstalling deploy/fence after `kubectl delete -k` found the apiserver's
		// admission policy judging writes by the old Lease's holder (the uninstalled
		// leader's) for good, which fenced every write of the next install: once no
		// binding names a paramKind, kube-apiserver stops that kind's param informer
		// and never restarts it (kubernetes/kubernetes#130887). Reported in issue #23;
		// a fresh apiserver starts the next test as on a fresh cluster.
		if err := cp.RestartAPIServer(context.Background()); err != nil {
			t.Errorf("restarting the apiserver after uninstalling %s: %v", base, err)
		}
	})
}

// installSample applies deploy/sample with the sample server's image and removes it
// when the test ends.
func installSample(t *testing.T) {
	t.Helper()
	dir := overlay(t, "deploy/sample", map[string]string{agnhostImage: sampleImage})
	kubectl(t, "apply", "-k", dir)
	uninstallSampleOnCleanup(t, dir)
}

// uninstallSampleOnCleanup removes the sample app of dir when the test ends.
func uninstallSampleOnCleanup(t *testing.T, dir string) {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() {
			logPods(t, sampleNS, "")
		}
		// The namespace's deletion waits for mini-kcm's pods to be gone: delete it
		// while mini-kcm still runs (cleanups run last-registered first).
		if out, err := kubectlErr(t, "delete", "-k", dir, "--ignore-not-found", "--wait=true", "--timeout=2m"); err != nil {
			t.Logf("uninstalling deploy/sample: %v\n%s", err, out)
		}
	})
}

// waitPodsReady waits until n pods match the selector in ns, all Running and Ready.
func waitPodsReady(t *testing.T, ns, selector string, n int, timeout time.Duration) []corev1.Pod {
	t.Helper()
	client := framework.ControlPlane(t).Client()
	var ready []corev1.Pod
	framework.EventuallyEvery(t, timeout, 200*time.Millisecond, func() error {
		pods, err := client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return err
		}
		ready = ready[:0]
		var states []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && framework.PodReady(&p) {
				ready = append(ready, p)
			}
			states = append(states, podState(&p))
		}
		if len(ready) != n || len(pods.Items) != n {
			return fmt.Errorf("%d of %d pods %s in %s Ready, want %d: %s", len(ready), len(pods.Items), selector, ns, n, strings.Join(states, "; "))
		}
		return nil
	})
	return ready
}

func podState(p *corev1.Pod) string {
	s := fmt.Sprintf("%s %s ready=%t", p.Name, p.Status.Phase, framework.PodReady(p))
	for _, c := range p.Status.ContainerStatuses {
		s += fmt.Sprintf(" restarts=%d", c.RestartCount)
		if c.State.Waiting != nil {
			s += fmt.Sprintf(" waiting=%s(%s)", c.State.Waiting.Reason, c.State.Waiting.Message)
		}
		if c.LastTerminationState.Terminated != nil {
			s += fmt.Sprintf(" last=%s(%d)", c.LastTerminationState.Terminated.Reason, c.LastTerminationState.Terminated.ExitCode)
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			s += fmt.Sprintf(" %s=%s", c.Type, c.Message)
		}
	}
	return s
}

func waitNoPods(t *testing.T, ns, selector string) {
	t.Helper()
	client := framework.ControlPlane(t).Client()
	framework.Eventually(t, 2*time.Minute, func() error {
		pods, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d pods %s left in %s", len(pods.Items), selector, ns)
		}
		return nil
	})
}

// logWarnings logs the Warning events of ns: what the kubelet and the controllers
// found wrong with the manifests, even when the test passed.
func logWarnings(t *testing.T, ns string) {
	t.Helper()
	events, err := framework.ControlPlane(t).Client().CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "type=Warning"})
	if err != nil {
		return
	}
	for _, e := range events.Items {
		t.Logf("warning event: %s %s/%s %s: %s (x%d)", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Source.Component, e.Message, e.Count)
	}
}

// logPods logs the pods' states and events, and the end of their containers' logs.
func logPods(t *testing.T, ns, selector string) {
	t.Helper()
	out, _ := kubectlErr(t, "get", "pods,events", "-n", ns, "-o", "wide")
	t.Logf("pods and events in %s:\n%s", ns, out)
	logs, _ := filepath.Glob(filepath.Join(framework.ControlPlane(t).NodeDir(), "pod-logs", ns+"_*", "*", "*.log"))
	for _, l := range logs {
		t.Logf("---- %s ----\n%s", l, controlplane.Tail(l, 30))
	}
}

// scaleSample scales the sample Deployment and waits until mini-kcm rolled it out:
// n pods Ready, and the Service's Endpoints and EndpointSlices carrying exactly their
// pod IPs.
func scaleSample(t *testing.T, n int) {
	t.Helper()
	kubectl(t, "scale", "-n", sampleNS, "deployment/sample", fmt.Sprintf("--replicas=%d", n))
	waitSampleRolledOut(t, n)
}

func waitSampleRolledOut(t *testing.T, n int) {
	t.Helper()
	begin := time.Now()
	pods := waitPodsReady(t, sampleNS, "app.kubernetes.io/name=sample", n, 2*time.Minute)
	var want []string
	for _, p := range pods {
		want = append(want, p.Status.PodIP)
	}
	slices.Sort(want)
	client := framework.ControlPlane(t).Client()
	framework.Eventually(t, time.Minute, func() error {
		ep, err := client.CoreV1().Endpoints(sampleNS).Get(t.Context(), "sample", metav1.GetOptions{})
		if err != nil {
			return err
		}
		var got []string
		for _, s := range ep.Subsets {
			for _, a := range s.Addresses {
				got = append(got, a.IP)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("Endpoints sample has %v, want the pod IPs %v", got, want)
		}
		epSlices, err := client.DiscoveryV1().EndpointSlices(sampleNS).List(t.Context(),
			metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=sample"})
		if err != nil {
			return err
		}
		got = got[:0]
		for _, s := range epSlices.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					got = append(got, e.Addresses...)
				}
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("EndpointSlices of sample have ready %v, want the pod IPs %v", got, want)
		}
		return nil
	})
	t.Logf("sample: %d pods Ready, Endpoints and EndpointSlices on %v, %v after the change", n, want, time.Since(begin).Round(10*time.Millisecond))
}

func leaseHolder(t *testing.T) string {
	t.Helper()
	holder, err := framework.LeaseHolder(t.Context(), framework.ControlPlane(t).Client(), leaseNamespace, leaseName)
	if err != nil {
		t.Fatal(err)
	}
	return holder
}

// holderPod returns the pod named in a leader-election identity (<hostname>_<uuid>;
// a pod's hostname is its name).
func holderPod(holder string) string {
	pod, _, _ := strings.Cut(holder, "_")
	return pod
}

// waitForNewHolder polls the Lease until a holder other than old (and not empty)
// holds it, and returns it with the time since start.
func waitForNewHolder(t *testing.T, old string, start time.Time, timeout time.Duration) (string, time.Duration) {
	t.Helper()
	var holder string
	framework.EventuallyEvery(t, timeout, 20*time.Millisecond, func() error {
		holder = leaseHolder(t)
		if holder == "" || holder == old {
			return fmt.Errorf("the Lease is still held by %q", holder)
		}
		return nil
	})
	return holder, time.Since(start)
}
