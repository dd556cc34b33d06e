package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mini-kcm/mini-kcm/controllers/all"
	"github.com/mini-kcm/mini-kcm/hack/rbacgen"
	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// TestTheDocumentedInstallHandOverAndUninstall walks deploy/README.md's "Deploying" and
// "Uninstalling" on the real node, each command as the page shows it: the check before
// anything changes, the server dry run, the apply, the replicas Ready with a standby,
// the hand-over, the check after it and mini-kcm scaling the sample; then kube-
// controller-manager's controllers back, the fence's binding, the replicas, the rest of
// the install and the Lease removed, the check that nothing is left, and kube-
// controller-manager scaling the sample again.
//
// The node's kube-controller-manager runs without the four controllers (the suite's
// cluster is built so); a second one, started with only those four, stands in for the
// part a hand-over switches off, and the static pod manifest the check reads says what
// the two together run. The image is set in an overlay of deploy/, the README's
// alternative to make deploy-image for leaving the checkout alone; the page's
// `deploy/` is that overlay here.
func TestTheDocumentedInstallHandOverAndUninstall(t *testing.T) {
	importImages(t)
	cp := framework.ControlPlane(t)
	doc := newDocRunner(t)
	ours := all.Registry().Names()
	kubeadm := "*,bootstrapsigner,tokencleaner"
	handedOver := rbacgen.UpstreamControllers(all.Registry())

	// Before: kube-controller-manager runs every controller, the four included.
	doc.manifest(kubeadm)
	upstream := framework.StartKubeControllerManager(t, cp, "kube-controller-manager-walkthrough", strings.Join(ours, ","))
	sampleDir := overlay(t, "deploy/sample", map[string]string{agnhostImage: sampleImage})
	kubectl(t, "apply", "-k", sampleDir)
	uninstallSampleOnCleanup(t, sampleDir)
	waitSampleRolledOut(t, 3)

	deployDir := overlay(t, "deploy", map[string]string{deployImageName: miniKCMImage})
	doc.deploy = deployDir
	// Also when the test fails half-way: the cleanup removes what is left and restarts
	// the apiserver, as the page says to before installing the fence again.
	uninstallDeployOnCleanup(t, "deploy", deployDir)

	// 2. Before anything changes: who runs the four controllers now.
	check := "mini-kcm handover check --kubeconfig=<admin kubeconfig> --kcm-manifest=/etc/kubernetes/manifests/kube-controller-manager.yaml"
	doc.mentions("`--want=upstream`")
	ownedBy(t, doc.run(check+" --want=upstream", 0, "OK: each controller has exactly one owner."), ours, "upstream")

	// 3. Dry run, then apply.
	doc.run("kubectl apply -k deploy/ --dry-run=server", 0, "(server dry run)")
	if _, err := cp.Client().AppsV1().StatefulSets(leaseNamespace).Get(t.Context(), "mini-kcm", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after the server dry run, getting statefulset mini-kcm returned %v, want NotFound: the dry run stored it", err)
	}
	doc.run("kubectl apply -k deploy/", 0, "statefulset.apps/mini-kcm created")

	// 4. The replicas Ready and a standby waiting; both managers run the four now.
	doc.run("kubectl -n kube-system rollout status statefulset/mini-kcm --timeout=5m", 0, "")
	waitPodsReady(t, leaseNamespace, miniKCMLabels, 3, time.Minute)
	framework.Eventually(t, time.Minute, func() error {
		if holder, err := framework.LeaseHolder(t.Context(), cp.Client(), leaseNamespace, leaseName); err != nil || holder == "" {
			return fmt.Errorf("no leader yet (holder %q): %v", holder, err)
		}
		return nil
	})
	holder := strings.TrimSpace(doc.run(`kubectl -n kube-system get lease mini-kube-controller-manager -o jsonpath='{.spec.holderIdentity}{"\n"}'`, 0, "mini-kcm-"))
	if pod, id, ok := strings.Cut(holder, "_"); !ok || id == "" || !strings.HasPrefix(pod, "mini-kcm-") {
		t.Errorf("the Lease's holder is %q, want <pod name>_<uuid>", holder)
	}
	doc.mentions("`mini-kcm handover check` says `both`")
	ownedBy(t, doc.run(check, 1, "Problems:"), ours, "BOTH")

	// 5. Hand over: kube-controller-manager without the four (here: the process that
	// ran them stops; the manifest gets the page's value).
	doc.mentions("`--controllers=" + handedOver + "`")
	upstream.Stop(10 * time.Second)
	doc.manifest(handedOver)

	// 6. After the hand-over: the check passes and mini-kcm alone scales the sample.
	ownedBy(t, doc.run(check+" --want=mini-kcm", 0, "OK: each controller has exactly one owner."), ours, "mini-kcm")
	scaleSample(t, 4)

	// Uninstalling. 1. kube-controller-manager's controllers back on.
	doc.mentions("`--controllers=" + kubeadm + "`")
	doc.manifest(kubeadm)
	upstream = framework.StartKubeControllerManager(t, cp, "kube-controller-manager-walkthrough-back", strings.Join(ours, ","))
	// 2. The fence's binding.
	doc.run("kubectl delete validatingadmissionpolicybinding mini-kcm-lease-fence", 0, "deleted")
	// 3. The replicas, then everything the install applied.
	doc.run("kubectl -n kube-system delete statefulset mini-kcm --cascade=foreground --wait", 0, "deleted")
	waitNoPods(t, leaseNamespace, miniKCMLabels)
	doc.run("kubectl delete -k deploy/ --ignore-not-found", 0, "deleted")
	// 4. The Lease.
	doc.run("kubectl -n kube-system delete lease mini-kube-controller-manager", 0, "deleted")

	// 7. Check: kube-controller-manager alone, and nothing of mini-kcm's left.
	ownedBy(t, doc.run(check+" --want=upstream", 0, "OK: each controller has exactly one owner."), ours, "upstream")
	doc.run("kubectl get clusterroles,clusterrolebindings,validatingadmissionpolicies,validatingadmissionpolicybindings -l app.kubernetes.io/name=mini-kcm", 0, "No resources found")
	if left := doc.run("kubectl -n kube-system get serviceaccounts,roles,rolebindings,leases | grep -e mini-kcm -e mini-kube-controller-manager", 1, ""); left != "" {
		t.Errorf("the uninstall left in kube-system:\n%s", left)
	}
	// kube-controller-manager converges again.
	scaleSample(t, 5)
	// The sample goes while the controllers that own its pods still run.
	kubectl(t, "delete", "-k", sampleDir, "--ignore-not-found", "--wait=true", "--timeout=2m")
	upstream.Stop(10 * time.Second)
}

