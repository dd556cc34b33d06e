package app

import (
	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/leaderelection"
	"github.com/mini-kcm/mini-kcm/options"
)

// fenceMode says which layers fence this replica's writes, for the start log and
// /statusz:
//
//   - "off (no leader election)": --leader-elect=false, every replica writes;
//   - "in-process": writes leave the process only while it holds the Lease by its own
//     clock (leaderelection.Fence);
//   - "in-process and apiserver (...)": also --leader-elect-apiserver-fence, the
//     controllers' writes carry the lease-holder extra that the ValidatingAdmissionPolicy
//     of deploy/fence/ compares with the Lease. The binary cannot tell whether that
//     policy is installed (reading it would need a grant it has no other use for); the
//     mode says what this replica sends. Sharded, the writes also carry the shard Lease,
//     and the policy is deploy/sharded/fence/'s, bound once per shard Lease.
func fenceMode(cfg *options.Config) string {
	le := cfg.LeaderElection
	switch {
	case !le.LeaderElect:
		return "off (no leader election)"
	case cfg.Sharding.Shards > 1 && le.APIServerFence:
		return "in-process, one fence per shard Lease, and apiserver (ValidatingAdmissionPolicy " +
			leaderelection.ShardFencePolicyName + ", one binding per shard Lease)"
	case cfg.Sharding.Shards > 1:
		return "in-process, one fence per shard Lease"
	case le.APIServerFence:
		return "in-process and apiserver (ValidatingAdmissionPolicy " + leaderelection.FencePolicyName + ")"
	default:
		return "in-process"
	}
}

// controllerNames is the set of every registered controller's name: the clients that
// write for a controller, which impersonate under --leader-elect-apiserver-fence.
func controllerNames(reg *controllers.Registry) map[string]bool {
	names := map[string]bool{}
	for _, d := range reg.Descriptors() {
		names[d.Name] = true
	}
	return names
}
