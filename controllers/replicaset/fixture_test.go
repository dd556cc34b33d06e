package replicaset

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/controllers"
)

// testNow is the fixed clock of most tests.
var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fixture is a controller wired to a fake clientset and to informer stores that tests
// fill directly; no informer runs.
type fixture struct {
	t          *testing.T
	ctx        context.Context
	client     *fake.Clientset
	c          *Controller
	podControl *fakePodControl
	recorder   *record.FakeRecorder
	queue      *recordingQueue
	rsStore    cache.Indexer
	podStore   cache.Indexer
}

// allFeatures has every gate the controller honours on, as in Kubernetes v1.37.
var allFeatures = featuresWithout()

// featuresWithout returns the gates of the controller's descriptor on, but those of off.
func featuresWithout(off ...controllers.FeatureGate) controllers.Features {
	f := controllers.Features{}
	for _, g := range Descriptor().FeatureGates {
		f[g.Name] = !slices.ContainsFunc(off, func(o controllers.FeatureGate) bool { return o.Name == g.Name })
	}
	return f
}

// newFixture builds a controller whose clientset holds objects. ReplicaSets and pods
// among objects are also put into the informer stores.
func newFixture(t *testing.T, burstReplicas int, objects ...runtime.Object) *fixture {
	t.Helper()
	return newFixtureWithFeatures(t, allFeatures, burstReplicas, objects...)
}

// newFixtureWithFeatures is newFixture with the given feature gates.
func newFixtureWithFeatures(t *testing.T, features controllers.Features, burstReplicas int, objects ...runtime.Object) *fixture {
	t.Helper()
	ctx := klog.NewContext(context.Background(), klog.Background())
	client := fake.NewClientset(objects...)
	factory := informers.NewSharedInformerFactory(client, 0)
	recorder := record.NewFakeRecorder(100)
	c, err := NewController(ctx, factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), client, recorder, burstReplicas, features)
	if err != nil {
		t.Fatalf("NewController: %v", err)
	}
	f := &fixture{
		t:          t,
		ctx:        ctx,
		client:     client,
		c:          c,
		podControl: &fakePodControl{},
		recorder:   recorder,
		queue:      &recordingQueue{TypedRateLimitingInterface: c.queue.TypedRateLimitingInterface, after: map[string]time.Duration{}},
		rsStore:    factory.Apps().V1().ReplicaSets().Informer().GetIndexer(),
		podStore:   factory.Core().V1().Pods().Informer().GetIndexer(),
	}
	c.podControl = f.podControl
	c.queue.TypedRateLimitingInterface = f.queue
	c.now = func() time.Time { return testNow }
	c.rsSynced = func() bool { return true }
	c.podSynced = func() bool { return true }
	t.Cleanup(c.queue.ShutDown)
	for _, obj := range objects {
		switch o := obj.(type) {
		case *appsv1.ReplicaSet:
			f.addRS(o)
		case *v1.Pod:
			f.addPods(o)
		}
	}
	return f
}

func (f *fixture) addRS(rss ...*appsv1.ReplicaSet) {
	for _, rs := range rss {
		if err := f.rsStore.Add(rs); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fixture) addPods(pods ...*v1.Pod) {
	for _, pod := range pods {
		if err := f.podStore.Add(pod); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fixture) sync(rs *appsv1.ReplicaSet) error {
	return f.c.syncReplicaSet(f.ctx, cacheKey(rs))
}

// expectPodWrites fails the test unless the pod control saw exactly these calls.
func (f *fixture) expectPodWrites(creates, deletes, patches int) {
	f.t.Helper()
	c, d, p := f.podControl.Counts()
	if c != creates || d != deletes || p != patches {
		f.t.Fatalf("pod writes: %d creates, %d deletes, %d patches; want %d, %d, %d", c, d, p, creates, deletes, patches)
	}
}

// statusWrites returns the ReplicaSets written with UpdateStatus, in order.
func (f *fixture) statusWrites() []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "update" && a.GetResource().Resource == "replicasets" && a.GetSubresource() == "status" {
			out = append(out, a.(clienttesting.UpdateAction).GetObject().(*appsv1.ReplicaSet))
		}
	}
	return out
}

