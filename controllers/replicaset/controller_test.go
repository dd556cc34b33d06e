package replicaset

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/controllers"
)

func TestResolveControllerRefNeedsKindNameAndUID(t *testing.T) {
	rs := newReplicaSet("web", 1)
	f := newFixture(t, BurstReplicas, rs)
	tests := []struct {
		name string
		ref  metav1.OwnerReference
		want bool
	}{
		{"matching reference", *metav1.NewControllerRef(rs, controllerKind), true},
		{"other kind with the same name", metav1.OwnerReference{Kind: "StatefulSet", Name: "web", UID: rs.UID}, false},
		{"same name, other UID", metav1.OwnerReference{Kind: "ReplicaSet", Name: "web", UID: "stale"}, false},
		{"unknown name", metav1.OwnerReference{Kind: "ReplicaSet", Name: "nope", UID: rs.UID}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := f.c.resolveControllerRef("default", &tt.ref) != nil; got != tt.want {
				t.Errorf("resolved = %v, want %v", got, tt.want)
			}
		})
	}
	if f.c.resolveControllerRef("elsewhere", metav1.NewControllerRef(rs, controllerKind)) != nil {
		t.Error("a reference must resolve in the pod's namespace only")
	}
}

func TestPodEventsWakeTheRightReplicaSets(t *testing.T) {
	rs := newReplicaSet("web", 1)
	overlapping := newReplicaSet("web-2", 1)
	unrelated := newReplicaSet("db", 1)
	unrelated.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}
	otherNamespace := newReplicaSet("web", 1)
	otherNamespace.Namespace = "elsewhere"
	otherNamespace.UID = "elsewhere-uid"

	owned := newPod("owned", rs, true)
	orphan := newPod("orphan", rs, false)
	foreignOwner := newPod("foreign", rs, false)
	foreignOwner.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "web", UID: rs.UID, Controller: new(true)}}

	tests := []struct {
		name  string
		event func(f *fixture, logger klog.Logger)
		want  []string
	}{
		{"owned pod added wakes its owner", func(f *fixture, l klog.Logger) { f.c.addPod(l, owned) }, []string{"default/web"}},
		{"orphan added wakes every matching ReplicaSet", func(f *fixture, l klog.Logger) { f.c.addPod(l, orphan) }, []string{"default/web", "default/web-2"}},
		{"pod of another kind wakes nobody", func(f *fixture, l klog.Logger) { f.c.addPod(l, foreignOwner) }, nil},
		{"owned pod deleted wakes its owner", func(f *fixture, l klog.Logger) { f.c.deletePod(l, owned) }, []string{"default/web"}},
		{"orphan deleted wakes nobody", func(f *fixture, l klog.Logger) { f.c.deletePod(l, orphan) }, nil},
		{"tombstone of an owned pod wakes its owner", func(f *fixture, l klog.Logger) {
			f.c.deletePod(l, cache.DeletedFinalStateUnknown{Key: "default/owned", Obj: owned})
		}, []string{"default/web"}},
		{"garbage tombstone is ignored", func(f *fixture, l klog.Logger) {
			f.c.deletePod(l, cache.DeletedFinalStateUnknown{Key: "default/x", Obj: rs})
		}, nil},
		{"owned pod updated wakes its owner", func(f *fixture, l klog.Logger) {
			cur := owned.DeepCopy()
			cur.ResourceVersion = "2"
			f.c.updatePod(l, owned, cur)
		}, []string{"default/web"}},
		{"resync with the same resourceVersion is ignored", func(f *fixture, l klog.Logger) {
			f.c.updatePod(l, owned, owned.DeepCopy())
		}, nil},
		{"released pod wakes its old owner and the ReplicaSets that may adopt it", func(f *fixture, l klog.Logger) {
			cur := owned.DeepCopy()
			cur.ResourceVersion = "2"
			cur.OwnerReferences = nil
			f.c.updatePod(l, owned, cur)
		}, []string{"default/web", "default/web-2"}},
		{"orphan relabeled wakes the ReplicaSets matching now", func(f *fixture, l klog.Logger) {
			old := orphan.DeepCopy()
			old.Labels = map[string]string{"app": "db"}
			cur := orphan.DeepCopy()
			cur.ResourceVersion = "2"
			f.c.updatePod(l, old, cur)
		}, []string{"default/web", "default/web-2"}},
		{"orphan status change wakes nobody", func(f *fixture, l klog.Logger) {
			cur := notReady(orphan.DeepCopy())
			cur.ResourceVersion = "2"
			f.c.updatePod(l, orphan, cur)
		}, nil},
		{"owner changed wakes old and new owner", func(f *fixture, l klog.Logger) {
			cur := owned.DeepCopy()
			cur.ResourceVersion = "2"
			cur.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(overlapping, controllerKind)}
			f.c.updatePod(l, owned, cur)
		}, []string{"default/web", "default/web-2"}},
		{"pod being deleted with new labels wakes owner of both versions", func(f *fixture, l klog.Logger) {
			old := owned.DeepCopy()
			old.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(overlapping, controllerKind)}
			cur := deleting(owned.DeepCopy())
			cur.ResourceVersion = "2"
			cur.Labels = map[string]string{"app": "web", "moved": "yes"}
			f.c.updatePod(l, old, cur)
		}, []string{"default/web", "default/web-2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, BurstReplicas, rs, overlapping, unrelated, otherNamespace)
			tt.event(f, klog.FromContext(f.ctx))
			got := f.queued()
			sort.Strings(got)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("queued %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPodAddObservesCreationOnlyForOwnedLivePods(t *testing.T) {
	rs := newReplicaSet("web", 3)
	f := newFixture(t, BurstReplicas, rs)
	logger := klog.FromContext(f.ctx)
	key := cacheKey(rs)
	f.c.expectations.ExpectCreations(logger, key, 2)

	f.c.addPod(logger, newPod("orphan", rs, false))
	f.c.addPod(logger, deleting(newPod("already-deleting", rs, true)))
	if add, _, _ := f.c.expectations.Get(key); add != 2 {
		t.Fatalf("expected creations = %d; orphans and deleting pods must not count", add)
	}
	f.c.addPod(logger, newPod("created", rs, true))
	if add, _, _ := f.c.expectations.Get(key); add != 1 {
		t.Fatalf("expected creations = %d, want 1", add)
	}
}

func TestNewlyReadyPodRequeuesAfterMinReadySeconds(t *testing.T) {
	tests := []struct {
		name            string
		minReadySeconds int32
		wasReady        bool
		want            time.Duration
		wantRequeue     bool
	}{
		{"became ready with minReadySeconds", 15, false, 15 * time.Second, true},
		{"already ready", 15, true, 0, false},
		{"no minReadySeconds", 0, false, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := newReplicaSet("web", 1)
			rs.Spec.MinReadySeconds = tt.minReadySeconds
			f := newFixture(t, BurstReplicas, rs)
			old := newPod("pod", rs, true)
			if !tt.wasReady {
				old = notReady(old)
			}
			cur := newPod("pod", rs, true)
			cur.ResourceVersion = "2"
			f.c.updatePod(klog.FromContext(f.ctx), old, cur)
			after, ok := f.queue.addedAfter("default/web")
			if ok != tt.wantRequeue || after != tt.want {
				t.Errorf("requeue (%v, %v), want (%v, %v)", after, ok, tt.want, tt.wantRequeue)
			}
		})
	}
}

