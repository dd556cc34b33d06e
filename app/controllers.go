package app

import (
	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/controllers/all"
)

// newRegistry builds the registry of the compiled-in controllers.
func newRegistry() *controllers.Registry {
	return all.Registry()
}
