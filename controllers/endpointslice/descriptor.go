package endpointslice

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/mini-kcm/mini-kcm/controllers"
)

// Descriptor registers the controller under upstream's names. Its rules are the calls of
// upstream v1.37.2's pkg/controller/endpointslice and k8s.io/endpointslice; unlike
// upstream's bootstrap role, no "get": every read comes from an informer.
func Descriptor() controllers.Descriptor {
	return controllers.Descriptor{
		Name:       Name,
		Aliases:    []string{"endpointslice"},
		New:        New,
		NewOptions: NewOptions,
		Rules: []controllers.Rule{{
			Why: "Slices are created with an owner reference to their Service that blocks owner " +
				"deletion; the OwnerReferencesPermissionEnforcement admission plugin, where enabled, " +
				"allows that only to a user who may update the owner's finalizers.",
			Group: "", Resources: []string{"services/finalizers"}, Verbs: []string{"update"},
		}, {
			Why: "create, update and delete as the reconciler brings a Service's slices in line; " +
				"delete also for the slices of a deleted Service (mini-kcm runs no garbage collector).",
			Group: "discovery.k8s.io", Resources: []string{"endpointslices"}, Verbs: []string{"create", "update", "delete"},
		}},
		Caches: []schema.GroupResource{
			{Resource: "pods"}, {Resource: "services"},
			// Nodes: each endpoint's zone, and the zones' CPUs for topology-aware hints.
			{Resource: "nodes"},
			{Group: "discovery.k8s.io", Resource: "endpointslices"},
		},
	}
}
