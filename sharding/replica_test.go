package sharding

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/test/simapiserver"
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

// A replica that gets SIGTERM before its Lease cache synced (the apiserver does not
// answer its lists) returns: its Lease informer stops before the factory waits for it.
// It hung there for good once (found by the replica simulation).
func TestAReplicaStoppedBeforeItsLeaseCacheSyncedReturns(t *testing.T) {
	quietErrorHandlers(t)
	synctest.Test(t, func(t *testing.T) {
		api := simapiserver.New()
		stall := &simapiserver.Stall{}
		link := simapiserver.NewLink("r0", stall, 1, 1, 0, 0, 0)
		client := api.Clientset(link, rsimTimings.RequestTimeout())
		r := New(Config{Base: rsimBase, Namespace: rsimNamespace, Identity: "r0", Shards: 2, Timings: rsimTimings,
			Client: client, CoordinatorClient: client, Probe: rsimProbe{},
			Recorder: func() record.EventRecorder { return &record.FakeRecorder{} },
			Cluster:  informers.NewSharedInformerFactory(client, 0),
			Term:     func(ctx context.Context, _ Term) error { <-ctx.Done(); return nil },
			Exit:     func(code int) { t.Errorf("exit %d", code) }})
		stall.Set(true) // no list is ever answered
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- r.Run(ctx) }()
		time.Sleep(5 * time.Second)
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v, want nil", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("Run did not return within a minute of SIGTERM")
		}
		stall.Set(false)
		api.Wait()
	})
}
