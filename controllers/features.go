package controllers

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"
)

// FeatureGate is a gate of Kubernetes' pkg/features that a controller honours, under
// upstream's name and with the history of defaults upstream declares for it, so that a
// kube-controller-manager --feature-gates value means the same here. A descriptor lists
// the gates its controller reads (FeatureGates); the options package adds every
// registered gate to --feature-gates, and the controller reads the resolved state with
// Features.Enabled.
type FeatureGate struct {
	Name  featuregate.Feature
	Specs featuregate.VersionedSpecs
}

// DeploymentReplicaSetTerminatingReplicas is the one gate two controllers read: the
// ReplicaSet controller counts terminating pods into status.terminatingReplicas and the
// Deployment controller sums its ReplicaSets' counts. Off, both leave the field unset
// (and clear it if set).
var DeploymentReplicaSetTerminatingReplicas = FeatureGate{
	Name: "DeploymentReplicaSetTerminatingReplicas",
	Specs: featuregate.VersionedSpecs{
		{Version: version.MustParse("1.33"), Default: false, PreRelease: featuregate.Alpha},
		{Version: version.MustParse("1.35"), Default: true, PreRelease: featuregate.Beta},
	},
}

// Features holds the state of every registered gate, resolved once from
// --feature-gates. A gate that is off makes its controllers behave as upstream's do with
// it off. A map rather than a gate lookup keeps the controllers free of flag plumbing
// and lets a test state exactly which gates are on; a gate it does not name is off.
type Features map[featuregate.Feature]bool

// Enabled reports whether gate is on.
func (f Features) Enabled(gate FeatureGate) bool { return f[gate.Name] }

// Build builds the controller with its constructor, unless one of its
// RequiredFeatureGates is off in cc: then it returns no controller, which the app skips,
// as kube-controller-manager's BuildController does.
func (d Descriptor) Build(ctx context.Context, cc Context) (Controller, int, error) {
	for _, g := range d.RequiredFeatureGates {
		if !cc.Config.Features[g] {
			klog.FromContext(ctx).Info("Controller is disabled by a feature gate",
				"controller", d.Name, "requiredFeatureGates", d.RequiredFeatureGates)
			return nil, 0, nil
		}
	}
	return d.New(ctx, cc)
}

// FeatureGates returns every gate a registered controller honours, with its history,
// for --feature-gates.
func (r *Registry) FeatureGates() map[featuregate.Feature]featuregate.VersionedSpecs {
	gates := map[featuregate.Feature]featuregate.VersionedSpecs{}
	for _, d := range r.descriptors {
		for _, g := range d.FeatureGates {
			gates[g.Name] = slices.Clone(g.Specs)
		}
	}
	return gates
}

// validateFeatureGates checks d's gates against those of the descriptors registered
// before it (gates, by name): a gate has a name and a history, two controllers that
// honour the same gate agree on its history, and a required gate is one d honours.
func validateFeatureGates(d Descriptor, gates map[featuregate.Feature]FeatureGate) error {
	for _, g := range d.FeatureGates {
		if g.Name == "" || len(g.Specs) == 0 {
			return fmt.Errorf("feature gate %+v needs a name and the history of its defaults", g)
		}
		if other, ok := gates[g.Name]; ok && !reflect.DeepEqual(other.Specs, g.Specs) {
			return fmt.Errorf("feature gate %s is declared twice with different histories; declare it once "+
				"where both controllers can use it (as DeploymentReplicaSetTerminatingReplicas)", g.Name)
		}
		gates[g.Name] = g
	}
	for _, name := range d.RequiredFeatureGates {
		if !slices.ContainsFunc(d.FeatureGates, func(g FeatureGate) bool { return g.Name == name }) {
			return fmt.Errorf("required feature gate %s is not among its FeatureGates", name)
		}
	}
	return nil
}
