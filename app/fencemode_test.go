package app

import (
	"testing"

	"github.com/mini-kcm/mini-kcm/options"
)

func TestFenceModeSaysWhichLayersFenceTheWrites(t *testing.T) {
	tests := []struct {
		leaderElect, apiserverFence bool
		want                        string
	}{
		{false, false, "off (no leader election)"},
		{true, false, "in-process"},
		{true, true, "in-process and apiserver (ValidatingAdmissionPolicy mini-kcm-lease-fence)"},
	}
	for _, tc := range tests {
		cfg := &options.Config{LeaderElection: options.LeaderElectionOptions{LeaderElect: tc.leaderElect, APIServerFence: tc.apiserverFence}}
		if got := fenceMode(cfg); got != tc.want {
			t.Errorf("leader-elect=%t apiserver-fence=%t: fenceMode = %q, want %q", tc.leaderElect, tc.apiserverFence, got, tc.want)
		}
	}
}
