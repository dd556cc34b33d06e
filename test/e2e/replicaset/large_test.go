package replicaset

import (
	"testing"
	"time"
)

// A ReplicaSet of 600 replicas: the controller creates them in slow-start batches of at
// most 500 per sync (upstream's BurstReplicas), waits for its informer to see each
// batch before creating more (expectations), and ends with exactly 600 pods. No extra
// pod exists at any moment: the watch sees every pod ever created.
func TestSixHundredReplicasEndWithExactlySixHundredPods(t *testing.T) {
	const replicas = 600
	e := startEnv(t)
	census := e.watchPods("app=big")
	rs := e.createReplicaSet(newReplicaSet("big", replicas))

	begin := time.Now()
	// The controller's client may send 20 requests a second (upstream's default
	// --kube-api-qps), so the creations alone take 30 seconds on any machine.
	e.waitForStatusWithin("big", settled(replicas), 4*time.Minute)
	t.Logf("%d pods created and ready in %v", replicas, time.Since(begin).Round(100*time.Millisecond))
	// A surplus created by a sync acting on a stale cache would show up within the
	// next syncs; give them a moment.
	time.Sleep(2 * time.Second)
	e.waitForStatus("big", settled(replicas))

	if active := e.activePodsOf(rs); len(active) != replicas {
		t.Errorf("the ReplicaSet controls %d active pods, want %d", len(active), replicas)
	}
	if err := census.Err(); err != nil {
		t.Fatal(err)
	}
	if seen := census.Seen(); len(seen) != replicas {
		t.Errorf("%d pods existed over the test, want exactly %d", len(seen), replicas)
	}
	if maxActive, at := census.MaxActive(); maxActive > replicas {
		t.Errorf("%d pods were active at once (first at %s), want at most %d", maxActive, at, replicas)
	}
	if deletes := e.controllerRequests(begin, func(ev *auditEvent) bool {
		return ev.ObjectRef.Resource == "pods" && ev.Verb == "delete"
	}); len(deletes) != 0 {
		t.Errorf("the controller deleted %d pods", len(deletes))
	}
}
