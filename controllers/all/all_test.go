package all

import (
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/mini-kcm/mini-kcm/controllers"
)

type fakeClients struct{ client kubernetes.Interface }

func (c fakeClients) Client(string) (kubernetes.Interface, error) { return c.client, nil }

type fakeEvents struct{}

func (fakeEvents) Recorder(string) record.EventRecorder { return record.NewFakeRecorder(100) }

// Each descriptor's Caches are exactly the informers its constructor asks the shared
// factory for: the process's list and watch grant is generated from Caches, so a
// controller that starts caching a new kind without declaring it fails here, not with
// an informer that never syncs on a cluster.
func TestEachControllerCachesExactlyWhatItsDescriptorDeclares(t *testing.T) {
	for _, d := range Descriptors() {
		t.Run(d.Name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			informerClient := fake.NewClientset()
			factory := informers.NewSharedInformerFactory(informerClient, 0)
			cc := controllers.Context{
				InformerFactory: factory,
				Clients:         fakeClients{fake.NewClientset()},
				Events:          fakeEvents{},
			}
			if _, _, err := d.New(ctx, cc); err != nil {
				t.Fatal(err)
			}
			factory.Start(ctx.Done())
			factory.WaitForCacheSync(ctx.Done())
			var listed []string
			for _, a := range informerClient.Actions() {
				if a.GetVerb() == "list" {
					listed = append(listed, a.GetResource().GroupResource().String())
				}
			}
			var declared []string
			for _, gr := range d.Caches {
				declared = append(declared, schema.GroupResource{Group: gr.Group, Resource: gr.Resource}.String())
			}
			slices.Sort(listed)
			slices.Sort(declared)
			if !slices.Equal(slices.Compact(listed), declared) {
				t.Errorf("%s's informers list %v, its descriptor declares Caches %v", d.Name, listed, declared)
			}
			cancel()
			factory.Shutdown()
		})
	}
}
