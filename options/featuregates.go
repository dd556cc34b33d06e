package options

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/mini-kcm/mini-kcm/controllers"
)

// The gates of Kubernetes' pkg/features that mini-kcm's controllers honour, under
// upstream's names so that a kube-controller-manager --feature-gates value means the
// same here.
const (
	// PodDeletionCost ranks pods by their pod-deletion-cost annotation on scale-down.
	PodDeletionCost featuregate.Feature = "PodDeletionCost"
	// DeploymentReplicaSetTerminatingReplicas reports status.terminatingReplicas.
	DeploymentReplicaSetTerminatingReplicas featuregate.Feature = "DeploymentReplicaSetTerminatingReplicas"
	// StaleControllerConsistencyReplicaSet holds ReplicaSet syncs back until the
	// informers have seen the controller's own writes.
	StaleControllerConsistencyReplicaSet featuregate.Feature = "StaleControllerConsistencyReplicaSet"
)

// emulatedVersion is the Kubernetes version whose gate defaults mini-kcm has: the one
// whose behaviour it clones.
var emulatedVersion = version.MajorMinor(1, 37)

// controllerFeatureGates returns the controllers' gates with the history that
// Kubernetes v1.37.2 declares for them (pkg/features/kube_features.go). All three are
// beta and on at 1.37; none is locked, so each can be turned off.
func controllerFeatureGates() map[featuregate.Feature]featuregate.VersionedSpecs {
	return map[featuregate.Feature]featuregate.VersionedSpecs{
		PodDeletionCost: {
			{Version: version.MustParse("1.21"), Default: false, PreRelease: featuregate.Alpha},
			{Version: version.MustParse("1.22"), Default: true, PreRelease: featuregate.Beta},
		},
		DeploymentReplicaSetTerminatingReplicas: {
			{Version: version.MustParse("1.33"), Default: false, PreRelease: featuregate.Alpha},
			{Version: version.MustParse("1.35"), Default: true, PreRelease: featuregate.Beta},
		},
		StaleControllerConsistencyReplicaSet: {
			{Version: version.MustParse("1.36"), Default: true, PreRelease: featuregate.Beta},
		},
	}
}

// FeatureGateOptions holds --feature-gates: the controllers' gates and component-base's
// logging gates (ContextualLogging, LoggingAlphaOptions, LoggingBetaOptions), which
// guard logging flags such as --log-text-split-stream.
type FeatureGateOptions struct {
	// Gate holds the known gates and the values set on the command line. It belongs to
	// these options rather than being a process-wide global like upstream's
	// utilfeature.DefaultMutableFeatureGate: component-base's logging API takes the
	// gate as an argument, so nothing needs the global, and two Options (in tests)
	// never share values.
	Gate featuregate.MutableVersionedFeatureGate
	// value is Gate as a flag value (featuregate's concrete type is one).
	value pflag.Value
	// versions is component-base's compatibility registry, with Gate as the "kube"
	// component's, as upstream's: --emulated-version sets the Kubernetes version whose
	// gate defaults the controllers have, --min-compatibility-version the oldest
	// version the gates must stay compatible with. Like Gate, it is these options' own.
	versions basecompatibility.ComponentGlobalsRegistry
}

// NewFeatureGateOptions returns every gate at its Kubernetes v1.37 default.
func NewFeatureGateOptions() *FeatureGateOptions {
	gate := featuregate.NewVersionedFeatureGate(emulatedVersion)
	// Both sets are fixed at compile time; failing to add them is a programming error.
	utilruntime.Must(gate.AddVersioned(controllerFeatureGates()))
	utilruntime.Must(logsapi.AddFeatureGates(gate))
	// Emulation reaches three minor versions back, as kube-controller-manager's.
	floor := emulatedVersion.SubtractMinor(3)
	versions := basecompatibility.NewComponentGlobalsRegistry()
	utilruntime.Must(versions.Register(basecompatibility.DefaultKubeComponent,
		basecompatibility.NewEffectiveVersion(emulatedVersion, false, floor, floor), gate))
	return &FeatureGateOptions{Gate: gate, value: gate, versions: versions}
}

// AddFlags adds --feature-gates, --emulated-version and --min-compatibility-version to
// fs. The gate accepts no new gates afterwards.
func (o *FeatureGateOptions) AddFlags(fs *pflag.FlagSet) {
	o.Gate.Close()
	// The registry's own --feature-gates takes "component:gate=value" pairs for the
	// several components of an apiserver; mini-kcm has one, so it keeps its own flag
	// and takes only the two version flags.
	registryFlags := pflag.NewFlagSet("compatibility", pflag.ContinueOnError)
	o.versions.AddFlags(registryFlags)
	fs.AddFlag(registryFlags.Lookup("emulated-version"))
	fs.AddFlag(registryFlags.Lookup("min-compatibility-version"))
	fs.Var(gateFlag{o.value}, "feature-gates",
		"A set of key=value pairs that turn features on or off, e.g. PodDeletionCost=false,LoggingAlphaOptions=true. "+
			"The controllers' gates have the names and defaults of kube-controller-manager v1.37; turning one off "+
			"makes mini-kcm behave as kube-controller-manager does with it off. Options are:\n"+
			strings.Join(o.Gate.KnownFeatures(), "\n"))
}

// Validate applies --emulated-version and --min-compatibility-version to the gate (the
// values set with --feature-gates stay) and checks them, and rechecks the gates set
// against their dependencies at the emulated version. Unknown and locked gates are
// already refused while the flag is parsed.
func (o *FeatureGateOptions) Validate() []error {
	if err := o.versions.Set(); err != nil {
		return []error{fmt.Errorf("--emulated-version, --min-compatibility-version: %w; both take a Kubernetes "+
			"major.minor version from %s to %s, the minimum compatibility version at most the emulated one",
			err, emulatedVersion.SubtractMinor(3), emulatedVersion)}
	}
	var errs []error
	for _, err := range o.versions.Validate() {
		errs = append(errs, fmt.Errorf("--emulated-version, --min-compatibility-version or --feature-gates: %w", err))
	}
	return errs
}

// ApplyTo resolves the controllers' gates into their configuration.
func (o *FeatureGateOptions) ApplyTo(cfg *controllers.Config) {
	cfg.Features = controllers.Features{
		PodDeletionCost:                         o.Gate.Enabled(PodDeletionCost),
		DeploymentReplicaSetTerminatingReplicas: o.Gate.Enabled(DeploymentReplicaSetTerminatingReplicas),
		StaleControllerConsistencyReplicaSet:    o.Gate.Enabled(StaleControllerConsistencyReplicaSet),
	}
}

// gateFlag is the gate as a flag value, with a hint on how to fix a refused value added
// to featuregate's message (which pflag prefixes with the flag and the value).
type gateFlag struct {
	pflag.Value
}

// Set implements pflag.Value.
func (f gateFlag) Set(value string) error {
	if err := f.Value.Set(value); err != nil {
		return fmt.Errorf("%w; mini-kcm --help lists under --feature-gates the gates it knows and which can be "+
			"changed, as key=true|false pairs separated by commas", err)
	}
	return nil
}
