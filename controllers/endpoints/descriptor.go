package endpoints

import (
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
	}
}