func TestReplicaSetEvents(t *testing.T) {
	rs := newReplicaSet("web", 1)
	f := newFixture(t, BurstReplicas, rs)
	logger := klog.FromContext(f.ctx)

	f.c.addReplicaSet(logger, rs)
	cur := rs.DeepCopy()
	cur.Status.Replicas = 1
	f.c.updateReplicaSet(logger, rs, cur) // our own status write still syncs
	f.c.deleteReplicaSet(logger, cache.DeletedFinalStateUnknown{Key: "default/web", Obj: rs})
	f.c.deleteReplicaSet(logger, "garbage")
	if got := f.queued(); !reflect.DeepEqual(got, []string{"default/web"}) {
		t.Errorf("queued %v, want the key once (the queue deduplicates)", got)
	}
}

func TestSiblingReplicaSetsAreFoundThroughTheControllerIndex(t *testing.T) {
	rs := newReplicaSet("web-1", 1)
	sibling := newReplicaSet("web-2", 1)
	stranger := newReplicaSet("other-1", 1)
	stranger.OwnerReferences[0].UID = "other-deployment"
	standalone := newReplicaSet("standalone", 1)
	standalone.OwnerReferences = nil
	f := newFixture(t, BurstReplicas, rs, sibling, stranger, standalone)
	logger := klog.FromContext(f.ctx)

	related, err := f.c.replicaSetsWithSameController(logger, rs)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range related {
		names = append(names, r.Name)
	}
	sort.Strings(names)
	if !reflect.DeepEqual(names, []string{"web-1", "web-2"}) {
		t.Errorf("related %v, want web-1 and web-2", names)
	}
	if related, _ := f.c.replicaSetsWithSameController(logger, standalone); len(related) != 0 {
		t.Errorf("a ReplicaSet without controller has no siblings, got %d", len(related))
	}
}

