package sharding

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/sharding"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// TestDeletingThePlanLeaseThenKillingAReplicaLeavesNoNamespaceUnserved is defect 3 of
// issue #25 end to end: the plan is past its first epoch, someone deletes the plan
// Lease, and a replica is killed. The coordinator writes a plan whose epoch no shard
// Lease has carried, hands every shard over to it, and every namespace is served
// again: each ReplicaSet gets exactly the pods it asks for, one writer at a time.
// (Before the fix the new plan restarted at epoch 1, the killed replica's shard Lease
// was relabelled 1 and nobody took it: namespaces stayed short of pods for good.)
func TestDeletingThePlanLeaseThenKillingAReplicaLeavesNoNamespaceUnserved(t *testing.T) {
	f := framework.New(t)
	replicas := f.StartReplicas(3, shardedArgs(shardCount))
	tenants := createTenants(t, f, 12, 3)
	waitForPods(t, f, tenants, 3)
	waitForFairShares(t, f, replicas, 2)
	// The first cut was made before the tenants had pods; the next one follows them.
	framework.Eventually(t, 2*time.Minute, func() error {
		if e := activeEpoch(t, f); e.Number < 2 {
			return fmt.Errorf("plan epoch %d, waiting for the recut", e.Number)
		}
		return nil
	})
	before := activeEpoch(t, f)

	plan := sharding.PlanLeaseName(f.LeaseName)
	if err := f.Client.CoordinationV1().Leases(f.LeaseNamespace).Delete(f.Context(), plan, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	killed := replicas[0]
	killed.Kill()
	t.Logf("deleted the plan Lease at epoch %d and killed %s", before.Number, killed.Name)

	survivors := replicas[1:]
	framework.Eventually(t, 2*time.Minute, func() error {
		l, err := f.Client.CoordinationV1().Leases(f.LeaseNamespace).Get(f.Context(), plan, metav1.GetOptions{})
		if err != nil {
			return err
		}
		active, _, err := sharding.PlanOf(l)
		switch {
		case err != nil:
			return err
		case active == nil:
			return fmt.Errorf("the recreated plan has no active epoch yet")
		case active.Number <= before.Number:
			return fmt.Errorf("plan epoch %d, want one above %d", active.Number, before.Number)
		}
		return nil
	})
	waitForFairShares(t, f, survivors, 3)
	after := activeEpoch(t, f)
	for shard, l := range shardLeases(t, f) {
		if shard < shardCount && l.Labels[sharding.LabelEpoch] != after.Label(shard) {
			t.Errorf("shard %d's Lease carries epoch %s, the plan at %d gives it %s", shard, l.Labels[sharding.LabelEpoch], after.Number, after.Label(shard))
		}
		if h := ptr.Deref(l.Spec.HolderIdentity, ""); shard < shardCount && h == "" {
			t.Errorf("shard %d is not held", shard)
		}
	}
	t.Logf("the new plan is epoch %d", after.Number)
	for _, ns := range tenants {
		scaleReplicaSet(t, f, ns, 5)
	}
	waitForPods(t, f, tenants, 5)
	assertOneWriterAtATime(t, f, tenants)
}
