// Package controllers defines what a mini-kcm controller is and how the app finds,
// builds and runs one: a Descriptor per controller, a Registry that rejects duplicate
// names and aliases, and the Context every constructor receives.
//
// The descriptor is the one place that knows a controller: besides its name and
// constructor it declares its ServiceAccount, the calls its own client makes, the
// resources it caches and what it reads of cached pods. deploy/rbac/ and the fence in
// deploy/fence/ are generated from the registry (make generate, hack/rbacgen), and a
// unit test fails when they drift; the shared informers keep of cached pods what the
// registry's controllers read (caches/cachetrim).
//
// A controller's constructor must ask the shared informer factory for every informer it
// needs before it returns: the app starts the factory once, after all constructors ran,
// and an informer requested later would never start (kubernetes#92777).
package controllers

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/component-base/featuregate"
)

// Controller is one control loop, built by its Constructor but not yet running. The
// app runs it with the worker count its constructor returned, as kube-controller-manager
// runs each of its controllers with its --concurrent-*-syncs.
type Controller interface {
	// Run waits for the controller's caches, then runs workers workers per queue until
	// ctx is cancelled. It returns only after every goroutine it started (workers,
	// timers) has stopped, so the app can release the lease safely.
	Run(ctx context.Context, workers int)
}

// Constructor builds a controller and returns the number of workers to run it with,
// read from its options. It registers the informers it needs with cc.InformerFactory
// and must not start them. A nil Controller with a nil error means the controller
// decided not to run (it is logged and skipped); an error, or fewer than one worker,
// aborts the start of every controller.
type Constructor func(ctx context.Context, cc Context) (c Controller, workers int, err error)

// Descriptor describes one controller to the registry.
type Descriptor struct {
	// Name is canonical: lowercase, resources without hyphens, "-controller" suffix.
	Name string
	// Aliases are other names accepted by --controllers, e.g. "replicaset".
	Aliases []string
	// ServiceAccountName is the controller's ServiceAccount in kube-system, which its
	// client writes as under --use-service-account-credentials; empty means
	// ServiceAccountPrefix + Name. It must start with ServiceAccountPrefix, see there.
	ServiceAccountName string
	// Rules are every call the controller's own client makes: its writes and its live
	// reads (a Get before adopting). deploy/rbac/ grants exactly these to its
	// ServiceAccount, and the fence policy covers every write among them.
	Rules []Rule
	// Caches are the resources the controller reads through the shared informers. The
	// process lists and watches them with its own identity, never the controller's
	// account, so that a controller's token reads nothing in bulk.
	Caches []schema.GroupResource
	// PodFields are the fields of cached pods the controller reads beyond their
	// metadata, and PodAnnotations the pod annotations it reads: the shared informers
	// keep of a pod its metadata and what some controller declares here (see PodField).
	PodFields      []PodField
	PodAnnotations []string
	// FeatureGates are the gates of Kubernetes' pkg/features the controller reads (see
	// FeatureGate); --feature-gates offers every registered controller's.
	FeatureGates []FeatureGate
	// RequiredFeatureGates, each among FeatureGates, must all be on for the controller to
	// run, as upstream's requiredFeatureGates: with one off, Build returns no controller
	// and the app skips it.
	RequiredFeatureGates []featuregate.Feature
	// DisabledByDefault controllers run only when --controllers names them.
	DisabledByDefault bool
	// New builds the controller.
	New Constructor
	// NewOptions returns the controller's options with their defaults; nil means the
	// controller has no flags of its own.
	NewOptions func() Options
}

// ServiceAccountPrefix starts the name of every controller's ServiceAccount. Never
// upstream's names ("replicaset-controller"): the bootstrap policy of every cluster binds
// system:controller:<name> to kube-system/<name>, which would add upstream's grants to
// ours (the Deployment controller could update pods).
const ServiceAccountPrefix = "mini-kcm-"

