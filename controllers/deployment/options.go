package deployment

import "github.com/mini-kcm/mini-kcm/controllers"

// NewOptions returns the controller's one flag, --concurrent-deployment-syncs, with
// upstream's default.
func NewOptions() controllers.Options {
	return controllers.NewWorkersOptions("concurrent-deployment-syncs", 5,
		"The number of deployment objects that are allowed to sync concurrently. Larger number = more "+
			"responsive deployments, but more CPU (and network) load.")
}

// workers returns the number of workers the options in cfg ask for.
func workers(cfg controllers.Config) int {
	return int(controllers.OptionsFor[*controllers.WorkersOptions](cfg, Name, NewOptions).ConcurrentSyncs)
}
