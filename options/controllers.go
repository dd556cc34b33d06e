package options

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mini-kcm/mini-kcm/controllers"
)

// ControllerList is a set of controllers that a --controllers value is evaluated
// against: the registry of this binary, or the list of another controller manager
// (kube-controller-manager's, to read its flags during a hand-over, see package handover).
type ControllerList interface {
	// Names returns every canonical name, sorted.
	Names() []string
	// Canonical resolves a name or alias; ok is false for an unknown name.
	Canonical(nameOrAlias string) (name string, ok bool)
	// DisabledByDefault returns the names "*" does not enable.
	DisabledByDefault() []string
}

// EnabledControllers returns, sorted, the canonical names of list's controllers that the
// --controllers entries turn on, by kube-controller-manager's rules (see
// controllerEnabled). Entries naming no controller of list are ignored.
func EnabledControllers(list ControllerList, entries []string) []string {
	return enabledControllers(list, entries)
}

// UnknownControllers returns the entries of a --controllers value, other than "*",
// that name no controller of list, with or without a leading "-".
func UnknownControllers(list ControllerList, entries []string) []error {
	return validateControllers(list, entries)
}

// allOnByDefault is the --controllers entry that enables every controller not marked
// DisabledByDefault.
const allOnByDefault = "*"

// controllersHelp is upstream's --controllers help text, followed by the names this
// binary knows, so that `mini-kcm --help` is the reference for valid values.
func controllersHelp(reg *controllers.Registry) string {
	return fmt.Sprintf("A list of controllers to enable. '*' enables all on-by-default controllers, "+
		"'foo' enables the controller named 'foo', '-foo' disables the controller named 'foo'. "+
		"The first entry that names a controller decides; aliases are accepted.\n"+
		"All controllers: %s\nDisabled-by-default controllers: %s",
		strings.Join(reg.Names(), ", "), strings.Join(reg.DisabledByDefault(), ", "))
}

// validateControllers checks that every entry of --controllers other than "*" names a
// known controller or alias, with or without a leading "-". Like upstream, the error
// quotes the name without its "-", and every unknown name is reported, not just the first.
func validateControllers(reg ControllerList, entries []string) []error {
	var errs []error
	for _, entry := range entries {
		if entry == allOnByDefault {
			continue
		}
		name := strings.TrimPrefix(entry, "-")
		if _, ok := reg.Canonical(name); !ok {
			errs = append(errs, fmt.Errorf("%q is not in the list of known controllers", name))
		}
	}
	return errs
}

// canonicalControllers rewrites aliases in --controllers to canonical names and keeps
// a leading "-", so that "replicaset,-replicaset-controller" is seen as two entries
// about the same controller. Unknown names are kept as they are; validation reports them.
func canonicalControllers(reg ControllerList, entries []string) []string {
	out := make([]string, len(entries))
	for i, entry := range entries {
		name, disable := strings.CutPrefix(entry, "-")
		if canonical, ok := reg.Canonical(name); ok {
			name = canonical
		}
		if disable {
			name = "-" + name
		}
		out[i] = name
	}
	return out
}

// controllerEnabled applies upstream's rule to canonicalised entries: the first entry
// naming the controller wins ("name" on, "-name" off); without one, the controller runs
// only if "*" is present and it is not disabled by default.
func controllerEnabled(name string, disabledByDefault bool, entries []string) bool {
	star := false
	for _, entry := range entries {
		switch entry {
		case name:
			return true
		case "-" + name:
			return false
		case allOnByDefault:
			star = true
		}
	}
	return star && !disabledByDefault
}

// enabledControllers returns, sorted, the canonical names of the controllers that
// --controllers turns on. It assumes the entries were validated.
func enabledControllers(reg ControllerList, entries []string) []string {
	canonical := canonicalControllers(reg, entries)
	disabledByDefault := reg.DisabledByDefault()
	enabled := []string{}
	for _, name := range reg.Names() {
		if controllerEnabled(name, slices.Contains(disabledByDefault, name), canonical) {
			enabled = append(enabled, name)
		}
	}
	return enabled
}
