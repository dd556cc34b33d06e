package endpointslice

import (
	"context"
	"fmt"

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
		// What k8s.io/endpointslice reads: an endpoint per pod IP, ready, serving or
		// terminating, with its node (zone) and hostname; named target ports from the
		// containers and sidecars (init containers that always restart).
		PodFields: []controllers.PodField{
			controllers.PodNodeName, controllers.PodHostname, controllers.PodSubdomain,
			controllers.PodContainerNames, controllers.PodContainerPorts,
			controllers.PodInitContainerNames, controllers.PodInitContainerPorts, controllers.PodInitContainerRestartPolicies,
			controllers.PodPhase, controllers.PodReadyCondition, controllers.PodIP, controllers.PodIPs,
		},
	}
}

// New builds the controller from the app's shared context. It asks the shared factory
// for the pod, Service, Node and EndpointSlice informers; the app starts them, and runs
// the controller with --concurrent-service-endpoint-syncs workers.
func New(ctx context.Context, cc controllers.Context) (controllers.Controller, int, error) {
	opts := controllers.OptionsFor[*Options](cc.Config, Name, NewOptions)
	client, err := cc.Clients.Client(Name)
	if err != nil {
		return nil, 0, fmt.Errorf("building the %s client: %w", Name, err)
	}
	core := cc.InformerFactory.Core().V1()
	c, err := NewController(ctx, core.Pods(), core.Services(), core.Nodes(),
		cc.InformerFactory.Discovery().V1().EndpointSlices(), client,
		cc.Events.Recorder(ComponentName), opts.MaxEndpointsPerSlice, opts.UpdatesBatchPeriod)
	if err != nil {
		return nil, 0, err
	}
	c.caches = cc.Caches
	c.syncs, c.fence = cc.Syncs, cc.Fence
	return c, int(opts.ConcurrentSyncs), nil
}