// lastStatus returns the last status written, failing the test if none was.
func (f *fixture) lastStatus() appsv1.ReplicaSetStatus {
	f.t.Helper()
	writes := f.statusWrites()
	if len(writes) == 0 {
		f.t.Fatal("no status was written")
	}
	return writes[len(writes)-1].Status
}

// queued drains the queue's ready keys.
func (f *fixture) queued() []string {
	var keys []string
	for f.queue.Len() > 0 {
		key, _ := f.queue.Get()
		f.queue.Done(key)
		f.queue.Forget(key)
		keys = append(keys, key)
	}
	return keys
}

// recordingQueue records AddAfter calls instead of waiting for them.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[string]
	mu    sync.Mutex
	after map[string]time.Duration
}

func (q *recordingQueue) AddAfter(key string, d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.after[key] = d
}

func (q *recordingQueue) addedAfter(key string) (time.Duration, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	d, ok := q.after[key]
	return d, ok
}

var selectorLabels = map[string]string{"app": "web"}

// newReplicaSet returns a ReplicaSet "web" selecting app=web whose template adds a
// label, controlled by a Deployment, with an already observed generation.
func newReplicaSet(name string, replicas int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:       name,
			Namespace:  metav1.NamespaceDefault,
			UID:        types.UID(name + "-uid"),
			Generation: 1,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "deployment-uid", Controller: new(true),
			}},
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: new(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: selectorLabels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", "tier": "frontend"}},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
		Status: appsv1.ReplicaSetStatus{ObservedGeneration: 1, TerminatingReplicas: new(int32(0))},
	}
}

// withStatus returns rs with the given replica counts (all pods ready and available).
func withStatus(rs *appsv1.ReplicaSet, replicas int32) *appsv1.ReplicaSet {
	rs.Status.Replicas = replicas
	rs.Status.FullyLabeledReplicas = replicas
	rs.Status.ReadyReplicas = replicas
	rs.Status.AvailableReplicas = replicas
	return rs
}

// newPod returns a pod with the template's labels, owned by rs if owned, Running and
// ready for an hour.
func newPod(name string, rs *appsv1.ReplicaSet, owned bool) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			Namespace:         rs.Namespace,
			UID:               types.UID(name + "-uid"),
			Labels:            map[string]string{"app": "web", "tier": "frontend"},
			CreationTimestamp: metav1.NewTime(testNow.Add(-time.Hour)),
		},
		Spec: v1.PodSpec{NodeName: "node-1"},
		Status: v1.PodStatus{
			Phase: v1.PodRunning,
			Conditions: []v1.PodCondition{{
				Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(testNow.Add(-time.Hour)),
			}},
		},
	}
	if owned {
		pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(rs, controllerKind)}
	}
	return pod
}

// newPods returns count owned pods named <prefix>-<i>.
func newPods(prefix string, count int, rs *appsv1.ReplicaSet) []*v1.Pod {
	pods := make([]*v1.Pod, count)
	for i := range pods {
		pods[i] = newPod(fmt.Sprintf("%s-%d", prefix, i), rs, true)
	}
	return pods
}

func notReady(pod *v1.Pod) *v1.Pod {
	pod.Status.Conditions[0].Status = v1.ConditionFalse
	return pod
}

func deleting(pod *v1.Pod) *v1.Pod {
	pod.DeletionTimestamp = &metav1.Time{Time: testNow}
	return pod
}

func asObjects[T runtime.Object](items ...T) []runtime.Object {
	out := make([]runtime.Object, len(items))
	for i, item := range items {
		out[i] = item
	}
	return out
}
