package app

import (
	"testing"

	"github.com/mini-kcm/mini-kcm/options"
)

func TestFenceModeSaysWhichLayersFenceTheWrites(t *testing.T) {
	tests := []struct {
		leaderElect, apiserverFence bool
		shards                      int
		want                        string
	}{
		{false, false, 1, "off (no leader election)"},
		{true, false, 1, "in-process"},
		{true, true, 1, "in-process and apiserver (ValidatingAdmissionPolicy mini-kcm-lease-fence)"},
		{true, false, 3, "in-process, one fence per shard Lease"},
		{true, true, 3, "in-process, one fence per shard Lease, and apiserver (ValidatingAdmissionPolicy mini-kcm-shard-fence, one binding per shard Lease)"},
	}
	for _, tc := range tests {
		cfg := &options.Config{LeaderElection: options.LeaderElectionOptions{LeaderElect: tc.leaderElect, APIServerFence: tc.apiserverFence},
			Sharding: options.ShardingOptions{Shards: tc.shards}}
		if got := fenceMode(cfg); got != tc.want {
			t.Errorf("leader-elect=%t apiserver-fence=%t shards=%d: fenceMode = %q, want %q", tc.leaderElect, tc.apiserverFence, tc.shards, got, tc.want)
		}
	}
}
