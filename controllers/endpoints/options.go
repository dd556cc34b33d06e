package endpoints

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/mini-kcm/mini-kcm/controllers"
)

// Options holds the flags of the Endpoints controller.
type Options struct {
	// ConcurrentSyncs is the number of Services synced in parallel.
	ConcurrentSyncs int32
	// UpdatesBatchPeriod delays pod-driven Service syncs to merge several pod changes
	// into one Endpoints write.
	UpdatesBatchPeriod time.Duration
}

// NewOptions returns the upstream defaults.
func NewOptions() controllers.Options {
	return &Options{ConcurrentSyncs: 5}
}

// AddFlags adds the controller's flags to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.Int32Var(&o.ConcurrentSyncs, "concurrent-endpoint-syncs", o.ConcurrentSyncs,
		"The number of endpoint syncing operations that will be done concurrently. Larger number = faster "+
			"endpoint updating, but more CPU (and network) load.")
	fs.DurationVar(&o.UpdatesBatchPeriod, "endpoint-updates-batch-period", o.UpdatesBatchPeriod,
		"The length of endpoint updates batching period. Processing of pod changes will be delayed by this "+
			"duration to join them with potential upcoming updates and reduce the overall number of endpoints "+
			"updates. Larger number = higher endpoint programming latency, but lower number of endpoints "+
			"revisions generated. 0 processes every pod change at once.")
}

// Validate rejects a worker count that would leave the controller idle and a negative
// batch period.
func (o *Options) Validate() []error {
	return append(controllers.ValidateWorkers("concurrent-endpoint-syncs", o.ConcurrentSyncs),
		controllers.ValidateBatchPeriod("endpoint-updates-batch-period", o.UpdatesBatchPeriod)...)
}
