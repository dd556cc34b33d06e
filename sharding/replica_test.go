package sharding

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestFairShareIsTheCeilingOfShardsPerLiveReplica(t *testing.T) {
	for _, c := range []struct{ shards, live, want int }{
		{6, 3, 2}, {6, 2, 3}, {6, 4, 2}, {6, 7, 1}, {5, 2, 3}, {6, 1, 6},
		{6, 0, 6}, // before its own membership Lease is seen, a replica counts itself
	} {
		if got := fairShare(c.shards, c.live); got != c.want {
			t.Errorf("fairShare(%d shards, %d live) = %d, want %d", c.shards, c.live, got, c.want)
		}
	}
}

// A Lease expires by the observer's clock, a lease duration after the observer last
// saw it change, whatever its renewTime says: replicas' clocks may differ.
func TestALeaseExpiresALeaseDurationAfterItWasLastSeenToChange(t *testing.T) {
	lease := func(rv, holder string) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: "mini-kcm-1", ResourceVersion: rv},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](4),
				RenewTime: &metav1.MicroTime{Time: time.Unix(0, 0)}}, // a renewTime from long ago
		}
	}
	var o observations
	start := time.Now()
	if o.expired(lease("1", "a"), start) {
		t.Error("a Lease never observed expired")
	}
	o.observe([]*coordinationv1.Lease{lease("1", "a")}, start)
	if o.expired(lease("1", "a"), start.Add(3*time.Second)) {
		t.Error("expired 3s after it was seen, with a 4s duration")
	}
	o.observe([]*coordinationv1.Lease{lease("2", "a")}, start.Add(3*time.Second)) // renewed
	if o.expired(lease("2", "a"), start.Add(6*time.Second)) {
		t.Error("expired 3s after it was seen renewed")
	}
	if !o.expired(lease("2", "a"), start.Add(7500*time.Millisecond)) {
		t.Error("not expired 4.5s after it was last seen to change")
	}
	if !o.expired(lease("2", ""), start) {
		t.Error("a released Lease is not expired")
	}
}
