package sharding

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// TestAFrozenShardHolderWritesNothingOnceItsShardsAreTakenOverThenRejoins freezes
// (SIGSTOP) the replica that holds one tenant's shard right after every tenant was
// given more work, lets the others take its shards over and converge, and resumes it:
// its fences closed while it was frozen, so it writes nothing on its stale caches. It
// does not exit: it drops the shards it lost (counted in
// mini_kcm_leader_election_leases_lost_total, unless a new plan stopped them first),
// campaigns again, takes its fair share back, and works on it. The audit log shows no
// two shard terms writing to one namespace at once, and every tenant ends with exactly
// its pods.
func TestAFrozenShardHolderWritesNothingOnceItsShardsAreTakenOverThenRejoins(t *testing.T) {
	f := framework.New(t)
	tenants := createTenants(t, f, 9, 2)
	const shardsHere = 3
	replicas := f.StartReplicas(3, shardedArgs(shardsHere))
	waitForPods(t, f, tenants, 2)
	// The first cut was made before the tenants had pods; wait for the one that
	// follows them, so that the frozen replica has tenants to work on.
	framework.Eventually(t, time.Minute, func() error {
		if e := activeEpoch(t, f); e.Number < 2 {
			return fmt.Errorf("plan epoch %d, waiting for the recut", e.Number)
		}
		return nil
	})
	waitForFairSharesOf(t, f, replicas, shardsHere)
	epoch := activeEpoch(t, f)
	frozenShard := epoch.Plan.Shard(tenants[0])
	frozen := holderOf(t, f, replicas, frozenShard)
	t.Logf("freezing %s, the holder of shard %d (%s)", frozen.Name, frozenShard, tenants[0])
	if err := syscall.Kill(frozen.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for _, ns := range tenants {
		scaleReplicaSet(t, f, ns, 7)
	}
	var others []*framework.Replica
	for _, r := range replicas {
		if r != frozen {
			others = append(others, r)
		}
	}
	waitForFairSharesOf(t, f, others, shardsHere)
	waitForPods(t, f, tenants, 7)

	if err := syscall.Kill(frozen.Pid(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	// Its election of the shard ends: as lost (counted), or, when the coordinator
	// moved the cuts while it was frozen, stopped for the new plan, whichever it sees
	// first. It stays up and is given a fair share again.
	framework.Eventually(t, 30*time.Second, func() error {
		m, err := frozen.Metrics()
		if err != nil {
			return err
		}
		lease := fmt.Sprintf("%s-%d", f.LeaseName, frozenShard)
		if v, ok := m.Value("mini_kcm_leader_election_leases_lost_total", map[string]string{"name": lease}); ok && v >= 1 {
			t.Logf("resumed → lost shard counted: %s", time.Since(resumed).Round(10*time.Millisecond))
			return nil
		}
		if e := activeEpoch(t, f); e.Number > epoch.Number {
			t.Logf("the plan moved from epoch %d to %d while %s was frozen: its shard was stopped for the new plan",
				epoch.Number, e.Number, frozen.Name)
			return nil
		}
		return fmt.Errorf("leases_lost_total{name=%s} not counted yet, and the plan is still at epoch %d", lease, epoch.Number)
	})
	waitForFairSharesOf(t, f, replicas, shardsHere)
	t.Logf("resumed → fair shares again: %s", time.Since(resumed).Round(10*time.Millisecond))
	if frozen.Exited() {
		t.Fatalf("the resumed replica exited; want it to drop only its lost shards:\n%s", frozen.Logs())
	}
	// Work that lands in every shard, the resumed replica's new one included.
	for _, ns := range tenants {
		scaleReplicaSet(t, f, ns, 4)
	}
	waitForPods(t, f, tenants, 4)
	assertOneWriterAtATime(t, f, tenants)
}

// holderOf returns the replica whose metrics say it holds shard i.
func holderOf(t *testing.T, f *framework.Framework, replicas []*framework.Replica, shard int) *framework.Replica {
	t.Helper()
	lease := fmt.Sprintf("%s-%d", f.LeaseName, shard)
	for _, r := range replicas {
		m, err := r.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := m.Value("leader_election_master_status", map[string]string{"name": lease}); ok && v == 1 {
			return r
		}
	}
	t.Fatalf("no replica reports holding %s", lease)
	return nil
}