// Rule is one grant a controller needs, with the reason, which the generated YAML
// carries as a comment above the rule.
type Rule struct {
	// Why names the calls that need the rule, in a sentence or two.
	Why string
	// Group is the API group; "" is the core group.
	Group string
	// Resources are resources or resource/subresource pairs of Group.
	Resources []string
	// Verbs are RBAC verbs; never "*".
	Verbs []string
}

// PolicyRule returns the rule as RBAC writes it.
func (r Rule) PolicyRule() rbacv1.PolicyRule {
	return rbacv1.PolicyRule{
		APIGroups: []string{r.Group},
		Resources: slices.Clone(r.Resources),
		Verbs:     slices.Clone(r.Verbs),
	}
}

// validate rejects an empty rule and wildcards: a controller names each of its calls.
func (r Rule) validate() error {
	if len(r.Resources) == 0 || len(r.Verbs) == 0 {
		return fmt.Errorf("rule %+v needs resources and verbs", r)
	}
	for _, v := range slices.Concat([]string{r.Group}, r.Resources, r.Verbs) {
		if strings.Contains(v, "*") {
			return fmt.Errorf("rule %+v has the wildcard %q: name each resource and verb", r, v)
		}
	}
	return nil
}

// namePattern is upstream's naming rule for controller names.
var namePattern = regexp.MustCompile(`^[a-z]+(-[a-z]+)*-controller$`)

// Registry is an immutable, validated set of descriptors.
type Registry struct {
	descriptors map[string]Descriptor
	aliases     map[string]string // alias -> canonical name
}

// NewRegistry validates the descriptors and returns a registry. It fails on an invalid
// or duplicate name, a duplicate alias, an alias that is also a name, a missing
// constructor, a ServiceAccount shared or named like upstream's, a wildcard rule, a pod
// field outside the vocabulary or a feature gate declared twice differently: all programming errors, reported with the offending name.
func NewRegistry(descriptors ...Descriptor) (*Registry, error) {
	r := &Registry{descriptors: map[string]Descriptor{}, aliases: map[string]string{}}
	accounts := map[string]string{} // ServiceAccount -> controller
	gates := map[featuregate.Feature]FeatureGate{}
	for _, d := range descriptors {
		if !namePattern.MatchString(d.Name) {
			return nil, fmt.Errorf("controller name %q must match %s", d.Name, namePattern)
		}
		if d.New == nil {
			return nil, fmt.Errorf("controller %q has no constructor", d.Name)
		}
		account := d.ServiceAccount()
		if !strings.HasPrefix(account, ServiceAccountPrefix) {
			return nil, fmt.Errorf("controller %q: ServiceAccount %q must start with %q, or the cluster's bootstrap "+
				"policy may grant it upstream's permissions too", d.Name, account, ServiceAccountPrefix)
		}
		if owner, dup := accounts[account]; dup {
			return nil, fmt.Errorf("controllers %q and %q share the ServiceAccount %q; each writes as its own", owner, d.Name, account)
		}
		accounts[account] = d.Name
		for _, rule := range d.Rules {
			if err := rule.validate(); err != nil {
				return nil, fmt.Errorf("controller %q: %w", d.Name, err)
			}
		}
		if err := validatePodReads(d.PodFields, d.PodAnnotations); err != nil {
			return nil, fmt.Errorf("controller %q: %w", d.Name, err)
		}
		if err := validateFeatureGates(d, gates); err != nil {
			return nil, fmt.Errorf("controller %q: %w", d.Name, err)
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
		d.Rules = slices.Clone(d.Rules)
		d.Caches = slices.Clone(d.Caches)
		d.PodFields = slices.Clone(d.PodFields)
		d.PodAnnotations = slices.Clone(d.PodAnnotations)
		d.FeatureGates = slices.Clone(d.FeatureGates)
		d.RequiredFeatureGates = slices.Clone(d.RequiredFeatureGates)
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

// ServiceAccount returns the ServiceAccount in kube-system a controller writes as under
// --use-service-account-credentials: its descriptor's, or ServiceAccountPrefix + Name.
func (d Descriptor) ServiceAccount() string {
	if d.ServiceAccountName != "" {
		return d.ServiceAccountName
	}
	return ServiceAccountPrefix + d.Name
}
