package endpoints

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/mini-kcm/mini-kcm/controllers"
)

// Descriptor registers the controller under upstream's names. Its rules are the calls of
// upstream v1.37.2's pkg/controller/endpoint. Upstream's bootstrap role also grants create
// on endpoints/restricted (addresses outside the cluster's networks, which a Service's
// pods never have) and get on Endpoints, which mini-kcm reads from its cache.
func Descriptor() controllers.Descriptor {
	return controllers.Descriptor{
		Name:       Name,
		Aliases:    []string{"endpoints", "endpoint"},
		New:        New,
		NewOptions: NewOptions,
		Rules: []controllers.Rule{{
			Why: "One Endpoints object per selector Service: created, kept in sync, deleted with the " +
				"Service. Reads come from the informers.",
			Group: "", Resources: []string{"endpoints"}, Verbs: []string{"create", "update", "delete"},
		}},
		Caches: []schema.GroupResource{{Resource: "pods"}, {Resource: "services"}, {Resource: "endpoints"}},
		// An address per pod IP, ready or not, with its node and hostname; named target
		// ports from the containers and sidecars (init containers that always restart).
		PodFields: []controllers.PodField{
			controllers.PodNodeName, controllers.PodHostname, controllers.PodSubdomain,
			controllers.PodContainerNames, controllers.PodContainerPorts,
			controllers.PodInitContainerNames, controllers.PodInitContainerPorts, controllers.PodInitContainerRestartPolicies,
			controllers.PodPhase, controllers.PodReadyCondition, controllers.PodIP, controllers.PodIPs,
		},
	}
}

// New builds the controller from the app's shared context. It asks the shared factory for
// the pod, Service and Endpoints informers; the app starts them, and runs the controller
// with --concurrent-endpoint-syncs workers.
func New(ctx context.Context, cc controllers.Context) (controllers.Controller, int, error) {
	opts := controllers.OptionsFor[*Options](cc.Config, Name, NewOptions)
	client, err := cc.Clients.Client(Name)
	if err != nil {
		return nil, 0, fmt.Errorf("building client for %s: %w", Name, err)
	}
	core := cc.InformerFactory.Core().V1()
	c, err := NewController(ctx, core.Pods(), core.Services(), core.Endpoints(), client,
		cc.Events.Recorder(ComponentName), opts.UpdatesBatchPeriod)
	if err != nil {
		return nil, 0, err
	}
	c.caches = cc.Caches
	c.syncs, c.fence = cc.Syncs, cc.Fence
	return c, int(opts.ConcurrentSyncs), nil
}
