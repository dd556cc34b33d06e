package sharding

import (
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// TestShardedReplicasRideOutApiserverStallsWithoutMovingAShard freezes kube-apiserver
// (SIGSTOP) three times, for 3s twice and once for longer than the lease, as a 2-core
// apiserver did under 30 000 pods while the shards were recut: every shard holder
// fails to renew within its renew deadline, and every replica's reads go unanswered.
// At the shipped timings each holder pauses (its fences closed) and resumes; no
// replica counts the stall toward a Lease's expiry, so no shard Lease changes hands,
// no replica exits, new work is done, and the audit log shows one writer at a time
// per namespace with exactly the pods asked for.
func TestShardedReplicasRideOutApiserverStallsWithoutMovingAShard(t *testing.T) {
	f := framework.New(t)
	tenants := createTenants(t, f, 12, 2)
	const shardsHere = 6
	// --shard-rebalance-threshold=10, above the largest imbalance 6 shards can have
	// (all the weight in one: 6), keeps the coordinator from moving the cuts for the
	// weights of the namespaces, which other tests of the suite create and delete
	// meanwhile: a recut hands shards over, which is no stall's doing, and the test
	// then could not tell a handover from a Lease lost to a stall.
	replicas := f.StartReplicas(3, shardedArgs(shardsHere, "--shard-rebalance-threshold=10"))
	waitForPods(t, f, tenants, 2)
	waitForFairSharesOf(t, f, replicas, shardsHere)
	before, epochBefore := shardLeases(t, f), activeEpoch(t, f).Number

	apiserver := f.ControlPlane.Pid(controlplane.KubeAPIServer)
	if apiserver == 0 {
		t.Fatal("kube-apiserver is not running")
	}
	// The suite's later tests share this apiserver: never leave it frozen.
	t.Cleanup(func() { _ = syscall.Kill(apiserver, syscall.SIGCONT) })
	for _, stall := range []time.Duration{3 * time.Second, 3 * time.Second, framework.LeaseDuration + 2*time.Second} {
		t.Logf("freezing kube-apiserver (pid %d) for %s (renew deadline %s, lease %s)", apiserver, stall,
			framework.RenewDeadline, framework.LeaseDuration)
		if err := syscall.Kill(apiserver, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(stall)
		if err := syscall.Kill(apiserver, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		time.Sleep(7 * time.Second)
	}

	var pauses, lost float64
	for _, r := range replicas {
		if r.Exited() {
			t.Fatalf("%s exited after the stalls; want it running:\n%s", r.Name, r.Logs())
		}
		m, err := r.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range m["mini_kcm_leader_election_pauses_total"] {
			pauses += s.Value
		}
		for _, s := range m["mini_kcm_leader_election_leases_lost_total"] {
			if s.Labels["name"] != f.LeaseName { // the coordinator's Lease is not a shard's
				lost += s.Value
			}
		}
	}
	after, epochAfter := shardLeases(t, f), activeEpoch(t, f).Number
	if epochAfter != epochBefore {
		t.Errorf("the shard plan moved from epoch %d to %d during the stalls; want none (no recut at this threshold, and a stall is no reason for one)",
			epochBefore, epochAfter)
	}
	for shard, l := range before {
		now := after[shard]
		if holder(l) != holder(now) || ptr.Deref(l.Spec.LeaseTransitions, 0) != ptr.Deref(now.Spec.LeaseTransitions, 0) {
			t.Errorf("shard %d: holder %s (transitions %d) before the stalls, %s (%d) after; want no change",
				shard, holder(l), ptr.Deref(l.Spec.LeaseTransitions, 0), holder(now), ptr.Deref(now.Spec.LeaseTransitions, 0))
		}
	}
	t.Logf("HA-NUMBERS sharded-stalls shards=%d replicas=%d pauses=%.0f shard-leases-lost=%.0f plan-epoch %d→%d", shardsHere, len(replicas),
		pauses, lost, epochBefore, epochAfter)
	if lost != 0 {
		t.Errorf("%.0f shard Leases lost to stalls every replica shared, want none", lost)
	}
	if pauses < 1 {
		t.Errorf("no shard holder paused during stalls past the renew deadline; the stalls did not bite")
	}
	for _, ns := range tenants {
		scaleReplicaSet(t, f, ns, 5)
	}
	waitForPods(t, f, tenants, 5)
	assertOneWriterAtATime(t, f, tenants)
}

// holder returns the Lease's holder, "" if none.
func holder(l coordinationv1.Lease) string {
	return ptr.Deref(l.Spec.HolderIdentity, "")
}
