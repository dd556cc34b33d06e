package endpoints

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/mini-kcm/mini-kcm/controllers"
)

func TestPodsSelectedByMatchesTheWholeSelectorInTheNamespace(t *testing.T) {
	pod := func(namespace, name string, labels map[string]string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels}}
	}
	pods := []*v1.Pod{
		pod("ns", "web-1", map[string]string{"app": "shop", "tier": "web"}),
		pod("ns", "web-2", map[string]string{"app": "shop", "tier": "web", "track": "canary"}),
		pod("ns", "db", map[string]string{"app": "shop", "tier": "db"}),
		pod("ns", "other", map[string]string{"app": "blog", "tier": "web"}),
		pod("ns", "unlabelled", nil),
		pod("elsewhere", "web-1", map[string]string{"app": "shop", "tier": "web"}),
		// A value that would collide with another key's if the encoding were sloppy.
		pod("ns", "tricky", map[string]string{"app": "shop/tier=web"}),
	}
	tests := []struct {
		name     string
		selector map[string]string
		want     []string
	}{
		{name: "one label", selector: map[string]string{"tier": "web"}, want: []string{"other", "web-1", "web-2"}},
		{name: "every label must match", selector: map[string]string{"app": "shop", "tier": "web"}, want: []string{"web-1", "web-2"}},
		{name: "a label no pod has", selector: map[string]string{"app": "shop", "tier": "cache"}, want: nil},
		{name: "empty selector selects every pod of the namespace", selector: map[string]string{},
			want: []string{"db", "other", "tricky", "unlabelled", "web-1", "web-2"}},
		{name: "values are compared whole", selector: map[string]string{"app": "shop/tier=web"}, want: []string{"tricky"}},
	}

	podInformer := informers.NewSharedInformerFactory(fake.NewClientset(), 0).Core().V1().Pods().Informer()
	if err := controllers.AddIndexerOnce(podInformer, podLabelIndex, podLabelIndexValues); err != nil {
		t.Fatal(err)
	}
	// A second controller on the same informer must not fail.
	if err := controllers.AddIndexerOnce(podInformer, podLabelIndex, podLabelIndexValues); err != nil {
		t.Fatalf("adding the index twice: %v", err)
	}
	for _, p := range pods {
		if err := podInformer.GetIndexer().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := podsSelectedBy(podInformer.GetIndexer(), "ns", tt.selector)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range got {
				names = append(names, p.Name)
			}
			slices.Sort(names)
			if !slices.Equal(names, tt.want) {
				t.Errorf("got %v, want %v", names, tt.want)
			}
		})
	}
}

func TestPodsSelectedByFollowsRelabelledPods(t *testing.T) {
	f := newFixture(t, 0)
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Labels: map[string]string{"app": "a"}}}
	f.addPods(p)
	relabelled := p.DeepCopy()
	relabelled.Labels = map[string]string{"app": "b"}
	if err := f.pods.Update(relabelled); err != nil {
		t.Fatal(err)
	}
	for selector, want := range map[string]int{"a": 0, "b": 1} {
		got, err := podsSelectedBy(f.pods, "ns", map[string]string{"app": selector})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != want {
			t.Errorf("app=%s selects %d pods, want %d", selector, len(got), want)
		}
	}
}
