package sharding

import (
	"strings"
	"testing"
)

// /statusz/replica says the plan, the live replicas by this replica's observations, and
// whether this replica coordinates: it holds the base Lease, which its Lease cache does
// not hold (the base Lease carries no LabelSet), so the coordinator says so itself.
func TestReplicaStatusSaysThePlanTheLiveReplicasAndWhetherItCoordinates(t *testing.T) {
	e := Epoch{Number: 2, Plan: Equal(3)}
	r, _ := testReplica(t, 3, planLease(&e, nil),
		lease(MemberLeaseName(testBase, "me"), RoleMember, "", "me"),
		lease(MemberLeaseName(testBase, "other"), RoleMember, "", "other"),
		lease(MemberLeaseName(testBase, "gone"), RoleMember, "", ""), // released: not live
	)
	status := r.Status()
	for _, want := range []string{"3 shards, plan epoch 2", "holding none", "2 live replicas, fair share 2"} {
		if !strings.Contains(status, want) {
			t.Errorf("status %q does not say %q", status, want)
		}
	}
	if strings.Contains(status, "coordinating") {
		t.Errorf("status %q says coordinating before the replica holds the base Lease", status)
	}
	r.coordinator.coordinating.Store(true)
	if status := r.Status(); !strings.Contains(status, "coordinating") {
		t.Errorf("status %q does not say coordinating while the replica holds the base Lease", status)
	}
}
