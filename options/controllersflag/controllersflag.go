// Package controllersflag evaluates a --controllers value by kube-controller-manager's
// rules (cmd/kube-controller-manager/app/controllermanager.go, IsControllerEnabled):
// '*' enables every controller on by default, 'foo' enables foo, '-foo' disables it, the
// first entry naming a controller decides, and aliases count as their controller.
//
// The rules are evaluated against any List: this binary's registry, or
// kube-controller-manager's own list when a hand-over reads its flags (package handover).
// The package depends on nothing heavier than pflag, so that its fuzz target (run by
// make test-fuzz, which instruments every package a fuzzed test links) stays cheap to
// build.
package controllersflag

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// List is a set of controllers that a --controllers value is evaluated against.
type List interface {
	// Names returns every canonical name, sorted.
	Names() []string
	// Canonical resolves a name or alias; ok is false for an unknown name.
	Canonical(nameOrAlias string) (name string, ok bool)
	// DisabledByDefault returns the names "*" does not enable.
	DisabledByDefault() []string
}

// AllOnByDefault is the --controllers entry that enables every controller not disabled
// by default, and the flag's default value.
const AllOnByDefault = "*"

// AddFlag adds --controllers to fs, stored in *entries (whose value is the default), with
// upstream's help text followed by list's names, so that `--help` is the reference for
// valid values.
func AddFlag(fs *pflag.FlagSet, entries *[]string, list List) {
	fs.StringSliceVar(entries, "controllers", *entries, fmt.Sprintf("A list of controllers to enable. '*' enables all "+
		"on-by-default controllers, 'foo' enables the controller named 'foo', '-foo' disables the controller named "+
		"'foo'. The first entry that names a controller decides; aliases are accepted.\n"+
		"All controllers: %s\nDisabled-by-default controllers: %s",
		strings.Join(list.Names(), ", "), strings.Join(list.DisabledByDefault(), ", ")))
}

// Unknown returns an error for every entry other than "*" that names no controller of
// list, with or without a leading "-". Like upstream, the error quotes the name without
// its "-", and every unknown name is reported, not just the first.
func Unknown(list List, entries []string) []error {
	var errs []error
	for _, entry := range entries {
		if entry == AllOnByDefault {
			continue
		}
		name := strings.TrimPrefix(entry, "-")
		if _, ok := list.Canonical(name); !ok {
			errs = append(errs, fmt.Errorf("%q is not in the list of known controllers", name))
		}
	}
	return errs
}

// Enabled returns, sorted, the canonical names of list's controllers that the entries
// turn on. Entries naming no controller of list are ignored (Unknown reports them).
func Enabled(list List, entries []string) []string {
	canonical := canonicalEntries(list, entries)
	disabledByDefault := list.DisabledByDefault()
	enabled := []string{}
	for _, name := range list.Names() {
		if enabledBy(name, slices.Contains(disabledByDefault, name), canonical) {
			enabled = append(enabled, name)
		}
	}
	return enabled
}

// canonicalEntries rewrites aliases to canonical names and keeps a leading "-", so that
// "replicaset,-replicaset-controller" is seen as two entries about the same controller.
// Unknown names are kept as they are.
func canonicalEntries(list List, entries []string) []string {
	out := make([]string, len(entries))
	for i, entry := range entries {
		name, disable := strings.CutPrefix(entry, "-")
		if canonical, ok := list.Canonical(name); ok {
			name = canonical
		}
		if disable {
			name = "-" + name
		}
		out[i] = name
	}
	return out
}

// enabledBy applies upstream's rule to canonicalised entries: the first entry naming the
// controller wins ("name" on, "-name" off); without one, the controller runs only if "*"
// is present and it is not disabled by default.
func enabledBy(name string, disabledByDefault bool, entries []string) bool {
	star := false
	for _, entry := range entries {
		switch entry {
		case name:
			return true
		case "-" + name:
			return false
		case AllOnByDefault:
			star = true
		}
	}
	return star && !disabledByDefault
}
