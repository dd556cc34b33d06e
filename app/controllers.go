package app

import (
	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/controllers/all"
)

// descriptors lists every controller compiled into mini-kcm (package all, where adding a
// controller means one line).
func descriptors() []controllers.Descriptor {
	return all.Descriptors()
}

// newRegistry builds the registry of the compiled-in controllers.
func newRegistry() *controllers.Registry {
	return all.Registry()
}
