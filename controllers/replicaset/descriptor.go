package replicaset

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/controllers/podranking"
)

// Descriptor registers the ReplicaSet controller with the controller registry. Its rules
// are the calls of upstream v1.37.2's pkg/controller/replicaset, less what upstream's
// bootstrap role grants beyond them (list and watch, which the shared informers make as
// the process; update of ReplicaSets, which it never sends; no extensions group).
func Descriptor() controllers.Descriptor {
	return controllers.Descriptor{
		Name:       Name,
		Aliases:    []string{"replicaset"},
		New:        New,
		NewOptions: NewOptions,
		Rules: []controllers.Rule{{
			Why: "get: a live read of the ReplicaSet before adopting orphans, so that a ReplicaSet being " +
				"deleted (the cache may be stale) never adopts pods (RecheckDeletionTimestamp).",
			Group: "apps", Resources: []string{"replicasets"}, Verbs: []string{"get"},
		}, {
			Group: "apps", Resources: []string{"replicasets/status"}, Verbs: []string{"update"},
		}, {
			Why: "Pods are created with an owner reference that blocks owner deletion; the " +
				"OwnerReferencesPermissionEnforcement admission plugin, where enabled, allows that only " +
				"to a user who may update the owner's finalizers.",
			Group: "apps", Resources: []string{"replicasets/finalizers"}, Verbs: []string{"update"},
		}, {
			Why:   "create and delete to scale; patch to adopt and release pods (controllerRef patches).",
			Group: "", Resources: []string{"pods"}, Verbs: []string{"create", "patch", "delete"},
		}},
		Caches: []schema.GroupResource{{Group: "apps", Resource: "replicasets"}, {Resource: "pods"}},
		// Activity, readiness and availability for status and scale-down; the rest ranks
		// pods to delete (podranking): node, restarts of containers and sidecars, and
		// the deletion cost.
		PodFields: []controllers.PodField{
			controllers.PodNodeName, controllers.PodPhase, controllers.PodReadyCondition,
			controllers.PodInitContainerNames, controllers.PodInitContainerRestartPolicies,
			controllers.PodContainerStatusNames, controllers.PodContainerStatusReady, controllers.PodContainerStatusRestartCounts,
			controllers.PodInitContainerStatusNames, controllers.PodInitContainerStatusReady,
			controllers.PodInitContainerStatusRestartCounts,
		},
		PodAnnotations: []string{podranking.DeletionCostAnnotation},
		FeatureGates: []controllers.FeatureGate{
			PodDeletionCost, controllers.DeploymentReplicaSetTerminatingReplicas, StaleControllerConsistencyReplicaSet,
		},
	}
}

// New builds the controller from the shared context: its own client and event recorder,
// and the shared informers it needs, which it asks for now so the app starts them. The
// app runs it with --concurrent-replicaset-syncs workers.
func New(ctx context.Context, cc controllers.Context) (controllers.Controller, int, error) {
	client, err := cc.Clients.Client(Name)
	if err != nil {
		return nil, 0, fmt.Errorf("building the %s client: %w", Name, err)
	}
	c, err := NewController(ctx,
		cc.InformerFactory.Apps().V1().ReplicaSets(),
		cc.InformerFactory.Core().V1().Pods(),
		client,
		cc.Events.Recorder(Name),
		BurstReplicas,
		cc.Config.Features,
	)
	if err != nil {
		return nil, 0, err
	}
	c.caches = cc.Caches
	c.syncs, c.fence = cc.Syncs, cc.Fence
	return c, workers(cc.Config), nil
}
