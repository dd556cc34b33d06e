// Package all lists the controllers compiled into mini-kcm: the one registry that the
// process runs, --help describes and deploy/'s RBAC is generated from (hack/rbacgen).
package all

import (
	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/controllers/deployment"
	"github.com/mini-kcm/mini-kcm/controllers/endpoints"
	"github.com/mini-kcm/mini-kcm/controllers/endpointslice"
	"github.com/mini-kcm/mini-kcm/controllers/replicaset"
)

// Descriptors lists every controller compiled into mini-kcm. Each controller package
// exports func Descriptor() controllers.Descriptor; adding a controller means adding
// its import and one entry here and running make generate (docs/adding-a-controller.md).
func Descriptors() []controllers.Descriptor {
	return []controllers.Descriptor{
		deployment.Descriptor(),
		endpoints.Descriptor(),
		endpointslice.Descriptor(),
		replicaset.Descriptor(),
	}
}

// Registry builds the registry of the compiled-in controllers. A duplicate name or
// alias is a programming error that the unit tests catch.
func Registry() *controllers.Registry {
	return controllers.MustNewRegistry(Descriptors()...)
}
