package app

import (
	"testing"

	"github.com/mini-kcm/mini-kcm/app/serving"
	"github.com/mini-kcm/mini-kcm/options"
)

// modeOf decides the run mode of a replica started with these options.
func modeOf(t *testing.T, leaderElect, warm, apiserverFence bool, shards int) *replicaMode {
	t.Helper()
	le := options.NewLeaderElectionOptions()
	le.LeaderElect, le.WarmStandby, le.APIServerFence = leaderElect, warm, apiserverFence
	mode, err := newReplicaMode(&options.Config{LeaderElection: *le, Sharding: options.ShardingOptions{Shards: shards}})
	if err != nil {
		t.Fatalf("newReplicaMode: %v", err)
	}
	return mode
}

func TestTheRunModeIsDecidedOnceFromTheOptions(t *testing.T) {
	tests := []struct {
		name                            string
		leaderElect, warm, apiserver    bool
		shards                          int
		want                            runMode
		wantFence                       string
		wantRoleStandby, wantRoleLeader string
	}{
		{"no election", false, true, true, 1, withoutElection, "off (no leader election)",
			"not electing (--leader-elect=false), starting", "not electing (--leader-elect=false), running the controllers without a Lease"},
		{"warm standby", true, true, false, 1, warmStandby, "in-process", "standby (warm)", "leading (warm standby mode)"},
		{"cold standby, apiserver fence", true, false, true, 1, coldStandby,
			"in-process and apiserver (ValidatingAdmissionPolicy mini-kcm-lease-fence)", "standby (cold)", "leading (cold standby mode)"},
		{"sharded", true, true, false, 3, sharded, "in-process, one fence per shard Lease",
			"sharded: a Lease per shard (see Shards)", "sharded: a Lease per shard (see Shards)"},
		{"sharded, apiserver fence", true, false, true, 3, sharded,
			"in-process, one fence per shard Lease, and apiserver (ValidatingAdmissionPolicy mini-kcm-shard-fence, one binding per shard Lease)",
			"sharded: a Lease per shard (see Shards)", "sharded: a Lease per shard (see Shards)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := modeOf(t, tc.leaderElect, tc.warm, tc.apiserver, tc.shards)
			if m.run != tc.want {
				t.Errorf("run = %d, want %d", m.run, tc.want)
			}
			// Only an elected replica has an identity, a fence and the apiserver's fence.
			if elects := tc.want != withoutElection; (m.identity != "") != elects || (m.fence != nil) != elects ||
				m.apiserverFence != (elects && tc.apiserver) {
				t.Errorf("identity %q, fence %v, apiserverFence %t for %s", m.identity, m.fence, m.apiserverFence, tc.name)
			}
			if got := m.fenceText(); got != tc.wantFence {
				t.Errorf("fenceText() = %q, want %q", got, tc.wantFence)
			}
			if got := m.role(serving.RoleStandby); got != tc.wantRoleStandby {
				t.Errorf("role(standby) = %q, want %q", got, tc.wantRoleStandby)
			}
			if got := m.role(serving.RoleLeading); got != tc.wantRoleLeader {
				t.Errorf("role(leading) = %q, want %q", got, tc.wantRoleLeader)
			}
		})
	}
}

func TestTheInProcessFenceOffIsSaidInTheFenceText(t *testing.T) {
	t.Setenv(NoInProcessFenceEnv, "true")
	m := modeOf(t, true, true, true, 3)
	if !m.inProcessFenceOff {
		t.Fatalf("inProcessFenceOff = false with %s=true", NoInProcessFenceEnv)
	}
	want := "in-process, one fence per shard Lease, and apiserver (ValidatingAdmissionPolicy mini-kcm-shard-fence, " +
		"one binding per shard Lease); IN-PROCESS FENCE OFF (" + NoInProcessFenceEnv + ", for e2e tests only)"
	if got := m.fenceText(); got != want {
		t.Errorf("fenceText() = %q, want %q", got, want)
	}
}

func TestTheElectionOfTheModeNamesItsLeaseIdentityAndTimings(t *testing.T) {
	m := modeOf(t, true, true, false, 1)
	c := m.election(nil)
	le := options.NewLeaderElectionOptions()
	if c.Namespace != le.ResourceNamespace || c.Name != le.ResourceName || c.Identity != m.identity ||
		c.LeaseDuration != le.LeaseDuration || c.RenewDeadline != le.RenewDeadline || c.RetryPeriod != le.RetryPeriod {
		t.Errorf("election() = %+v, want the options' Lease and timings and identity %q", c, m.identity)
	}
}
