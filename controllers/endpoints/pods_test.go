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
	"k8s.io/client-go/tools/cache"

	"github.com/mini-kcm/mini-kcm/controllers"
)

func TestPodEndpointsChanged(t *testing.T) {
	tests := []struct {
		name                      string
		modify                    func(old, cur *v1.Pod)
		wantPodChanged, wantLabel bool
	}{
		{name: "nothing", modify: func(old, cur *v1.Pod) {}},
		// The node is set before the pod has an IP, when it is in no Endpoints yet.
		{name: "node name", modify: func(old, cur *v1.Pod) { cur.Spec.NodeName = "changed" }},
		{name: "resourceVersion only", modify: func(old, cur *v1.Pod) { cur.ResourceVersion = "changed" }},
		{name: "annotations only", modify: func(old, cur *v1.Pod) { cur.Annotations = map[string]string{"a": "b"} }},
		{name: "primary IPv4 added", wantPodChanged: true, modify: func(old, cur *v1.Pod) {
			cur.Status.PodIP = "1.2.3.4"
			cur.Status.PodIPs = []v1.PodIP{{IP: "1.2.3.4"}}
		}},
		{name: "primary IPv4 changed", wantPodChanged: true, modify: func(old, cur *v1.Pod) {
			old.Status.PodIPs = []v1.PodIP{{IP: "1.2.3.4"}}
			cur.Status.PodIPs = []v1.PodIP{{IP: "2.3.4.5"}}
		}},
		{name: "primary IPv6 added", wantPodChanged: true, modify: func(old, cur *v1.Pod) {
			cur.Status.PodIPs = []v1.PodIP{{IP: "fd00:10:96::1"}}
		}},
		{name: "secondary IP added", wantPodChanged: true, modify: func(old, cur *v1.Pod) {
			old.Status.PodIPs = []v1.PodIP{{IP: "1.2.3.4"}}
			cur.Status.PodIPs = []v1.PodIP{{IP: "1.2.3.4"}, {IP: "fd00:10:96::1"}}
		}},
		{name: "secondary IP changed", wantPodChanged: true, modify: func(old, cur *v1.Pod) {
			old.Status.PodIPs = []v1.PodIP{{IP: "1.2.3.4"}, {IP: "fd00:10:96::1"}}
			cur.Status.PodIPs = []v1.PodIP{{IP: "1.2.3.4"}, {IP: "fd00:10:96::2"}}
		}},
		{name: "secondary IP removed", wantPodChanged: true, modify: func(old, cur *v1.Pod) {
			old.Status.PodIPs = []v1.PodIP{{IP: "1.2.3.4"}, {IP: "fd00:10:96::1"}}
			cur.Status.PodIPs = []v1.PodIP{{IP: "1.2.3.4"}}
		}},
		{name: "readiness", wantPodChanged: true, modify: func(old, cur *v1.Pod) { cur.Status.Conditions[0].Status = v1.ConditionTrue }},
		{name: "ready condition time only", modify: func(old, cur *v1.Pod) {
			cur.Status.Conditions[0].LastTransitionTime = metav1.Now()
		}},
		{name: "marked for deletion", wantPodChanged: true, modify: func(old, cur *v1.Pod) {
			now := metav1.Now()
			cur.DeletionTimestamp = &now
		}},
		{name: "any update while terminating", wantPodChanged: true, modify: func(old, cur *v1.Pod) {
			now := metav1.Now()
			old.DeletionTimestamp, cur.DeletionTimestamp = &now, &now
		}},
		{name: "label added", wantLabel: true, modify: func(old, cur *v1.Pod) { cur.Labels["label"] = "new" }},
		{name: "label changed", wantLabel: true, modify: func(old, cur *v1.Pod) { old.Labels["label"] = "old"; cur.Labels["label"] = "new" }},
		{name: "label removed", wantLabel: true, modify: func(old, cur *v1.Pod) { old.Labels["label"] = "old" }},
		{name: "hostname", wantLabel: true, modify: func(old, cur *v1.Pod) { cur.Spec.Hostname = "web-0" }},
		{name: "subdomain", wantLabel: true, modify: func(old, cur *v1.Pod) { cur.Spec.Subdomain = "web" }},
		{name: "label and readiness", wantLabel: true, wantPodChanged: true, modify: func(old, cur *v1.Pod) {
			cur.Labels["label"] = "new"
			cur.Status.Conditions[0].Status = v1.ConditionTrue
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "test", Name: "pod", Labels: map[string]string{"foo": "bar"}},
				Status:     v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}}},
			}
			cur := old.DeepCopy()
			tc.modify(old, cur)

			podChanged, labelsChanged := podEndpointsChanged(old, cur)
			if podChanged != tc.wantPodChanged || labelsChanged != tc.wantLabel {
				t.Errorf("podEndpointsChanged() = %v, %v; want %v, %v", podChanged, labelsChanged, tc.wantPodChanged, tc.wantLabel)
			}
		})
	}
}

