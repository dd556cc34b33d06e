package app

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/client-go/metadata"

	"github.com/mini-kcm/mini-kcm/app/clients"
	"github.com/mini-kcm/mini-kcm/app/serving"
	"github.com/mini-kcm/mini-kcm/handover"
)

// newUpstreamWatch returns the watch for kube-controller-manager running the enabled
// controllers too (see handover.Watch), on a metadata client of its own: the informers'
// caches drop managedFields, which is what it reads.
func newUpstreamWatch(builder clients.Builder, enabled []string) (*handover.Watch, error) {
	cfg, err := builder.Config("upstream-watch")
	if err != nil {
		return nil, err
	}
	client, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the upstream watch's client: %w", err)
	}
	return handover.NewWatch(client, enabled), nil
}

// upstreamStatusz is the watch's line of /statusz/replica.
func upstreamStatusz(w *handover.Watch) serving.StatuszField {
	return serving.StatuszField{Name: "kube-controller-manager", Value: w.Status}
}

// whileWatchingUpstream returns term with the watch running beside it: it starts when
// the term starts (this replica leads) and is stopped and waited for when the term ends.
func whileWatchingUpstream(w *handover.Watch, term func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		watchCtx, cancel := context.WithCancel(ctx)
		var watching sync.WaitGroup
		watching.Go(func() { w.Run(watchCtx) })
		defer func() {
			cancel()
			watching.Wait()
		}()
		return term(ctx)
	}
}
