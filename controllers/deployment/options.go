package deployment

import (
	"github.com/spf13/pflag"

	"github.com/mini-kcm/mini-kcm/controllers"
)

// Options holds the flags of the Deployment controller.
type Options struct {
	// ConcurrentSyncs is the number of Deployments synced in parallel.
	ConcurrentSyncs int32
}

// NewOptions returns the upstream defaults.
func NewOptions() controllers.Options {
	return &Options{ConcurrentSyncs: 5}
}

// AddFlags adds the controller's flags to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.Int32Var(&o.ConcurrentSyncs, "concurrent-deployment-syncs", o.ConcurrentSyncs,
		"The number of deployment objects that are allowed to sync concurrently. Larger number = more "+
			"responsive deployments, but more CPU (and network) load.")
}

// Validate rejects a worker count that would leave the controller idle.
func (o *Options) Validate() []error {
	return controllers.ValidateWorkers("concurrent-deployment-syncs", o.ConcurrentSyncs)
}
