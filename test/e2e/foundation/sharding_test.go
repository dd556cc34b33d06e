package foundation

import (
	"strings"
	"testing"
	"time"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// This suite's apiserver runs without the ShardedListAndWatch gate: it ignores
// shardSelector, and mini-kcm must see that (test/e2e/sharding has the gate on).
func TestAnApiserverWithoutTheShardGateIsDetectedAsIgnoringIt(t *testing.T) {
	if framework.New(t).ServerFiltersByShard() {
		t.Error("an apiserver without ShardedListAndWatch was detected as filtering by shard")
	}
}

// A sharded replica on such an apiserver still works: every shard's informers drop the
// objects outside the shard themselves (sharding/filter.go), so it starts, says that its
// memory and traffic are not reduced and how to fix that, and keeps running, rather than
// crash-loop while an HA control plane rolls its apiservers. (The next test, in
// sharded_writers_test.go, shows that three such replicas then keep one writer per
// namespace.)
func TestShardedReplicaOnAnApiserverThatIgnoresTheShardSelectorWarnsAndRuns(t *testing.T) {
	f := framework.New(t)
	// Sharded mode runs without the apiserver fence (one Lease per shard), which the
	// framework turns on by default.
	r := f.StartReplica(framework.ReplicaOptions{Args: []string{"--shards=3", framework.APIServerFenceFlag + "=false"}})
	deadline := time.Now().Add(30 * time.Second)
	const warning = "the apiserver ignores shardSelector"
	for !strings.Contains(r.Logs(), warning) {
		if r.Exited() || time.Now().After(deadline) {
			t.Fatalf("the replica did not warn %q (exited: %v); its log:\n%s", warning, r.Exited(), r.Logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, want := range []string{"--feature-gates=ShardedListAndWatch=true", "not reduced"} {
		if !strings.Contains(r.Logs(), want) {
			t.Errorf("the warning does not say %q", want)
		}
	}
	time.Sleep(2 * time.Second)
	if r.Exited() {
		t.Errorf("the replica exited after warning; its log:\n%s", r.Logs())
	}
}