func TestProjectPodEvent(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", ResourceVersion: "1", Labels: map[string]string{"app": "a"}}}
	relabelled := pod.DeepCopy()
	relabelled.ResourceVersion = "2"
	relabelled.Labels = map[string]string{"app": "b"}
	relabelledAndReady := relabelled.DeepCopy()
	relabelledAndReady.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	ready := pod.DeepCopy()
	ready.ResourceVersion = "2"
	ready.Status.Conditions = relabelledAndReady.Status.Conditions
	annotated := pod.DeepCopy()
	annotated.ResourceVersion = "2"
	annotated.Annotations = map[string]string{"x": "y"}

	tests := []struct {
		name     string
		old, cur any
		want     *podProjection
		wantErr  bool
	}{
		{name: "add", cur: pod, want: &podProjection{namespace: "ns", labels: labels.Set{"app": "a"}}},
		{name: "delete", old: pod, want: &podProjection{namespace: "ns", labels: labels.Set{"app": "a"}}},
		{name: "delete seen late", old: cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: pod}, want: &podProjection{namespace: "ns", labels: labels.Set{"app": "a"}}},
		{name: "resync", old: pod, cur: pod.DeepCopy(), want: nil},
		{name: "irrelevant update", old: pod, cur: annotated, want: nil},
		{name: "readiness only", old: pod, cur: ready, want: &podProjection{namespace: "ns", labels: labels.Set{"app": "a"}}},
		{name: "labels only", old: pod, cur: relabelled, want: &podProjection{
			namespace: "ns", labels: labels.Set{"app": "b"}, oldLabels: labels.Set{"app": "a"},
		}},
		{name: "labels and readiness", old: pod, cur: relabelledAndReady, want: &podProjection{
			namespace: "ns", labels: labels.Set{"app": "b"}, oldLabels: labels.Set{"app": "a"}, podChanged: true,
		}},
		{name: "no pod at all", wantErr: true},
		{name: "not a pod", cur: &v1.Service{}, wantErr: true},
		{name: "tombstone without a pod", old: cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: &v1.Service{}}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := projectPodEvent(tc.old, tc.cur)
			if (err != nil) != tc.wantErr {
				t.Fatalf("projectPodEvent() error = %v, want error %v", err, tc.wantErr)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) || (got == nil) != (tc.want == nil) {
				t.Errorf("projectPodEvent() = %v, want %v", got, tc.want)
			}
		})
	}
}

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
		projection podProjection
		want       sets.Set[string]
	}{
		{"pod-0", podProjection{namespace: "test", labels: labels.Set{"app": "test-0", "label": "x"}}, sets.New("test/service-0", "test/everything")},
		{"pod-2", podProjection{namespace: "test", labels: labels.Set{"app": "test-2"}}, sets.New("test/service-2", "test/everything")},
		{"pod-2 web", podProjection{namespace: "test", labels: labels.Set{"app": "test-2", "tier": "web"}},
			sets.New("test/service-2", "test/two-labels", "test/everything")},
		{"web only", podProjection{namespace: "test", labels: labels.Set{"tier": "web"}}, sets.New("test/everything")},
		{"pod-4", podProjection{namespace: "test", labels: labels.Set{"app": "test-4"}}, sets.New("test/everything")},
		{"relabelled", podProjection{namespace: "test", labels: labels.Set{"app": "test-1"}, oldLabels: labels.Set{"app": "test-0"}},
			sets.New("test/service-0", "test/service-1")},
		{"relabelled and changed", podProjection{namespace: "test", labels: labels.Set{"app": "test-1"}, oldLabels: labels.Set{"app": "test-0"}, podChanged: true},
			sets.New("test/service-0", "test/service-1", "test/everything")},
		{"other namespace", podProjection{namespace: "other", labels: labels.Set{"app": "test-0"}}, sets.New("other/service-0")},
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
