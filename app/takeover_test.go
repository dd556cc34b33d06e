package app

import (
	"context"
	"slices"
	"testing"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func TestInformerCachesNameTheResourceOfEveryStartedInformer(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	factory.Core().V1().Pods().Informer()
	factory.Core().V1().Endpoints().Informer()
	factory.Discovery().V1().EndpointSlices().Informer()
	factory.Apps().V1().ReplicaSets().Informer()
	ctx, cancel := context.WithCancel(context.Background())
	defer func() {
		cancel()
		factory.Shutdown()
	}()
	factory.Start(ctx.Done())

	caches, err := informerCaches(factory)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range caches {
		if c.Store == nil {
			t.Errorf("no store for %s", c.Resource)
		}
		got = append(got, c.Resource.String())
	}
	want := []string{"/v1, Resource=endpoints", "/v1, Resource=pods", "apps/v1, Resource=replicasets",
		"discovery.k8s.io/v1, Resource=endpointslices"}
	if !slices.Equal(got, want) {
		t.Errorf("caches %v, want %v", got, want)
	}
}