// ownedBy fails the test unless the check's table says owner runs each of controllers.
func ownedBy(t *testing.T, checkOutput string, controllers []string, owner string) {
	t.Helper()
	for _, c := range controllers {
		row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(c) + `\s+\S+\s+\S+\s+(\S+)$`).FindStringSubmatch(checkOutput)
		if row == nil || row[1] != owner {
			t.Errorf("mini-kcm handover check should say %s runs %s; its output:\n%s", owner, c, checkOutput)
		}
	}
}

// docRunner runs commands of deploy/README.md as the page shows them, in bash, with the
// page's placeholders and paths replaced by this cluster's; a command the page no longer
// shows fails the test, so the walk-through cannot drift from the page.
type docRunner struct {
	t      *testing.T
	readme string
	// bin holds `mini-kcm` (the binary under test) and `kubectl` (the control plane's).
	bin string
	// manifestPath is the static pod manifest the check reads.
	manifestPath string
	// deploy replaces the page's deploy/, and overlay its <overlay>.
	deploy, overlay string
}

func newDocRunner(t *testing.T) *docRunner {
	t.Helper()
	readme, err := os.ReadFile(repoPath(t, "deploy/README.md"))
	if err != nil {
		t.Fatal(err)
	}
	bin := documentedBinaries(t)
	return &docRunner{t: t, readme: string(readme), bin: bin, manifestPath: filepath.Join(t.TempDir(), "kube-controller-manager.yaml")}
}

// documentedBinaries returns a directory that holds what the docs' commands call by
// name: `mini-kcm` (the binary under test) and `kubectl` (the control plane's).
func documentedBinaries(t *testing.T) string {
	t.Helper()
	kubectlPath, err := controlplane.Binary(controlplane.Kubectl)
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for name, target := range map[string]string{"mini-kcm": framework.MiniKCMBinary(t), "kubectl": kubectlPath} {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

// mentions fails the test unless the page shows text.
func (d *docRunner) mentions(text string) {
	d.t.Helper()
	if !strings.Contains(d.readme, text) {
		d.t.Fatalf("deploy/README.md no longer shows %s: change the walk-through with the page", text)
	}
}

// run runs command as the page shows it and returns its output; it fails the test when
// the exit code is not code or the output lacks want.
func (d *docRunner) run(command string, code int, want string) string {
	d.t.Helper()
	d.mentions(command)
	replaced := strings.NewReplacer(
		"<admin kubeconfig>", framework.ControlPlane(d.t).KubeconfigPath(),
		"/etc/kubernetes/manifests/kube-controller-manager.yaml", d.manifestPath,
		" deploy/", " "+d.deploy+"/",
		"<overlay>", d.overlay,
	).Replace(command)
	ctx, cancel := context.WithTimeout(d.t.Context(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", replaced)
	cmd.Env = append(os.Environ(),
		"PATH="+d.bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+framework.ControlPlane(d.t).KubeconfigPath())
	out, err := cmd.CombinedOutput()
	got := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		got = exit.ExitCode()
	} else if err != nil {
		d.t.Fatalf("%s: %v", command, err)
	}
	d.t.Logf("$ %s\n(exit %d)\n%s", command, got, out)
	if got != code || !strings.Contains(string(out), want) {
		d.t.Fatalf("%s: exit %d, want %d and output containing %q", command, got, code, want)
	}
	return string(out)
}

// manifest writes kube-controller-manager's static pod manifest as kubeadm does, with
// the given --controllers, for the check to read.
func (d *docRunner) manifest(controllers string) {
	d.t.Helper()
	framework.WriteKubeControllerManagerManifest(d.t, d.manifestPath, controllers)
}
