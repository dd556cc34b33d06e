package options

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
)

// maxShards bounds --shards: every shard is a Lease every replica watches and, on the
// replica that holds it, a set of informers; beyond a few dozen the per-shard overhead
// outgrows what sharding saves.
const maxShards = 64

// ShardingOptions are the flags of active-active mode (issue #17): the namespaces are
// cut into shards, each with its own Lease, and every replica works on its fair share.
type ShardingOptions struct {
	// Shards is the number of shards; 1 is the single leader of --leader-elect.
	Shards int
	// RebalanceThreshold is the imbalance (1 + the largest deviation of a shard's pods
	// from the mean, as a fraction of it; see sharding.Imbalance) above which the
	// coordinator cuts the namespaces anew. The default, 1.2, keeps every replica
	// within 20% of its share of the pods: a replica holds whole shards, so its load is
	// only as even as theirs.
	RebalanceThreshold float64
	// RebalancePeriod is how often the coordinator weighs the shards once the cluster
	// settled; right after a cut it looks sooner (see the sharding package).
	RebalancePeriod time.Duration
}

// NewShardingOptions returns the defaults: one shard, that is no sharding.
func NewShardingOptions() *ShardingOptions {
	return &ShardingOptions{Shards: 1, RebalanceThreshold: 1.2, RebalancePeriod: 30 * time.Second}
}

// AddFlags adds the sharding flags to fs.
func (o *ShardingOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.Shards, "shards", o.Shards, fmt.Sprintf(
		"Number of shards the namespaces are cut into (1 to %d). With more than 1, every replica holds at most "+
			"its fair share of the shards (each a Lease named after --leader-elect-resource-name with the shard's "+
			"number appended) and runs the controllers on that shard's namespaces only. Needs --leader-elect and "+
			"an apiserver with the ShardedListAndWatch feature gate (alpha) for its memory to shrink; without it every "+
			"replica receives every shard's objects and drops those outside its shards itself.", maxShards))
	fs.Float64Var(&o.RebalanceThreshold, "shard-rebalance-threshold", o.RebalanceThreshold,
		"With --shards above 1: when a shard's pods differ from the mean by more than (this - 1) times the mean, "+
			"above or below, the namespaces are cut anew, if the new cut is at least 10% more even. A replica holds "+
			"whole shards, so its share of the pods is only as even as theirs: 1.2 keeps each replica within 20% of "+
			"its share. A new cut pauses the shards whose range it moves for a handover (drain, release, acquire); "+
			"the others keep working. Raise it to trade balance for fewer pauses.")
	fs.DurationVar(&o.RebalancePeriod, "shard-rebalance-period", o.RebalancePeriod,
		"With --shards above 1: how often the coordinating replica counts the pods per namespace to decide on a new cut. "+
			"Right after a cut it counts sooner (10s, then doubling up to this period), and never spends more than 5% "+
			"of its time counting: on a cluster whose count takes 3s, it counts at most once a minute.")
}

// Validate checks the sharding flags; leaderElect is --leader-elect, which sharding
// needs. --leader-elect-apiserver-fence goes with any number of shards: sharded, the
// policy is deploy/sharded/fence/'s, bound once per shard Lease, which the replica
// checks at start (it needs the apiserver).
func (o *ShardingOptions) Validate(leaderElect bool) []error {
	var errs []error
	if o.Shards < 1 || o.Shards > maxShards {
		errs = append(errs, fmt.Errorf("--shards=%d is out of range: use 1 (a single leader) to %d", o.Shards, maxShards))
	}
	if o.Shards > 1 && !leaderElect {
		errs = append(errs, fmt.Errorf("--shards=%d needs --leader-elect=true: shards are handed out through Leases", o.Shards))
	}
	if o.RebalanceThreshold <= 1 {
		errs = append(errs, fmt.Errorf("--shard-rebalance-threshold=%g must be above 1 (1 is a perfect balance); the default is %g",
			o.RebalanceThreshold, NewShardingOptions().RebalanceThreshold))
	}
	if o.RebalancePeriod < time.Second {
		errs = append(errs, fmt.Errorf("--shard-rebalance-period=%s is too short: use at least 1s (the default is %s)",
			o.RebalancePeriod, NewShardingOptions().RebalancePeriod))
	}
	return errs
}
