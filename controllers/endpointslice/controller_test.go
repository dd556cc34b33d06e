package endpointslice

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	"github.com/mini-kcm/mini-kcm/controllers"
)

func TestDescriptorUsesUpstreamNamesAndIsOnByDefault(t *testing.T) {
	d := Descriptor()
	if d.Name != "endpointslice-controller" || !slices.Equal(d.Aliases, []string{"endpointslice"}) || d.DisabledByDefault {
		t.Errorf("descriptor = %q %v disabled=%v", d.Name, d.Aliases, d.DisabledByDefault)
	}
	if _, err := controllers.NewRegistry(d); err != nil {
		t.Errorf("the registry rejects the descriptor: %v", err)
	}
}

type clientBuilder struct {
	client kubernetes.Interface
	asked  []string
}

func (b *clientBuilder) Client(name string) (kubernetes.Interface, error) {
	b.asked = append(b.asked, name)
	return b.client, nil
}

type recorders struct{ asked []string }

func (r *recorders) Recorder(component string) record.EventRecorder {
	r.asked = append(r.asked, component)
	return record.NewFakeRecorder(10)
}

func TestNewBuildsTheControllerFromTheAppContextAndRegistersItsInformers(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	clients, events := &clientBuilder{client: client}, &recorders{}
	cc := controllers.Context{
		InformerFactory: factory,
		Clients:         clients,
		Events:          events,
		Config: controllers.Config{Options: map[string]controllers.Options{
			Name: &Options{ConcurrentSyncs: 3, MaxEndpointsPerSlice: 7, UpdatesBatchPeriod: time.Second},
		}},
	}

	got, workers, err := New(ctx, cc)
	if err != nil {
		t.Fatalf("New: %v", err)
	}

	// Upstream's user agent suffix and event source.
	if !slices.Equal(clients.asked, []string{"endpointslice-controller"}) || !slices.Equal(events.asked, []string{"endpoint-slice-controller"}) {
		t.Errorf("asked for clients %v and recorders %v", clients.asked, events.asked)
	}
	if c := got.(*Controller); workers != 3 || c.batchPeriod != time.Second {
		t.Errorf("workers %d, batch period %v; want 3 and 1s", workers, c.batchPeriod)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	factory.Start(ctx.Done())
	synced := factory.WaitForCacheSync(ctx.Done())
	for _, obj := range []any{&v1.Pod{}, &v1.Service{}, &v1.Node{}, &discovery.EndpointSlice{}} {
		found := false
		for typ, ok := range synced {
			found = found || (typ.String() == fmt.Sprintf("%T", obj) && ok)
		}
		if !found {
			t.Errorf("no synced informer for %T in %v", obj, synced)
		}
	}
	c := got.(*Controller)
	c.queue.ShutDown()
	c.podQueue.ShutDown()
	c.topologyQueue.ShutDown()
}

func TestOptionsHaveUpstreamDefaultsAndBounds(t *testing.T) {
	defaults := NewOptions().(*Options)
	if *defaults != (Options{ConcurrentSyncs: 5, MaxEndpointsPerSlice: 100}) {
		t.Errorf("defaults = %+v", defaults)
	}
	cases := []struct {
		name    string
		options Options
		wantErr []string
	}{
		{"defaults", Options{ConcurrentSyncs: 5, MaxEndpointsPerSlice: 100}, nil},
		{"bounds inclusive", Options{ConcurrentSyncs: 50, MaxEndpointsPerSlice: 1000, UpdatesBatchPeriod: time.Second}, nil},
		{"smallest slices", Options{ConcurrentSyncs: 1, MaxEndpointsPerSlice: 1}, nil},
		{"no workers", Options{ConcurrentSyncs: 0, MaxEndpointsPerSlice: 100},
			[]string{"--concurrent-service-endpoint-syncs must be greater than 0, got 0"}},
		{"too many workers", Options{ConcurrentSyncs: 51, MaxEndpointsPerSlice: 100},
			[]string{"--concurrent-service-endpoint-syncs must be at most 50, got 51"}},
		{"empty slices", Options{ConcurrentSyncs: 5, MaxEndpointsPerSlice: 0},
			[]string{"--max-endpoints-per-slice must be between 1 and 1000 (the API allows at most 1000 endpoints in a slice), got 0"}},
		{"slices over the API limit, negative batch period", Options{ConcurrentSyncs: 5, MaxEndpointsPerSlice: 1001, UpdatesBatchPeriod: -time.Second},
			[]string{
				"--max-endpoints-per-slice must be between 1 and 1000 (the API allows at most 1000 endpoints in a slice), got 1001",
				"--endpointslice-updates-batch-period must not be negative, got -1s",
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, err := range tc.options.Validate() {
				got = append(got, err.Error())
			}
			if !slices.Equal(got, tc.wantErr) {
				t.Errorf("Validate() = %q, want %q", got, tc.wantErr)
			}
		})
	}
}
