package app

import (
	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/controllers/deployment"
	"github.com/mini-kcm/mini-kcm/controllers/endpoints"
	"github.com/mini-kcm/mini-kcm/controllers/endpointslice"
	"github.com/mini-kcm/mini-kcm/controllers/replicaset"
)

// descriptors lists every controller compiled into mini-kcm. Each controller package
// exports func Descriptor() controllers.Descriptor; adding a controller means adding
// one line here.
func descriptors() []controllers.Descriptor {
	return []controllers.Descriptor{
		deployment.Descriptor(),
		endpoints.Descriptor(),
		endpointslice.Descriptor(),
		replicaset.Descriptor(),
	}
}

// newRegistry builds the registry of the compiled-in controllers. A duplicate name or
// alias is a programming error that the unit tests catch.
func newRegistry() *controllers.Registry {
	return controllers.MustNewRegistry(descriptors()...)
}

// ControllerNames returns the canonical names of the compiled-in controllers: what a
// cluster running mini-kcm turns off in its kube-controller-manager.
func ControllerNames() []string {
	return newRegistry().Names()
}
