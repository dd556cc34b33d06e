package framework

import (
	"context"
	"fmt"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
)

// The apiserver's half of the write fence runs in every suite, as deploy/fence/ ships it
// (see controlplane.FencePolicy): replicas start with --leader-elect-apiserver-fence, and
// each test that starts such a replica binds the policy to its own Lease, in its own
// namespace, so that tests never fence each other.
//
// The policy of deploy/ selects mini-kcm's users by name, which the suite's replicas of
// the shipped identity are; the others are certificate users of any name, so the
// suite's copy selects them by ReplicaGroup too, which each of those users gets. A
// replica started without the flag is refused like a misconfigured replica in a
// cluster (that is the point of the policy).
const (
	// ReplicaGroup is the group of every replica's user, the users the suite's fence
	// policy applies to. startMember-style helpers that make their own users add it.
	ReplicaGroup = "mini-kcm-e2e:replicas"
	// FencePolicyName is the suite's copy of deploy/fence/policy.yaml.
	FencePolicyName = "mini-kcm-lease-fence-e2e"
	// APIServerFenceFlag is on for every replica unless a test's Args turn it off.
	APIServerFenceFlag = "--leader-elect-apiserver-fence"
)

// SuiteFenceIdentities returns the match condition of the suite's copy of a shipped
// fence policy: deploy/'s identities, as shipped selects them, and the certificate
// users of ReplicaGroup.
func SuiteFenceIdentities(shipped *admissionregistrationv1.ValidatingAdmissionPolicy) (string, error) {
	for _, c := range shipped.Spec.MatchConditions {
		if c.Name == controlplane.FenceIdentitiesCondition {
			return fmt.Sprintf("%q in request.userInfo.groups || (%s)", ReplicaGroup, c.Expression), nil
		}
	}
	return "", fmt.Errorf("the shipped fence policy %s has no match condition %q", shipped.Name, controlplane.FenceIdentitiesCondition)
}

// installFencePolicy installs the suite's fence policy, once per suite.
func installFencePolicy(cp *controlplane.ControlPlane) error {
	suite.fenceOnce.Do(func() {
		shipped, err := controlplane.FencePolicy(FencePolicyName, "")
		if err != nil {
			suite.fenceErr = err
			return
		}
		identities, err := SuiteFenceIdentities(shipped)
		if err != nil {
			suite.fenceErr = err
			return
		}
		policy, err := controlplane.FencePolicy(FencePolicyName, identities)
		if err != nil {
			suite.fenceErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		suite.fenceErr = controlplane.InstallFencePolicy(ctx, cp.Client(), policy)
	})
	return suite.fenceErr
}

// FenceBindingName is the binding of the test's namespace to the Lease leaseName.
func (f *Framework) FenceBindingName(leaseName string) string {
	return "fence-" + f.Namespace + "-" + leaseName
}

// fenceReplica binds the suite's fence policy to the Lease a replica started with args
// elects on, limited to the test's namespace, if the replica fences at the apiserver.
// It does so once per Lease and test, and removes the binding when the test ends.
func (f *Framework) fenceReplica(args []string) {
	f.t.Helper()
	if !boolFlag(args, "--leader-elect") || !boolFlag(args, APIServerFenceFlag) {
		return
	}
	f.BindFence(lastValue(args, "--leader-elect-resource-namespace"), lastValue(args, "--leader-elect-resource-name"))
}

// BindFence binds the suite's fence policy to the Lease leaseNamespace/leaseName for
// the objects of the test's namespace, once per Lease and test; the binding is removed
// when the test ends. The policy then refuses a write there of a user in ReplicaGroup
// unless it carries that Lease's holder. It takes effect within a moment: the
// apiserver learns of bindings through its informers.
func (f *Framework) BindFence(leaseNamespace, leaseName string) {
	f.t.Helper()
	key := leaseNamespace + "/" + leaseName
	if f.fenced[key] {
		return
	}
	if err := installFencePolicy(f.ControlPlane); err != nil {
		f.t.Fatalf("installing the suite's fence policy: %v", err)
	}
	binding, err := controlplane.FenceBinding(controlplane.FenceBindingOptions{
		Name: f.FenceBindingName(leaseName), PolicyName: FencePolicyName,
		LeaseNamespace: leaseNamespace, LeaseName: leaseName, Namespace: f.Namespace,
	})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := controlplane.InstallFenceBinding(f.Context(), f.Client, binding); err != nil {
		f.t.Fatal(err)
	}
	if f.fenced == nil {
		f.fenced = map[string]bool{}
	}
	f.fenced[key] = true
	f.fenceBindings = append(f.fenceBindings, binding.Name)
}

// deleteFenceBindings removes the test's bindings.
func (f *Framework) deleteFenceBindings() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, name := range f.fenceBindings {
		_ = f.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{})
	}
}

// boolFlag returns the value of a boolean flag in args as pflag reads it: the last of
// --name, --name=true and --name=false wins; absent is false. (--leader-elect defaults
// to true in mini-kcm, and the framework always passes it.)
func boolFlag(args []string, name string) bool {
	value := false
	for _, a := range args {
		switch {
		case a == name:
			value = true
		case strings.HasPrefix(a, name+"="):
			value = strings.TrimPrefix(a, name+"=") == "true"
		}
	}
	return value
}

// lastValue returns the last value of --name=value in args.
func lastValue(args []string, name string) string {
	value := ""
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			value = v
		}
	}
	return value
}
