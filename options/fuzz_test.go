package options

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// FuzzControllersFlag feeds arbitrary --controllers values through flag parsing,
// validation and selection, and checks them against a model of upstream's rules written
// independently of the code: every unknown name is reported exactly once, nothing known
// is reported, and a valid value enables exactly the controllers the model enables.
func FuzzControllersFlag(f *testing.F) {
	for _, seed := range []string{
		"*", "", "*,-replicaset", "replicaset,-replicaset-controller", "-replicaset,replicaset",
		"-*", ",,,", `"quoted,name",*`, "endpoint,-endpoints", "tokencleaner-controller", "*,-*",
		"*,tokencleaner-controller,-deployment", "no-such-controller,-also-missing", " replicaset", "--replicaset",
	} {
		f.Add(seed)
	}
	// The model's view of testRegistry: canonical name of every name and alias, and
	// which controllers are off by default.
	canonical := map[string]string{
		"replicaset-controller": "replicaset-controller", "replicaset": "replicaset-controller",
		"deployment-controller": "deployment-controller", "deployment": "deployment-controller",
		"endpoints-controller": "endpoints-controller", "endpoints": "endpoints-controller", "endpoint": "endpoints-controller",
		"tokencleaner-controller": "tokencleaner-controller",
	}
	disabledByDefault := map[string]bool{"tokencleaner-controller": true}

	f.Fuzz(func(t *testing.T, value string) {
		reg := testRegistry(t)
		o := NewOptions()
		fss := o.Flags(reg)
		// As cobra does: errors are returned, not turned into an exit.
		fs := pflag.NewFlagSet("mini-kcm", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		for _, name := range fss.Order {
			fs.AddFlagSet(fss.FlagSets[name])
		}
		if err := fs.Parse([]string{"--controllers=" + value}); err != nil {
			return // malformed CSV is pflag's to reject, with an error, not a panic
		}
		entries := o.Generic.Controllers

		// Validation: one error per unknown entry, naming it without its "-".
		var unknown []string
		for _, entry := range entries {
			if entry == "*" {
				continue
			}
			if _, ok := canonical[strings.TrimPrefix(entry, "-")]; !ok {
				unknown = append(unknown, strings.TrimPrefix(entry, "-"))
			}
		}
		errs := validateControllers(reg, entries)
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

		// Selection: the first entry naming a controller decides; otherwise "*" turns on
		// those enabled by default.
		var want []string
		for _, name := range reg.Names() {
			decided, on, star := false, false, false
			for _, entry := range entries {
				if entry == "*" {
					star = true
					continue
				}
				if canonical[strings.TrimPrefix(entry, "-")] == name {
					decided, on = true, !strings.HasPrefix(entry, "-")
					break
				}
			}
			if (decided && on) || (!decided && star && !disabledByDefault[name]) {
				want = append(want, name)
			}
		}
		slices.Sort(want)
		got := enabledControllers(reg, entries)
		if !slices.Equal(got, want) {
			t.Fatalf("--controllers=%q enables %v, want %v", value, got, want)
		}
		// The result, given back as the flag, selects itself.
		if again := enabledControllers(reg, got); !slices.Equal(again, got) {
			t.Fatalf("--controllers=%q: %v given back selects %v", value, got, again)
		}
	})
}
