package sharding

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// TestShardedReplicasOutliveAnApiserverStallLongerThanTheRenewDeadline freezes
// kube-apiserver (SIGSTOP) for longer than the replicas' renew deadline, as a 2-core
// apiserver did under 30 000 pods while the shards were recut: every shard holder fails
// to renew in time. Each replica drops only the shards it lost (fenced, drained) and
// stays up; once the apiserver answers again they campaign, every shard is held again
// in fair shares, new work is done, and the audit log shows one writer at a time per
// namespace with exactly the pods asked for.
func TestShardedReplicasOutliveAnApiserverStallLongerThanTheRenewDeadline(t *testing.T) {
	f := framework.New(t)
	tenants := createTenants(t, f, 6, 2)
	const shardsHere = 3
	replicas := f.StartReplicas(3, shardedArgs(shardsHere))
	waitForPods(t, f, tenants, 2)
	waitForFairSharesOf(t, f, replicas, shardsHere)

	apiserver := f.ControlPlane.Pid(controlplane.KubeAPIServer)
	if apiserver == 0 {
		t.Fatal("kube-apiserver is not running")
	}
	stall := framework.RenewDeadline + 2*time.Second
	t.Logf("freezing kube-apiserver (pid %d) for %s, past the renew deadline of %s", apiserver, stall, framework.RenewDeadline)
	if err := syscall.Kill(apiserver, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The suite's later tests share this apiserver: never leave it frozen.
	t.Cleanup(func() { _ = syscall.Kill(apiserver, syscall.SIGCONT) })
	time.Sleep(stall)
	if err := syscall.Kill(apiserver, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()

	framework.Eventually(t, 30*time.Second, func() error {
		lost := 0.0
		for _, r := range replicas {
			m, err := r.Metrics()
			if err != nil {
				return err
			}
			for _, s := range m["mini_kcm_leader_election_leases_lost_total"] {
				if s.Labels["name"] != f.LeaseName { // the coordinator's Lease is not a shard's
					lost += s.Value
				}
			}
		}
		if lost < 1 {
			return fmt.Errorf("no replica reports a lost shard Lease yet")
		}
		return nil
	})
	waitForFairSharesOf(t, f, replicas, shardsHere)
	t.Logf("apiserver resumed → fair shares again: %s", time.Since(resumed).Round(10*time.Millisecond))
	for _, r := range replicas {
		if r.Exited() {
			t.Fatalf("%s exited after the stall; want it to drop only its lost shards:\n%s", r.Name, r.Logs())
		}
	}
	for _, ns := range tenants {
		scaleReplicaSet(t, f, ns, 5)
	}
	waitForPods(t, f, tenants, 5)
	assertOneWriterAtATime(t, f, tenants)
}
