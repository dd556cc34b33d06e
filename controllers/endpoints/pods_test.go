package endpoints

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	endpointsliceutil "k8s.io/endpointslice/util"

	"github.com/mini-kcm/mini-kcm/controllers"
)

func TestAffectedServices(t *testing.T) {
	tests := []struct {
		name              string
		before, after     sets.Set[string]
		onlyGainedOrLost  sets.Set[string]
		everyOldAndNewOne sets.Set[string]
	}{
		{"same services", sets.New("a", "b", "c"), sets.New("a", "b", "c"), sets.New[string](), sets.New("a", "b", "c")},
		{"all replaced", sets.New("a", "b", "c"), sets.New("d", "e", "f"), sets.New("a", "b", "c", "d", "e", "f"), sets.New("a", "b", "c", "d", "e", "f")},
		{"all lost", sets.New("a", "b", "c"), sets.New[string](), sets.New("a", "b", "c"), sets.New("a", "b", "c")},
		{"all gained", sets.New[string](), sets.New("a", "b", "c"), sets.New("a", "b", "c"), sets.New("a", "b", "c")},
		{"one lost, one gained", sets.New("a", "b", "c"), sets.New("b", "c", "d"), sets.New("a", "d"), sets.New("a", "b", "c", "d")},
		{"none", sets.New[string](), sets.New[string](), sets.New[string](), sets.New[string]()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := affectedServices(tc.before, tc.after, false); !got.Equal(tc.onlyGainedOrLost) {
				t.Errorf("labels only: got %v, want %v", sets.List(got), sets.List(tc.onlyGainedOrLost))
			}
			if got := affectedServices(tc.before, tc.after, true); !got.Equal(tc.everyOldAndNewOne) {
				t.Errorf("labels and pod: got %v, want %v", sets.List(got), sets.List(tc.everyOldAndNewOne))
			}
		})
	}
}

func TestServicesToSyncMatchesSelectorsOfTheNamespace(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), time.Duration(0))
	if err := controllers.AddIndexerOnce(factory.Core().V1().Services().Informer(), serviceSelectorIndex, serviceSelectorIndexValues); err != nil {
		t.Fatal(err)
	}
	store := factory.Core().V1().Services().Informer().GetIndexer()
	add := func(ns, name string, selector map[string]string) {
		if err := store.Add(&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ServiceSpec{Selector: selector}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		add("test", fmt.Sprintf("service-%d", i), map[string]string{"app": fmt.Sprintf("test-%d", i)})
	}
	add("test", "everything", map[string]string{})
	add("test", "manual", nil)
	add("other", "service-0", map[string]string{"app": "test-0"})
	// Found through either of its pairs, whichever the index holds.
	add("test", "two-labels", map[string]string{"app": "test-2", "tier": "web"})

	tests := []struct {
		name       string
		projection endpointsliceutil.PodProjectionKey
		want       sets.Set[string]
	}{
		{"pod-0", endpointsliceutil.PodProjectionKey{Namespace: "test", Labels: labels.Set{"app": "test-0", "label": "x"}}, sets.New("test/service-0", "test/everything")},
		{"pod-2", endpointsliceutil.PodProjectionKey{Namespace: "test", Labels: labels.Set{"app": "test-2"}}, sets.New("test/service-2", "test/everything")},
		{"pod-2 web", endpointsliceutil.PodProjectionKey{Namespace: "test", Labels: labels.Set{"app": "test-2", "tier": "web"}},
			sets.New("test/service-2", "test/two-labels", "test/everything")},
		{"web only", endpointsliceutil.PodProjectionKey{Namespace: "test", Labels: labels.Set{"tier": "web"}}, sets.New("test/everything")},
		{"pod-4", endpointsliceutil.PodProjectionKey{Namespace: "test", Labels: labels.Set{"app": "test-4"}}, sets.New("test/everything")},
		{"relabelled", endpointsliceutil.PodProjectionKey{Namespace: "test", Labels: labels.Set{"app": "test-1"}, OldLabels: labels.Set{"app": "test-0"}},
			sets.New("test/service-0", "test/service-1")},
		{"relabelled and changed", endpointsliceutil.PodProjectionKey{Namespace: "test", Labels: labels.Set{"app": "test-1"}, OldLabels: labels.Set{"app": "test-0"}, PodChanged: true},
			sets.New("test/service-0", "test/service-1", "test/everything")},
		{"other namespace", endpointsliceutil.PodProjectionKey{Namespace: "other", Labels: labels.Set{"app": "test-0"}}, sets.New("other/service-0")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := servicesToSync(store, &tc.projection)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(tc.want) {
				t.Errorf("servicesToSync() = %v, want %v", sets.List(got), sets.List(tc.want))
			}
		})
	}
}
