package options

import (
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json, as in the binary

	"github.com/mini-kcm/mini-kcm/controllers"
)

// parseError parses args onto fresh options and returns the parse error.
func parseError(t *testing.T, args ...string) error {
	t.Helper()
	fss := NewOptions().Flags(testRegistry(t))
	// NamedFlagSets' own sets exit the process on a parse error.
	fs := pflag.NewFlagSet("all", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, name := range fss.Order {
		fs.AddFlagSet(fss.FlagSets[name])
	}
	return fs.Parse(args)
}

// allFeatures is every controller gate on, Kubernetes v1.37's default.
var allFeatures = features(PodDeletionCost, DeploymentReplicaSetTerminatingReplicas, StaleControllerConsistencyReplicaSet)

// The gates testRegistry's controllers declare.
const (
	PodDeletionCost                         featuregate.Feature = "PodDeletionCost"
	DeploymentReplicaSetTerminatingReplicas featuregate.Feature = "DeploymentReplicaSetTerminatingReplicas"
	StaleControllerConsistencyReplicaSet    featuregate.Feature = "StaleControllerConsistencyReplicaSet"
)

// features returns the state of testRegistry's gates with exactly those of on on.
func features(on ...featuregate.Feature) controllers.Features {
	f := controllers.Features{}
	for _, name := range []featuregate.Feature{PodDeletionCost, DeploymentReplicaSetTerminatingReplicas, StaleControllerConsistencyReplicaSet} {
		f[name] = slices.Contains(on, name)
	}
	return f
}

func TestFeatureGatesTurnControllerFeaturesOff(t *testing.T) {
	tests := []struct {
		name  string
		gates string
		want  controllers.Features
	}{
		{"defaults are Kubernetes 1.37's: all on", "", allFeatures},
		{"PodDeletionCost off", "PodDeletionCost=false",
			features(DeploymentReplicaSetTerminatingReplicas, StaleControllerConsistencyReplicaSet)},
		{"DeploymentReplicaSetTerminatingReplicas off", "DeploymentReplicaSetTerminatingReplicas=false",
			features(PodDeletionCost, StaleControllerConsistencyReplicaSet)},
		{"StaleControllerConsistencyReplicaSet off", "StaleControllerConsistencyReplicaSet=false",
			features(PodDeletionCost, DeploymentReplicaSetTerminatingReplicas)},
		{"AllBeta=false turns every beta gate off, as upstream", "AllBeta=false", features()},
		{"an explicit gate wins over AllBeta", "AllBeta=false,PodDeletionCost=true", features(PodDeletionCost)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := testRegistry(t)
			args := []string{"--kubeconfig", writeFile(t, "kubeconfig", validKubeconfig)}
			if tc.gates != "" {
				args = append(args, "--feature-gates="+tc.gates)
			}
			cfg, err := parse(t, reg, args...).Config(reg)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(cfg.Controllers.Features, tc.want) {
				t.Errorf("features = %+v, want %+v", cfg.Controllers.Features, tc.want)
			}
		})
	}
}

func TestFeatureGatesRefuseUnknownGatesAndValuesWithAHint(t *testing.T) {
	tests := []struct {
		arg  string
		want string
	}{
		{"--feature-gates=PodDeletionKost=false", "unrecognized feature gate: PodDeletionKost"},
		{"--feature-gates=PodDeletionCost=maybe", "invalid value of PodDeletionCost=maybe"},
		{"--feature-gates=PodDeletionCost", "missing bool value for PodDeletionCost"},
	}
	for _, tc := range tests {
		err := parseError(t, tc.arg)
		if err == nil {
			t.Errorf("%s: parsed, want an error", tc.arg)
			continue
		}
		for _, want := range []string{`for "--feature-gates" flag`, tc.want, "--help lists under --feature-gates"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not contain %q", tc.arg, err, want)
			}
		}
	}
}

