package deploy

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/leaderelection"
	"github.com/mini-kcm/mini-kcm/test/e2e/deploy/install"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// handedOverControllers is kube-controller-manager's --controllers once the four are
// mini-kcm's, as deploy/README.md's hand-over sets it.
const handedOverControllers = "*,bootstrapsigner,tokencleaner,-deployment-controller,-endpoints-controller,-endpointslice-controller,-replicaset-controller"

// TestTheHandOverCheckFailsWhileTheApiserverRefusesTheLeadersWrites: a leader whose
// every write the apiserver's fence refuses looks healthy (its readiness reads only),
// so that a hand-over to it is an outage. The fence refuses the leader when it judges
// by a Lease whose holder is someone else: a kube-apiserver judging by the Lease as it
// was (kubernetes#130887, after an uninstall and a re-install; not reproducible on
// demand) or a binding naming another Lease. The test makes the second, with the
// binding's paramRef moved to a Lease held by a replica long gone: `mini-kcm handover
// check`, whose dry-run write as the leader the apiserver admitted on the fresh
// install, now fails naming the binding, its Lease and the fix, and passes again once
// the install is applied as shipped.
func TestTheHandOverCheckFailsWhileTheApiserverRefusesTheLeadersWrites(t *testing.T) {
	f := framework.New(t)
	inst := installMiniKCM(t, f)
	ctx := f.Context()
	cp := f.ControlPlane
	manifest := filepath.Join(t.TempDir(), "kube-controller-manager.yaml")
	framework.WriteKubeControllerManagerManifest(t, manifest, handedOverControllers)
	check := func() framework.Result {
		t.Helper()
		r := framework.RunMiniKCM(t, 30*time.Second, "handover", "check", "--kubeconfig="+cp.KubeconfigPath(),
			"--kcm-manifest="+manifest, "--leader-elect-resource-namespace="+inst.leaseNamespace,
			"--leader-elect-resource-name="+inst.leaseName, "--want=mini-kcm")
		t.Logf("mini-kcm handover check, exit %d:\n%s", r.ExitCode, r.Output)
		return r
	}
	// A dry-run write as the endpoints controller with holder as its holder extra: nil
	// when the apiserver admits it.
	probe := func(holder string) error {
		cfg := rest.CopyConfig(cp.RESTConfig())
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:kube-system:mini-kcm-endpoints-controller",
			Extra: map[string][]string{leaderelection.LeaseHolderExtra: {holder}}}
		cfg.WarningHandler = rest.NoWarnings{}
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = client.CoreV1().Endpoints(inst.leaseNamespace).Create(ctx,
			&corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "fence-probe"}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}

	inst.waitForLeader(inst.startReplicas(2), time.Minute)
	holder, err := framework.LeaseHolder(ctx, f.Client, inst.leaseNamespace, inst.leaseName)
	if err != nil {
		t.Fatal(err)
	}
	if r := check(); r.ExitCode != 0 || !strings.Contains(r.Output, "admitted: a dry-run create") {
		t.Fatalf("on the install as shipped the check must pass with the leader's writes admitted; exit %d", r.ExitCode)
	}

	// The fence judges by another Lease, held by a replica long gone.
	stale := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: inst.leaseNamespace, Name: inst.leaseName + "-e2e-stale"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("mini-kcm-0_gone"), LeaseDurationSeconds: ptr.To[int32](15)}}
	if _, err := cp.Client().CoordinationV1().Leases(stale.Namespace).Create(ctx, stale, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bindings := cp.Client().AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	binding, err := bindings.Get(ctx, "mini-kcm-lease-fence", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	binding.Spec.ParamRef.Name = stale.Name
	if _, err := bindings.Update(ctx, binding, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client().CoordinationV1().Leases(stale.Namespace).Delete(ctx, stale.Name, metav1.DeleteOptions{})
	})
	framework.Eventually(t, 30*time.Second, func() error {
		if probe(holder) == nil {
			return fmt.Errorf("the leader's writes are still admitted: the moved binding is not in force yet")
		}
		return nil
	})
	r := check()
	for _, want := range []string{"REFUSED: a dry-run create", "the apiserver refuses the writes of mini-kcm's leader",
		"judges by the Lease " + stale.Namespace + "/" + stale.Name, "set its paramRef to mini-kcm's Lease"} {
		if !strings.Contains(r.Output, want) {
			t.Errorf("the check's output does not say %q", want)
		}
	}
	if r.ExitCode != 1 {
		t.Errorf("the check exited %d while the apiserver refuses the leader's writes, want 1", r.ExitCode)
	}

	// The fix the check names: the binding as shipped.
	if _, err := inst.applier.Apply(ctx, inst.manifests, install.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, func() error { return probe(holder) })
	if r := check(); r.ExitCode != 0 || !strings.Contains(r.Output, "admitted: a dry-run create") {
		t.Errorf("with the binding as shipped the check must pass again; exit %d", r.ExitCode)
	}
}
