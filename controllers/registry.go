// Package controllers defines what a mini-kcm controller is and how the app finds,
// builds and runs one: a Descriptor per controller, a Registry that rejects duplicate
// names and aliases, and the Context every constructor receives.
//
// A controller's constructor must ask the shared informer factory for every informer it
// needs before it returns: the app starts the factory once, after all constructors ran,
// and an informer requested later would never start (kubernetes#92777).
package controllers

import (
	"context"
	"fmt"
	"regexp"
	"sort"
)

// Controller is one running control loop.
type Controller interface {
	// Name is the canonical name of the controller, e.g. "replicaset-controller".
	Name() string
	// Run blocks until ctx is cancelled and returns only after every goroutine it
	// started (workers, timers) has stopped, so the app can release the lease safely.
	Run(ctx context.Context)
}

// Constructor builds a controller. It registers the informers it needs with
// cc.InformerFactory and must not start them. A nil Controller with a nil error means
// the controller decided not to run (it is logged and skipped); an error aborts the
// start of every controller.
type Constructor func(ctx context.Context, cc Context) (Controller, error)

// Descriptor describes one controller to the registry.
type Descriptor struct {
	// Name is canonical: lowercase, resources without hyphens, "-controller" suffix.
	Name string
	// Aliases are other names accepted by --controllers, e.g. "replicaset".
	Aliases []string
	// ServiceAccountName is the controller's ServiceAccount in kube-system under
	// --use-service-account-credentials, named like upstream's; empty means Name.
	ServiceAccountName string
	// DisabledByDefault controllers run only when --controllers names them.
	DisabledByDefault bool
	// New builds the controller.
	New Constructor
	// NewOptions returns the controller's options with their defaults; nil means the
	// controller has no flags of its own.
	NewOptions func() Options
}

// namePattern is upstream's naming rule for controller names.
var namePattern = regexp.MustCompile(`^[a-z]+(-[a-z]+)*-controller$`)

// Registry is an immutable, validated set of descriptors.
type Registry struct {
	descriptors map[string]Descriptor
	aliases     map[string]string // alias -> canonical name
}

// NewRegistry validates the descriptors and returns a registry. It fails on an invalid
// or duplicate name, a duplicate alias, an alias that is also a name, or a missing
// constructor: all programming errors, reported with the offending name.
func NewRegistry(descriptors ...Descriptor) (*Registry, error) {
	r := &Registry{descriptors: map[string]Descriptor{}, aliases: map[string]string{}}
	for _, d := range descriptors {
		if !namePattern.MatchString(d.Name) {
			return nil, fmt.Errorf("controller name %q must match %s", d.Name, namePattern)
		}
		if d.New == nil {
			return nil, fmt.Errorf("controller %q has no constructor", d.Name)
		}
		if _, dup := r.descriptors[d.Name]; dup {
			return nil, fmt.Errorf("controller name %q was registered twice", d.Name)
		}
		if owner, isAlias := r.aliases[d.Name]; isAlias {
			return nil, fmt.Errorf("controller name %q conflicts with an alias of %q", d.Name, owner)
		}
		for _, alias := range d.Aliases {
			if _, isName := r.descriptors[alias]; isName || alias == d.Name {
				return nil, fmt.Errorf("alias %q of controller %q conflicts with a controller name", alias, d.Name)
			}
			if owner, dup := r.aliases[alias]; dup {
				return nil, fmt.Errorf("controller %q has a duplicate alias %q (already an alias of %q)", d.Name, alias, owner)
			}
			r.aliases[alias] = d.Name
		}
		d.Aliases = append([]string(nil), d.Aliases...)
		r.descriptors[d.Name] = d
	}
	return r, nil
}

// MustNewRegistry is NewRegistry for the fixed, compiled-in list of controllers, where an
// error can only be a programming mistake caught by the first test run.
func MustNewRegistry(descriptors ...Descriptor) *Registry {
	r, err := NewRegistry(descriptors...)
	if err != nil {
		panic(err)
	}
	return r
}

// Names returns every canonical controller name, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.descriptors))
	for name := range r.descriptors {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Descriptors returns every descriptor, sorted by name.
func (r *Registry) Descriptors() []Descriptor {
	ds := make([]Descriptor, 0, len(r.descriptors))
	for _, name := range r.Names() {
		ds = append(ds, r.descriptors[name])
	}
	return ds
}

// DisabledByDefault returns the sorted names of controllers that "*" does not enable.
func (r *Registry) DisabledByDefault() []string {
	var names []string
	for _, name := range r.Names() {
		if r.descriptors[name].DisabledByDefault {
			names = append(names, name)
		}
	}
	return names
}

// Canonical resolves a name or alias to the canonical name; ok is false for an unknown name.
func (r *Registry) Canonical(nameOrAlias string) (name string, ok bool) {
	if _, ok := r.descriptors[nameOrAlias]; ok {
		return nameOrAlias, true
	}
	name, ok = r.aliases[nameOrAlias]
	return name, ok
}

// Get returns the descriptor of a canonical name.
func (r *Registry) Get(name string) (Descriptor, bool) {
	d, ok := r.descriptors[name]
	return d, ok
}

// ServiceAccount returns the ServiceAccount a controller writes as under
// --use-service-account-credentials: its descriptor's, or its name.
func (d Descriptor) ServiceAccount() string {
	if d.ServiceAccountName != "" {
		return d.ServiceAccountName
	}
	return d.Name
}
