// Package options defines every mini-kcm flag: its name, default and help text, the
// validation of all of them at once, and the translation into a Config the app runs.
//
// It reads local files (the kubeconfig) but never contacts the apiserver. The set of
// known controllers comes from a *controllers.Registry passed in by the caller, so that
// this package does not depend on the app that assembles the registry.
package options

import (
	"fmt"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/version/verflag"

	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/options/controllersflag"
)

// Options holds every flag of the mini-kcm command.
type Options struct {
	Generic        *GenericOptions
	LeaderElection *LeaderElectionOptions
	Sharding       *ShardingOptions
	Serving        *ServingOptions
	Debugging      *DebuggingOptions
	// Metrics is component-base's --show-hidden-metrics-for-version, --disabled-metrics,
	// --allow-metric-labels and --allow-metric-labels-manifest, as upstream has them.
	Metrics *metrics.Options
	// FeatureGates holds --feature-gates, read by the controllers and the logging setup.
	FeatureGates *FeatureGateOptions
	// Controllers holds the options of each controller that has any, by canonical
	// name; each controller's Descriptor provides them (filled from the registry on
	// first use).
	Controllers map[string]controllers.Options
	// Logs is component-base's logging configuration (-v, --logging-format, ...).
	Logs *logsapi.LoggingConfiguration
	// LogSafety refuses a verbosity at which credentials would be logged.
	LogSafety *LogSafetyOptions

	// flagSets are the flags Flags returned, which /flagz lists with their values.
	flagSets cliflag.NamedFlagSets
}

// NewOptions returns the options with their defaults.
func NewOptions() *Options {
	return &Options{
		Generic:        NewGenericOptions(),
		LeaderElection: NewLeaderElectionOptions(),
		Sharding:       NewShardingOptions(),
		Serving:        NewServingOptions(),
		Debugging:      NewDebuggingOptions(),
		Metrics:        metrics.NewOptions(),
		FeatureGates:   NewFeatureGateOptions(),
		Logs:           logsapi.NewLoggingConfiguration(),
		LogSafety:      NewLogSafetyOptions(),
	}
}

// Flags returns the flags grouped in sections for --help, in kube-controller-manager's
// style. reg provides the controller names listed in the --controllers help.
func (o *Options) Flags(reg *controllers.Registry) cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets
	o.Generic.AddFlags(fss.FlagSet("generic"), reg)
	o.FeatureGates.AddFlags(fss.FlagSet("generic"), reg)
	o.LeaderElection.AddFlags(fss.FlagSet("leader election"))
	o.Sharding.AddFlags(fss.FlagSet("sharding"))
	o.Serving.AddFlags(fss.FlagSet("secure serving"), fss.FlagSet("authentication"), fss.FlagSet("authorization"))
	// One section per controller, named after it, as kube-controller-manager does.
	for _, name := range o.controllerNames(reg) {
		o.Controllers[name].AddFlags(fss.FlagSet(name))
	}
	o.Debugging.AddFlags(fss.FlagSet("debugging"))
	o.Metrics.AddFlags(fss.FlagSet("metrics"))
	logsapi.AddFlags(o.Logs, fss.FlagSet("logs"))
	o.LogSafety.AddFlags(fss.FlagSet("logs"))
	misc := fss.FlagSet("misc")
	// component-base's --version: true, raw (every field) or vX.Y.Z (sets the reported
	// version). Its value is a process-wide global of verflag's, read by the command.
	verflag.AddFlags(misc)
	misc.BoolP("help", "h", false, "help for mini-kcm")
	o.flagSets = fss
	return fss
}

// Validate checks every option and returns all problems at once, so that a user fixes
// a command line in one round instead of one error per run.
func (o *Options) Validate(reg *controllers.Registry) []error {
	var errs []error
	errs = append(errs, o.Generic.Validate(reg)...)
	errs = append(errs, o.FeatureGates.Validate()...)
	errs = append(errs, o.LeaderElection.Validate()...)
	errs = append(errs, o.Sharding.Validate(o.LeaderElection.LeaderElect)...)
	errs = append(errs, o.Serving.Validate()...)
	errs = append(errs, o.LogSafety.Validate(o.Logs)...)
	for _, err := range o.Metrics.Validate() {
		// The library names its configuration fields; say which flags they are.
		errs = append(errs, fmt.Errorf("metrics flags (--show-hidden-metrics-for-version, --disabled-metrics, "+
			"--allow-metric-labels, --allow-metric-labels-manifest): %w", err))
	}
	for _, name := range o.controllerNames(reg) {
		errs = append(errs, o.Controllers[name].Validate()...)
	}
	return errs
}

// Config validates the options and returns the configuration the app runs with.
func (o *Options) Config(reg *controllers.Registry) (*Config, error) {
	if errs := o.Validate(reg); len(errs) > 0 {
		return nil, utilerrors.NewAggregate(errs)
	}
	restConfig, err := o.Generic.RESTConfig()
	if err != nil {
		return nil, err
	}
	c := &Config{
		RESTConfig:                   restConfig,
		EnabledControllers:           controllersflag.Enabled(reg, o.Generic.Controllers),
		MinResyncPeriod:              o.Generic.MinResyncPeriod,
		ControllerShutdownTimeout:    o.Generic.ControllerShutdownTimeout,
		ControllerSyncStuckThreshold: o.Generic.ControllerSyncStuckThreshold,
		ControllerStartInterval:      o.Generic.ControllerStartInterval,
		UseServiceAccountCredentials: o.Generic.UseServiceAccountCredentials,
		LeaderElection:               *o.LeaderElection,
		Sharding:                     *o.Sharding,
		Serving: ServingConfig{
			SecureServing:             o.Serving.SecureServing,
			Authentication:            o.Serving.Authentication,
			Authorization:             o.Serving.Authorization,
			EnableProfiling:           o.Debugging.EnableProfiling,
			EnableContentionProfiling: o.Debugging.EnableContentionProfiling,
			Flags:                     o.flagSets,
		},
	}
	applyMetrics(o.Metrics)
	c.Controllers.Options = map[string]controllers.Options{}
	for _, name := range o.controllerNames(reg) {
		c.Controllers.Options[name] = o.Controllers[name]
	}
	o.FeatureGates.ApplyTo(&c.Controllers, reg)
	return c, nil
}

// controllerNames returns, sorted, the names of the registered controllers that have
// options, first creating with their defaults the options not created yet.
func (o *Options) controllerNames(reg *controllers.Registry) []string {
	if o.Controllers == nil {
		o.Controllers = map[string]controllers.Options{}
	}
	var names []string
	for _, d := range reg.Descriptors() {
		if d.NewOptions == nil {
			continue
		}
		if _, ok := o.Controllers[d.Name]; !ok {
			o.Controllers[d.Name] = d.NewOptions()
		}
		names = append(names, d.Name)
	}
	return names
}

// applyMetrics applies the metrics flags as upstream's ApplyTo does with Options.Apply:
// shown, hidden and disabled metrics and the label allow-lists are process-wide state of
// component-base's registries. Unlike Apply, it does not log an error for the unset
// --allow-metric-labels-manifest.
func applyMetrics(o *metrics.Options) {
	if o.ShowHiddenMetricsForVersion != "" {
		metrics.SetShowHidden()
	}
	metrics.SetDisabledMetrics(o.DisabledMetrics)
	switch {
	case o.AllowListMapping != nil:
		metrics.SetLabelAllowList(o.AllowListMapping)
	case o.AllowListMappingManifest != "":
		metrics.SetLabelAllowListFromManifest(o.AllowListMappingManifest)
	}
}
