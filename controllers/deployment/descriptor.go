package deployment

import (
	"context"
	"fmt"

	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/controllers/queueworker"
)

// Descriptor registers the Deployment controller with the controller registry.
func Descriptor() controllers.Descriptor {
	return controllers.Descriptor{
		Name:       Name,
		Aliases:    []string{"deployment"},
		New:        New,
		NewOptions: NewOptions,
	}
}

// New builds the controller from the shared context: its own client and event recorder,
// and the shared informers it needs, which it asks for now so the app starts them.
func New(ctx context.Context, cc controllers.Context) (controllers.Controller, error) {
	client, err := cc.Clients.Client(Name)
	if err != nil {
		return nil, fmt.Errorf("building the %s client: %w", Name, err)
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
		return nil, err
	}
	c.caches = cc.Caches
	c.syncs = cc.Syncs
	return queueworker.Bind(Name, c, workers(cc.Config)), nil
}
