package options

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/mini-kcm/mini-kcm/controllers"
)

// FeatureGateOptions holds --feature-gates: the gates the registered controllers declare
// in their descriptors (controllers.FeatureGate) and component-base's
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
	// controllerGates are the controllers' gates added to Gate. (Gate.GetAll would not
	// do: it omits the gates that do not exist yet at the emulated version.)
	controllerGates sets.Set[featuregate.Feature]
}

// NewFeatureGateOptions returns the logging gates at their Kubernetes v1.37 defaults;
// AddFlags adds the controllers' gates from the registry.
func NewFeatureGateOptions() *FeatureGateOptions {
	gate := featuregate.NewVersionedFeatureGate(emulatedVersion)
	// The set is fixed at compile time; failing to add it is a programming error.
	utilruntime.Must(logsapi.AddFeatureGates(gate))
	// Emulation reaches three minor versions back, as kube-controller-manager's.
	floor := oldestAPIServer
	versions := basecompatibility.NewComponentGlobalsRegistry()
	utilruntime.Must(versions.Register(basecompatibility.DefaultKubeComponent,
		basecompatibility.NewEffectiveVersion(emulatedVersion, false, floor, floor), gate))
	return &FeatureGateOptions{Gate: gate, value: gate, versions: versions, controllerGates: sets.New[featuregate.Feature]()}
}

// AddFlags adds the gates of reg's controllers to the gate, and --feature-gates,
// --emulated-version and --min-compatibility-version to fs. The gate accepts no new
// gates afterwards.
func (o *FeatureGateOptions) AddFlags(fs *pflag.FlagSet, reg *controllers.Registry) {
	o.addControllerGates(reg)
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

// ApplyTo resolves the gates of reg's controllers into their configuration.
func (o *FeatureGateOptions) ApplyTo(cfg *controllers.Config, reg *controllers.Registry) {
	o.addControllerGates(reg)
	cfg.Features = controllers.Features{}
	for name := range reg.FeatureGates() {
		cfg.Features[name] = o.Gate.Enabled(name)
	}
}

// addControllerGates adds the gates of reg's controllers that the gate does not know
// yet. The registry is compiled in and has validated its gates, so failing to add them
// is a programming error (as adding one after AddFlags closed the gate).
func (o *FeatureGateOptions) addControllerGates(reg *controllers.Registry) {
	missing := map[featuregate.Feature]featuregate.VersionedSpecs{}
	for name, specs := range reg.FeatureGates() {
		if !o.controllerGates.Has(name) {
			missing[name] = specs
		}
	}
	if len(missing) > 0 {
		utilruntime.Must(o.Gate.AddVersioned(missing))
		o.controllerGates.Insert(slices.Collect(maps.Keys(missing))...)
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
