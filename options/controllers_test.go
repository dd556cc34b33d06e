package options

import (
	"context"
	"reflect"
	"strings"
	"testing"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"

	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/controllers/deployment"
	"github.com/mini-kcm/mini-kcm/controllers/endpoints"
	"github.com/mini-kcm/mini-kcm/controllers/replicaset"
	"github.com/mini-kcm/mini-kcm/options/controllersflag"
)

// testRegistry holds the product's controllers, whose descriptors carry their flags, plus
// one disabled by default, so that every branch of the --controllers rules is reachable.
func testRegistry(t *testing.T) *controllers.Registry {
	t.Helper()
	noop := func(context.Context, controllers.Context) (controllers.Controller, int, error) { return nil, 0, nil }
	reg, err := controllers.NewRegistry(
		replicaset.Descriptor(),
		deployment.Descriptor(),
		endpoints.Descriptor(),
		controllers.Descriptor{Name: "tokencleaner-controller", DisabledByDefault: true, New: noop},
	)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func TestControllersFlagSelectsControllersLikeUpstream(t *testing.T) {
	allOn := []string{"deployment-controller", "endpoints-controller", "replicaset-controller"}
	tests := []struct {
		name        string
		entries     []string
		wantEnabled []string
		wantErrs    []string
	}{
		{name: "star enables on-by-default controllers", entries: []string{"*"}, wantEnabled: allOn},
		{name: "minus disables one", entries: []string{"*", "-replicaset-controller"},
			wantEnabled: []string{"deployment-controller", "endpoints-controller"}},
		{name: "a name alone enables only that one", entries: []string{"deployment-controller"},
			wantEnabled: []string{"deployment-controller"}},
		{name: "aliases are canonicalised", entries: []string{"*", "-replicaset", "-endpoint"},
			wantEnabled: []string{"deployment-controller"}},
		{name: "a name enables a disabled-by-default controller", entries: []string{"*", "tokencleaner-controller"},
			wantEnabled: append([]string{"deployment-controller", "endpoints-controller", "replicaset-controller"}, "tokencleaner-controller")},
		{name: "the first match wins, enabling", entries: []string{"replicaset", "-replicaset"},
			wantEnabled: []string{"replicaset-controller"}},
		{name: "the first match wins, disabling", entries: []string{"-replicaset-controller", "*", "replicaset"},
			wantEnabled: []string{"deployment-controller", "endpoints-controller"}},
		{name: "an empty list enables nothing without error", entries: []string{}, wantEnabled: []string{}},
		{name: "an unknown name is an error", entries: []string{"foo"},
			wantErrs: []string{`"foo" is not in the list of known controllers`}},
		{name: "every unknown name is reported, without its minus", entries: []string{"-foo", "bar", "replicaset"},
			wantErrs: []string{`"foo" is not in the list of known controllers`, `"bar" is not in the list of known controllers`}},
		{name: "minus star is an error", entries: []string{"-*"},
			wantErrs: []string{`"*" is not in the list of known controllers`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := testRegistry(t)
			errs := controllersflag.Unknown(reg, tc.entries)
			var got []string
			for _, err := range errs {
				got = append(got, err.Error())
			}
			if !reflect.DeepEqual(got, tc.wantErrs) {
				t.Fatalf("errors = %q, want %q", got, tc.wantErrs)
			}
			if len(errs) > 0 {
				return
			}
			if enabled := controllersflag.Enabled(reg, tc.entries); !reflect.DeepEqual(enabled, tc.wantEnabled) {
				t.Errorf("enabled = %q, want %q", enabled, tc.wantEnabled)
			}
		})
	}
}

func TestControllersFlagParsesEmptyValueAsNothingEnabled(t *testing.T) {
	reg := testRegistry(t)
	o := NewOptions()
	fss := o.Flags(reg)
	if err := fss.FlagSet("generic").Parse([]string{"--controllers="}); err != nil {
		t.Fatal(err)
	}
	if errs := controllersflag.Unknown(reg, o.Generic.Controllers); len(errs) > 0 {
		t.Fatalf("unexpected errors: %v", errs)
	}
	if enabled := controllersflag.Enabled(reg, o.Generic.Controllers); len(enabled) != 0 {
		t.Errorf("enabled = %q, want none", enabled)
	}
}

func TestUnknownControllersAreAggregatedIntoOneError(t *testing.T) {
	reg := testRegistry(t)
	err := utilerrors.NewAggregate(controllersflag.Unknown(reg, []string{"-foo", "bar"}))
	want := `["foo" is not in the list of known controllers, "bar" is not in the list of known controllers]`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
}

func TestControllersHelpListsAllAndDisabledByDefault(t *testing.T) {
	fss := NewOptions().Flags(testRegistry(t))
	help := fss.FlagSet("generic").Lookup("controllers").Usage
	for _, want := range []string{
		"All controllers: deployment-controller, endpoints-controller, replicaset-controller, tokencleaner-controller",
		"Disabled-by-default controllers: tokencleaner-controller",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("help %q does not contain %q", help, want)
		}
	}
}
