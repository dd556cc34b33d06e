package options

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/mini-kcm/mini-kcm/controllers"
)

// ReplicaSetOptions holds the flags of the ReplicaSet controller.
type ReplicaSetOptions struct {
	// ConcurrentSyncs is the number of ReplicaSets synced in parallel.
	ConcurrentSyncs int32
}

// NewReplicaSetOptions returns the upstream defaults.
func NewReplicaSetOptions() *ReplicaSetOptions {
	return &ReplicaSetOptions{ConcurrentSyncs: 5}
}

// Section names the --help section, after the controller.
func (o *ReplicaSetOptions) Section() string { return "replicaset-controller" }

// AddFlags adds the controller's flags to fs.
func (o *ReplicaSetOptions) AddFlags(fs *pflag.FlagSet) {
	fs.Int32Var(&o.ConcurrentSyncs, "concurrent-replicaset-syncs", o.ConcurrentSyncs,
		"The number of replica sets that are allowed to sync concurrently. Larger number = more responsive "+
			"replica management, but more CPU (and network) load.")
}

// Validate rejects a worker count that would leave the controller idle.
func (o *ReplicaSetOptions) Validate() []error {
	return validatePositive("concurrent-replicaset-syncs", o.ConcurrentSyncs)
}

// ApplyTo copies the options into the controllers' configuration.
func (o *ReplicaSetOptions) ApplyTo(cfg *controllers.Config) {
	cfg.ReplicaSet.ConcurrentSyncs = int(o.ConcurrentSyncs)
}

// validatePositive reports a worker count below 1: upstream accepts 0 for these three
// controllers and then silently runs no workers, which looks like a hang.
func validatePositive(flag string, value int32) []error {
	if value <= 0 {
		return []error{fmt.Errorf("--%s must be greater than 0, got %d", flag, value)}
	}
	return nil
}
