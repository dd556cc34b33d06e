package controllers

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/component-base/featuregate"
)

type builtController struct{}

func (builtController) Run(context.Context, int) {}

func gated(name string, gates []FeatureGate, required ...featuregate.Feature) Descriptor {
	return Descriptor{
		Name: name,
		New: func(context.Context, Context) (Controller, int, error) {
			return builtController{}, 1, nil
		},
		FeatureGates:         gates,
		RequiredFeatureGates: required,
	}
}

var alphaGate = FeatureGate{Name: "PodLabeler", Specs: featuregate.VersionedSpecs{
	{Version: version.MustParse("1.37"), Default: false, PreRelease: featuregate.Alpha},
}}

// A controller whose required gate is off is not built, as upstream's requiredFeatureGates.
func TestBuildSkipsAControllerWhoseRequiredGateIsOff(t *testing.T) {
	d := gated("podlabeler-controller", []FeatureGate{alphaGate}, alphaGate.Name)
	for _, tc := range []struct {
		features  Features
		wantBuilt bool
	}{{Features{alphaGate.Name: true}, true}, {Features{alphaGate.Name: false}, false}, {nil, false}} {
		c, _, err := d.Build(context.Background(), Context{Config: Config{Features: tc.features}})
		if err != nil || (c != nil) != tc.wantBuilt {
			t.Errorf("with %v: Build = %v, %v; want built %v", tc.features, c, err, tc.wantBuilt)
		}
	}
}

// The registry offers each gate once, and refuses gates that --feature-gates could not
// offer or that the app could not check.
func TestRegistryValidatesFeatureGates(t *testing.T) {
	other := FeatureGate{Name: alphaGate.Name, Specs: featuregate.VersionedSpecs{
		{Version: version.MustParse("1.36"), Default: true, PreRelease: featuregate.Beta},
	}}
	reg, err := NewRegistry(gated("a-controller", []FeatureGate{alphaGate}), gated("b-controller", []FeatureGate{alphaGate}, alphaGate.Name))
	if err != nil {
		t.Fatal(err)
	}
	if gates := reg.FeatureGates(); len(gates) != 1 || len(gates[alphaGate.Name]) != 1 {
		t.Errorf("FeatureGates = %v, want PodLabeler once", gates)
	}
	for name, ds := range map[string][]Descriptor{
		"twice with different histories": {gated("a-controller", []FeatureGate{alphaGate}), gated("b-controller", []FeatureGate{other})},
		"required but not declared":      {gated("a-controller", nil, alphaGate.Name)},
		"without a history":              {gated("a-controller", []FeatureGate{{Name: "X"}})},
	} {
		if _, err := NewRegistry(ds...); err == nil || !strings.Contains(err.Error(), "feature gate") {
			t.Errorf("%s: NewRegistry = %v, want a feature gate error", name, err)
		}
	}
}
