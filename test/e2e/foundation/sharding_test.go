package foundation

import (
	"testing"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// This suite's apiserver runs without the ShardedListAndWatch gate: it ignores
// shardSelector, and mini-kcm must see that (test/e2e/sharding has the gate on).
func TestAnApiserverWithoutTheShardGateIsDetectedAsIgnoringIt(t *testing.T) {
	if framework.New(t).ServerFiltersByShard() {
		t.Error("an apiserver without ShardedListAndWatch was detected as filtering by shard")
	}
}
