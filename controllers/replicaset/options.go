package replicaset

import "github.com/mini-kcm/mini-kcm/controllers"

// NewOptions returns the controller's one flag, --concurrent-replicaset-syncs, with
// upstream's default.
func NewOptions() controllers.Options {
	return controllers.NewWorkersOptions("concurrent-replicaset-syncs", 5,
		"The number of replica sets that are allowed to sync concurrently. Larger number = more responsive "+
			"replica management, but more CPU (and network) load.")
}

// workers returns the number of workers the options in cfg ask for.
func workers(cfg controllers.Config) int {
	return int(controllers.OptionsFor[*controllers.WorkersOptions](cfg, Name, NewOptions).ConcurrentSyncs)
}