// The logging gates are component-base's: the logging configuration is validated
// against our gate, so a gate set on the command line reaches it.
func TestLoggingGatesGuardTheLoggingFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string // empty: valid
	}{
		{"split stream needs LoggingAlphaOptions", []string{"--logging-format=json", "--log-json-split-stream"},
			"Feature LoggingAlphaOptions is disabled"},
		{"LoggingAlphaOptions allows split stream", []string{"--logging-format=json", "--log-json-split-stream",
			"--feature-gates=LoggingAlphaOptions=true"}, ""},
		{"text split stream too", []string{"--log-text-split-stream", "--feature-gates=LoggingAlphaOptions=true"}, ""},
		{"JSON is beta and on by default", []string{"--logging-format=json"}, ""},
		{"LoggingBetaOptions off turns JSON off", []string{"--logging-format=json", "--feature-gates=LoggingBetaOptions=false"},
			"Log format json is disabled, see LoggingBetaOptions feature"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := parse(t, testRegistry(t), tc.args...)
			errs := logsapi.Validate(o.Logs, o.FeatureGates.Gate, nil)
			switch {
			case tc.wantErr == "" && len(errs) > 0:
				t.Errorf("logging configuration refused: %v", errs)
			case tc.wantErr != "" && !strings.Contains(errs.ToAggregate().Error(), tc.wantErr):
				t.Errorf("errors %v, want one containing %q", errs, tc.wantErr)
			}
		})
	}
}

func TestContextualLoggingIsAGateOnByDefault(t *testing.T) {
	if !NewFeatureGateOptions().Gate.Enabled(logsapi.ContextualLogging) {
		t.Error("ContextualLogging is off by default, want on as in Kubernetes 1.37")
	}
	o := parse(t, testRegistry(t), "--feature-gates=ContextualLogging=false")
	if o.FeatureGates.Gate.Enabled(logsapi.ContextualLogging) {
		t.Error("--feature-gates=ContextualLogging=false left it on")
	}
}

func TestFeatureGatesHelpListsEveryGateWithItsDefault(t *testing.T) {
	fss := NewOptions().Flags(testRegistry(t))
	help := fss.FlagSet("generic").Lookup("feature-gates").Usage
	for _, want := range []string{
		"PodDeletionCost=true|false (BETA - default=true)",
		"DeploymentReplicaSetTerminatingReplicas=true|false (BETA - default=true)",
		"StaleControllerConsistencyReplicaSet=true|false (BETA - default=true)",
		"ContextualLogging=true|false (BETA - default=true)",
		"LoggingAlphaOptions=true|false (ALPHA - default=false)",
		"LoggingBetaOptions=true|false (BETA - default=true)",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("--feature-gates help does not list %q:\n%s", want, help)
		}
	}
}

// Two Options never share gate values: the gate is not a process global.
func TestEachOptionsHasItsOwnFeatureGate(t *testing.T) {
	reg := testRegistry(t)
	parse(t, reg, "--feature-gates=PodDeletionCost=false")
	if !parse(t, reg).FeatureGates.Gate.Enabled(PodDeletionCost) {
		t.Error("a gate turned off in one Options is off in another")
	}
}

func TestEmulatedVersionGivesTheGateDefaultsOfThatVersion(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    controllers.Features
		wantErr string
	}{
		{"1.37, the default", []string{"--emulated-version=1.37"}, allFeatures, ""},
		// DeploymentReplicaSetTerminatingReplicas turned beta in 1.35 and
		// StaleControllerConsistencyReplicaSet appeared in 1.36.
		{"1.34 has only PodDeletionCost on", []string{"--emulated-version=1.34"}, features(PodDeletionCost), ""},
		{"an explicit gate wins over the emulated default",
			[]string{"--emulated-version=kube=1.34", "--feature-gates=DeploymentReplicaSetTerminatingReplicas=true"},
			features(PodDeletionCost, DeploymentReplicaSetTerminatingReplicas), ""},
		{"more than three versions back", []string{"--emulated-version=1.33"}, features(),
			"emulation version 1.33 is not between [1.34, 1.37"},
		{"a minimum compatibility above the emulated version", []string{"--emulated-version=1.35", "--min-compatibility-version=1.36"},
			features(), "minCompatibilityVersion version 1.36 is not between [1.34, 1.35]"},
		{"an unknown component", []string{"--emulated-version=wardle=1.2"}, features(),
			"--emulated-version, --min-compatibility-version: component not registered: wardle"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := testRegistry(t)
			args := append([]string{"--kubeconfig", writeFile(t, "kubeconfig", validKubeconfig)}, tc.args...)
			cfg, err := parse(t, reg, args...).Config(reg)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %v, want it to contain %q", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case !maps.Equal(cfg.Controllers.Features, tc.want):
				t.Errorf("features = %+v, want %+v", cfg.Controllers.Features, tc.want)
			}
		})
	}
}
