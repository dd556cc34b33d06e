package deployment

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/mini-kcm/mini-kcm/controllers"
)

// Descriptor registers the Deployment controller with the controller registry. Its rules
// are the calls of upstream v1.37.2's pkg/controller/deployment. Upstream's bootstrap role
// also grants update on pods (kubernetes#36897, a call the controller no longer makes)
// and get on ReplicaSets; never delete on Deployments: they belong to their users.
func Descriptor() controllers.Descriptor {
	return controllers.Descriptor{
		Name:       Name,
		Aliases:    []string{"deployment"},
		New:        New,
		NewOptions: NewOptions,
		Rules: []controllers.Rule{{
			Why: "get: live read before adopting ReplicaSets (RecheckDeletionTimestamp); update: a " +
				"rollback (deprecated.deployment.rollback.to) rewrites the template and clears the " +
				"annotation.",
			Group: "apps", Resources: []string{"deployments"}, Verbs: []string{"get", "update"},
		}, {
			Group: "apps", Resources: []string{"deployments/status"}, Verbs: []string{"update"},
		}, {
			Why: "New ReplicaSets carry an owner reference that blocks owner deletion (see the " +
				"ReplicaSet controller's pods).",
			Group: "apps", Resources: []string{"deployments/finalizers"}, Verbs: []string{"update"},
		}, {
			Why: "create a new revision, update replicas and revision annotations, patch to adopt and " +
				"release, delete old revisions beyond spec.revisionHistoryLimit.",
			Group: "apps", Resources: []string{"replicasets"}, Verbs: []string{"create", "update", "patch", "delete"},
		}},
		Caches: []schema.GroupResource{
			{Group: "apps", Resource: "deployments"}, {Group: "apps", Resource: "replicasets"}, {Resource: "pods"},
		},
		// The Recreate strategy waits until no old pod runs.
		PodFields:    []controllers.PodField{controllers.PodPhase},
		FeatureGates: []controllers.FeatureGate{controllers.DeploymentReplicaSetTerminatingReplicas},
	}
}

// New builds the controller from the shared context: its own client and event recorder,
// and the shared informers it needs, which it asks for now so the app starts them. The
// app runs it with --concurrent-deployment-syncs workers.
func New(ctx context.Context, cc controllers.Context) (controllers.Controller, int, error) {
	client, err := cc.Clients.Client(Name)
	if err != nil {
		return nil, 0, fmt.Errorf("building the %s client: %w", Name, err)
	}
	c, err := NewController(ctx,
		cc.InformerFactory.Apps().V1().Deployments(),
		cc.InformerFactory.Apps().V1().ReplicaSets(),
		cc.InformerFactory.Core().V1().Pods(),
		client,
		cc.Events.Recorder(Name),
		cc.Config.Features,
	)
	if err != nil {
		return nil, 0, err
	}
	c.caches = cc.Caches
	c.syncs, c.fence = cc.Syncs, cc.Fence
	return c, workers(cc.Config), nil
}
