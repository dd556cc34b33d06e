package options

import (
	"github.com/spf13/pflag"

	"github.com/mini-kcm/mini-kcm/controllers"
)

// DeploymentOptions holds the flags of the Deployment controller.
type DeploymentOptions struct {
	// ConcurrentSyncs is the number of Deployments synced in parallel.
	ConcurrentSyncs int32
}

// NewDeploymentOptions returns the upstream defaults.
func NewDeploymentOptions() *DeploymentOptions {
	return &DeploymentOptions{ConcurrentSyncs: 5}
}

// Section names the --help section, after the controller.
func (o *DeploymentOptions) Section() string { return "deployment-controller" }

// AddFlags adds the controller's flags to fs.
func (o *DeploymentOptions) AddFlags(fs *pflag.FlagSet) {
	fs.Int32Var(&o.ConcurrentSyncs, "concurrent-deployment-syncs", o.ConcurrentSyncs,
		"The number of deployment objects that are allowed to sync concurrently. Larger number = more "+
			"responsive deployments, but more CPU (and network) load.")
}

// Validate rejects a worker count that would leave the controller idle.
func (o *DeploymentOptions) Validate() []error {
	return validatePositive("concurrent-deployment-syncs", o.ConcurrentSyncs)
}

// ApplyTo copies the options into the controllers' configuration.
func (o *DeploymentOptions) ApplyTo(cfg *controllers.Config) {
	cfg.Deployment.ConcurrentSyncs = int(o.ConcurrentSyncs)
}
