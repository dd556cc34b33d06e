package deploy

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/sharding"
	"github.com/mini-kcm/mini-kcm/test/e2e/deploy/install"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// leaseScopePolicy names the policy of deploy/lease-scope/.
const leaseScopePolicy = "mini-kcm-lease-scope"

// TestTheShardedInstallKeepsItsReplicasToTheirOwnLeases: an operator applies the
// sharded install's Lease grants (deploy/sharded/sharding-role.yaml, which lets the
// replicas' ServiceAccount write every Lease of kube-system, and lease-scope/). With the
// ServiceAccount's own token, creating, renewing or deleting kube-controller-manager's
// or kube-scheduler's Lease is refused by the policy, which the refusal names, and
// leaves those Leases as they were; the coordinator's, plan, shard and membership Leases
// of the install's --leader-elect-resource-name are written as the protocol needs, but
// only membership Leases may be deleted: the others are the write fence's parameters.
//
// The apiserver's RBAC allows every one of those writes (checked first), so each
// refusal is the policy's. The deploy/ suite is the one whose apiserver runs mini-kcm's
// admission policies as an operator applies them; no StatefulSet controller or
// upstream leader runs here, so the two Leases are stand-ins the test creates.
func TestTheShardedInstallKeepsItsReplicasToTheirOwnLeases(t *testing.T) {
	f := framework.New(t)
	ctx := f.Context()
	inst := installMiniKCM(t, f)
	role, err := install.LoadFile(filepath.Join(deployDir, "sharded", "sharding-role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	scope, err := install.LoadKustomization(filepath.Join(deployDir, "lease-scope"))
	if err != nil {
		t.Fatal(err)
	}
	sharded := append(role, scope...)
	// The suite's other tests run the single-leader install, whose Role does not let
	// the account write other Leases: take the sharded grants away again.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// Only the Role: the lease-scope policy is part of every install (deploy/).
		if err := inst.applier.Delete(ctx, role); err != nil {
			t.Errorf("removing the sharded install's Lease grants: %v", err)
		}
	})
	if _, err := inst.applier.Apply(ctx, sharded, install.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	leases := f.Client.CoordinationV1().Leases(inst.leaseNamespace)
	asMiniKCM := inst.tokenClient.CoordinationV1().Leases(inst.leaseNamespace)

	// Without the policy, the sharded Role would let the account take these over.
	upstream := []string{"kube-controller-manager", "kube-scheduler"}
	user := install.ServiceAccountUser(saNamespace, saName)
	for _, name := range upstream {
		for _, verb := range []string{"create", "update", "delete"} {
			review, err := f.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
				Spec: authorizationv1.SubjectAccessReviewSpec{
					User:   user,
					Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + saNamespace, "system:authenticated"},
					ResourceAttributes: &authorizationv1.ResourceAttributes{
						Namespace: inst.leaseNamespace, Verb: verb, Group: "coordination.k8s.io", Resource: "leases", Name: name,
					},
				},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !review.Status.Allowed {
				t.Fatalf("RBAC does not let %s %s Lease %s/%s (%s): the sharded Role is not what this test expects",
					user, verb, inst.leaseNamespace, name, review.Status.Reason)
			}
		}
	}

	// The policy applies a moment after it is stored; until then the try is a dry run,
	// so that nothing is created.
	framework.Eventually(t, 30*time.Second, func() error {
		_, err := asMiniKCM.Create(ctx, standIn(upstream[0]), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			return fmt.Errorf("a dry-run create of Lease %s by %s was admitted", upstream[0], user)
		}
		return refusedByThePolicy(err)
	})

	for _, name := range upstream {
		// Creating it is refused.
		_, err := asMiniKCM.Create(ctx, standIn(name), metav1.CreateOptions{})
		if err := refusedByThePolicy(err); err != nil {
			t.Errorf("create of Lease %s by %s: %v", name, user, err)
		}
		if _, err := leases.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("Lease %s after the refused create: %v, want NotFound", name, err)
		}

		// The component's own Lease exists: renewing it as mini-kcm, or deleting it, is
		// refused too.
		stored, err := leases.Create(ctx, standIn(name), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = leases.Delete(context.Background(), name, metav1.DeleteOptions{}) })
		taken, err := asMiniKCM.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s may read Lease %s (the sharded Role allows it): %v", user, name, err)
		}
		taken.Spec.HolderIdentity = ptr.To("mini-kcm-0_0b6a")
		taken.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
		_, err = asMiniKCM.Update(ctx, taken, metav1.UpdateOptions{})
		if err := refusedByThePolicy(err); err != nil {
			t.Errorf("update of Lease %s by %s: %v", name, user, err)
		}
		err = asMiniKCM.Delete(ctx, name, metav1.DeleteOptions{})
		if err := refusedByThePolicy(err); err != nil {
			t.Errorf("delete of Lease %s by %s: %v", name, user, err)
		}
		after, err := leases.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("Lease %s after the refused update and delete: %v", name, err)
		}
		if after.ResourceVersion != stored.ResourceVersion || ptr.Deref(after.Spec.HolderIdentity, "") != name {
			t.Errorf("Lease %s changed (resourceVersion %s -> %s, holder %q) although every write was refused",
				name, stored.ResourceVersion, after.ResourceVersion, ptr.Deref(after.Spec.HolderIdentity, ""))
		}
	}

	// The install's own Leases: the protocol creates and renews them, and deletes
	// membership Leases only; the others are the write fence's parameters, which the
	// policy keeps from being deleted (a missing one admits every writer).
	member := sharding.MemberLeaseName(inst.leaseName, "mini-kcm-0_0b6a")
	for _, name := range []string{sharding.PlanLeaseName(inst.leaseName), sharding.ShardLeaseName(inst.leaseName, 0),
		sharding.ShardLeaseName(inst.leaseName, 5), member} {
		created, err := asMiniKCM.Create(ctx, standIn(name), metav1.CreateOptions{})
		if err != nil {
			t.Errorf("create of Lease %s by %s: %v", name, user, err)
			continue
		}
		t.Cleanup(func() { _ = leases.Delete(context.Background(), name, metav1.DeleteOptions{}) })
		created.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
		if _, err := asMiniKCM.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Errorf("update of Lease %s by %s: %v", name, user, err)
		}
		err = asMiniKCM.Delete(ctx, name, metav1.DeleteOptions{})
		switch {
		case name == member && err != nil:
			t.Errorf("delete of the membership Lease %s by %s: %v", name, user, err)
		case name != member && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "mini-kcm-lease-scope")):
			t.Errorf("delete of Lease %s, a parameter of the write fence, by %s: %v; want the lease-scope policy's refusal", name, user, err)
		}
	}
}

// standIn is a Lease held by its own name, as a component's would be.
func standIn(name string) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(name),
			LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime:            ptr.To(metav1.NewMicroTime(time.Now())),
		},
	}
}

// refusedByThePolicy returns nil if err is the lease-scope policy's refusal: Forbidden,
// naming the policy and the names the account may write.
func refusedByThePolicy(err error) error {
	switch {
	case err == nil:
		return errors.New("admitted, want refused by " + leaseScopePolicy)
	case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+leaseScopePolicy+"'"):
		return fmt.Errorf("failed with %v, want Forbidden by ValidatingAdmissionPolicy %s", err, leaseScopePolicy)
	case !strings.Contains(err.Error(), "may write only the Leases of its own install"):
		return fmt.Errorf("refused without saying which Leases the account may write: %v", err)
	}
	return nil
}
