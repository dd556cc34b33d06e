package endpointslice

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/mini-kcm/mini-kcm/controllers"
)

// The bounds kube-controller-manager v1.37 enforces on these flags
// (cmd/kube-controller-manager/app/options/endpointslicecontroller.go).
const (
	maxConcurrentSyncs      = 50
	minMaxEndpointsPerSlice = 1
	maxMaxEndpointsPerSlice = 1000
)

// Options holds the flags of the EndpointSlice controller, with upstream's names,
// defaults and bounds.
type Options struct {
	// ConcurrentSyncs is the number of Services synced in parallel.
	ConcurrentSyncs int32
	// MaxEndpointsPerSlice is the most endpoints one EndpointSlice holds; a Service with
	// more gets more slices.
	MaxEndpointsPerSlice int32
	// UpdatesBatchPeriod delays pod-driven Service syncs to merge several pod changes
	// into one round of EndpointSlice writes.
	UpdatesBatchPeriod time.Duration
}

// NewOptions returns the upstream defaults.
func NewOptions() controllers.Options {
	return &Options{ConcurrentSyncs: 5, MaxEndpointsPerSlice: 100}
}

// AddFlags adds the controller's flags to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.Int32Var(&o.ConcurrentSyncs, "concurrent-service-endpoint-syncs", o.ConcurrentSyncs,
		"The number of service endpoint syncing operations that will be done concurrently. Larger number = faster "+
			"endpoint slice updating, but more CPU (and network) load. 1 to 50.")
	fs.Int32Var(&o.MaxEndpointsPerSlice, "max-endpoints-per-slice", o.MaxEndpointsPerSlice,
		"The maximum number of endpoints that will be added to an EndpointSlice. More endpoints per slice will "+
			"result in less endpoint slices, but larger resources. 1 to 1000.")
	fs.DurationVar(&o.UpdatesBatchPeriod, "endpointslice-updates-batch-period", o.UpdatesBatchPeriod,
		"The length of endpoint slice updates batching period. Processing of pod changes will be delayed by this "+
			"duration to join them with potential upcoming updates and reduce the overall number of endpoints "+
			"updates. Larger number = higher endpoint programming latency, but lower number of endpoints "+
			"revisions generated. 0 processes every pod change at once.")
}

// Validate checks the flags against upstream's bounds, and rejects a negative batch
// period, which upstream would silently treat as 0.
func (o *Options) Validate() []error {
	errs := controllers.ValidateWorkers("concurrent-service-endpoint-syncs", o.ConcurrentSyncs)
	if o.ConcurrentSyncs > maxConcurrentSyncs {
		errs = append(errs, fmt.Errorf("--concurrent-service-endpoint-syncs must be at most %d, got %d", maxConcurrentSyncs, o.ConcurrentSyncs))
	}
	if o.MaxEndpointsPerSlice < minMaxEndpointsPerSlice || o.MaxEndpointsPerSlice > maxMaxEndpointsPerSlice {
		errs = append(errs, fmt.Errorf("--max-endpoints-per-slice must be between %d and %d (the API allows at most %d endpoints in a slice), got %d",
			minMaxEndpointsPerSlice, maxMaxEndpointsPerSlice, maxMaxEndpointsPerSlice, o.MaxEndpointsPerSlice))
	}
	return append(errs, controllers.ValidateBatchPeriod("endpointslice-updates-batch-period", o.UpdatesBatchPeriod)...)
}