func TestIndirectlyRelatedPodsListsEachPodOnce(t *testing.T) {
	rs := newReplicaSet("web-1", 1)
	sibling := newReplicaSet("web-2", 1)
	sibling.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "frontend"}}
	// Both selectors match this pod; it must be counted once.
	shared := newPod("shared", rs, true)
	siblingOnly := newPod("sibling-only", sibling, true)
	siblingOnly.Labels = map[string]string{"tier": "frontend"}
	f := newFixture(t, BurstReplicas, rs, sibling, shared, siblingOnly, newPod("orphan", rs, false))

	pods, err := f.c.indirectlyRelatedPods(klog.FromContext(f.ctx), rs)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	if !reflect.DeepEqual(names, []string{"orphan", "shared", "sibling-only"}) {
		t.Errorf("related pods %v", names)
	}
}

func TestRunSyncsQueuedReplicaSetsAndStopsWithItsWorkers(t *testing.T) {
	rs := newReplicaSet("web", 1)
	f := newFixture(t, BurstReplicas, rs)
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() {
		f.c.Run(ctx, 2)
		close(done)
	}()
	f.queue.Add(cacheKey(rs))
	deadline := time.Now().Add(10 * time.Second)
	for {
		if created, _, _ := f.podControl.Counts(); created == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the queued ReplicaSet was not synced")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
	if !f.queue.ShuttingDown() {
		t.Error("Run returned without shutting its queue down")
	}
}

func TestDescriptorBuildsTheControllerFromTheSharedContext(t *testing.T) {
	d := Descriptor()
	if d.Name != "replicaset-controller" || !reflect.DeepEqual(d.Aliases, []string{"replicaset"}) || d.DisabledByDefault {
		t.Fatalf("descriptor %+v", d)
	}
	if _, err := controllers.NewRegistry(d); err != nil {
		t.Fatalf("registry rejects the descriptor: %v", err)
	}
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	clients := &recordingClients{client: client}
	cc := controllers.Context{
		InformerFactory: factory,
		Clients:         clients,
		Events:          recorders{},
		Caches:          &controllers.CacheSyncTracker{},
		Config:          controllers.Config{Options: map[string]controllers.Options{Name: workersOptions(3)}},
	}
	ctrl, workers, err := d.New(context.Background(), cc)
	if err != nil {
		t.Fatal(err)
	}
	if clients.asked != "replicaset-controller" {
		t.Errorf("client asked for %q", clients.asked)
	}
	if c := ctrl.(*Controller); workers != 3 || c.caches != cc.Caches || c.burstReplicas != BurstReplicas {
		t.Errorf("controller %+v with %d workers does not use the configured workers, cache tracker and burst", c, workers)
	}
	// The constructor asked the factory for both informers, so the app starts them.
	stop := make(chan struct{})
	factory.Start(stop)
	defer func() {
		close(stop)
		factory.Shutdown()
	}()
	synced := factory.WaitForCacheSync(stop)
	if len(synced) != 2 {
		t.Errorf("the factory runs %d informers, want replicasets and pods", len(synced))
	}
	for typ, ok := range synced {
		if !ok {
			t.Errorf("informer %v did not sync", typ)
		}
	}
}

type recordingClients struct {
	client kubernetes.Interface
	asked  string
}

func (c *recordingClients) Client(name string) (kubernetes.Interface, error) {
	c.asked = name
	return c.client, nil
}

type recorders struct{}

func (recorders) Recorder(string) record.EventRecorder { return record.NewFakeRecorder(10) }

func TestControllerWithRunningInformersScalesAReplicaSetUpAndDown(t *testing.T) {
	client := fake.NewClientset()
	n := 0
	client.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		pod := a.(clienttesting.CreateAction).GetObject().(*v1.Pod)
		n++
		pod.Name = fmt.Sprintf("%s%d", pod.GenerateName, n)
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	recorder := record.NewFakeRecorder(100)
	c, err := NewController(ctx, factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), client, recorder, BurstReplicas, allFeatures)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		c.Run(ctx, 2)
		close(done)
	}()
	defer func() {
		cancel()
		<-done
		factory.Shutdown()
	}()

	rs := newReplicaSet("web", 3)
	rs.Status = appsv1.ReplicaSetStatus{}
	if _, err := client.AppsV1().ReplicaSets("default").Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "3 pods and status.replicas=3", func() bool {
		pods, _ := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		cur, _ := client.AppsV1().ReplicaSets("default").Get(ctx, "web", metav1.GetOptions{})
		return len(pods.Items) == 3 && cur.Status.Replicas == 3
	})

	cur, err := client.AppsV1().ReplicaSets("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Replicas = new(int32(1))
	if _, err := client.AppsV1().ReplicaSets("default").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "1 pod and status.replicas=1", func() bool {
		pods, _ := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		cur, _ := client.AppsV1().ReplicaSets("default").Get(ctx, "web", metav1.GetOptions{})
		return len(pods.Items) == 1 && cur.Status.Replicas == 1
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// workersOptions returns the controller's options asking for n workers.
func workersOptions(n int32) controllers.Options {
	o := NewOptions().(*controllers.WorkersOptions)
	o.ConcurrentSyncs = n
	return o
}
