package controllersflag

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// testList is a List as the registry gives one: canonical names with aliases, one
// controller disabled by default, so that every branch of the rules is reachable.
type testList struct {
	canonical map[string]string // every name and alias → canonical name
	off       []string
}

func newTestList() testList {
	return testList{
		canonical: map[string]string{
			"replicaset-controller": "replicaset-controller", "replicaset": "replicaset-controller",
			"deployment-controller": "deployment-controller", "deployment": "deployment-controller",
			"endpoints-controller": "endpoints-controller", "endpoints": "endpoints-controller", "endpoint": "endpoints-controller",
			"tokencleaner-controller": "tokencleaner-controller",
		},
		off: []string{"tokencleaner-controller"},
	}
}

func (l testList) Names() []string {
	return slices.Compact(slices.Sorted(maps.Values(l.canonical)))
}

func (l testList) Canonical(name string) (string, bool) {
	c, ok := l.canonical[name]
	return c, ok
}

func (l testList) DisabledByDefault() []string { return l.off }

// FuzzControllersFlag feeds arbitrary --controllers values through the flag as AddFlag
// registers it, then Unknown and Enabled, and checks them against a model of upstream's
// rules written independently of the code: every unknown name is reported exactly once,
// nothing known is reported, and a valid value enables exactly the controllers the model
// enables.
func FuzzControllersFlag(f *testing.F) {
	for _, seed := range []string{
		"*", "", "*,-replicaset", "replicaset,-replicaset-controller", "-replicaset,replicaset",
		"-*", ",,,", `"quoted,name",*`, "endpoint,-endpoints", "tokencleaner-controller", "*,-*",
		"*,tokencleaner-controller,-deployment", "no-such-controller,-also-missing", " replicaset", "--replicaset",
	} {
		f.Add(seed)
	}
	list := newTestList()
	disabledByDefault := map[string]bool{"tokencleaner-controller": true}

	f.Fuzz(func(t *testing.T, value string) {
		entries := []string{AllOnByDefault}
		// As cobra does: errors are returned, not turned into an exit.
		fs := pflag.NewFlagSet("mini-kcm", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		AddFlag(fs, &entries, list)
		if err := fs.Parse([]string{"--controllers=" + value}); err != nil {
			return // malformed CSV is pflag's to reject, with an error, not a panic
		}

		// Unknown: one error per unknown entry, naming it without its "-".
		var unknown []string
		for _, entry := range entries {
			if entry == "*" {
				continue
			}
			if _, ok := list.canonical[strings.TrimPrefix(entry, "-")]; !ok {
				unknown = append(unknown, strings.TrimPrefix(entry, "-"))
			}
		}
		errs := Unknown(list, entries)
		if len(errs) != len(unknown) {
			t.Fatalf("--controllers=%q: %d errors %v, want one for each of %q", value, len(errs), errs, unknown)
		}
		for i, err := range errs {
			if !strings.Contains(err.Error(), fmt.Sprintf("%q", unknown[i])) {
				t.Fatalf("--controllers=%q: error %q does not name %q", value, err, unknown[i])
			}
		}
		if len(unknown) > 0 {
			return
		}

		// Enabled: the first entry naming a controller decides; otherwise "*" turns on
		// those enabled by default.
		var want []string
		for _, name := range list.Names() {
			decided, on, star := false, false, false
			for _, entry := range entries {
				if entry == "*" {
					star = true
					continue
				}
				if list.canonical[strings.TrimPrefix(entry, "-")] == name {
					decided, on = true, !strings.HasPrefix(entry, "-")
					break
				}
			}
			if (decided && on) || (!decided && star && !disabledByDefault[name]) {
				want = append(want, name)
			}
		}
		slices.Sort(want)
		got := Enabled(list, entries)
		if !slices.Equal(got, want) {
			t.Fatalf("--controllers=%q enables %v, want %v", value, got, want)
		}
		// The result, given back as the flag, selects itself.
		if again := Enabled(list, got); !slices.Equal(again, got) {
			t.Fatalf("--controllers=%q: %v given back selects %v", value, got, again)
		}
	})
}
