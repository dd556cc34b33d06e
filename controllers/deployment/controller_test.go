package deployment

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/controllers/deployment/rollout"
)

func TestSyncCreatesReplicaSetForNewDeployment(t *testing.T) {
	d := newDeployment("foo", 10, intstr.FromString("25%"), intstr.FromString("25%"))
	d.Annotations["team"] = "payments"
	d.Annotations[corev1.LastAppliedConfigAnnotation] = "{}"
	d.Spec.MinReadySeconds = 7
	f := newFixture(t, d)

	if err := f.sync(d); err != nil {
		t.Fatal(err)
	}
	rs := f.createdReplicaSet()
	if rs == nil {
		t.Fatalf("no replica set created; writes: %v", f.writes())
	}
	hash := rollout.ComputeHash(&d.Spec.Template, nil)
	if rs.Name != "foo-"+hash {
		t.Errorf("name = %q, want foo-%s", rs.Name, hash)
	}
	for what, got := range map[string]string{
		"labels":          rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey],
		"selector":        rs.Spec.Selector.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey],
		"template labels": rs.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey],
	} {
		if got != hash {
			t.Errorf("%s carry hash %q, want %q", what, got, hash)
		}
	}
	if rs.Labels["foo"] != "bar" || rs.Spec.Selector.MatchLabels["foo"] != "bar" {
		t.Errorf("the deployment's labels and selector must be kept: %v %v", rs.Labels, rs.Spec.Selector)
	}
	if _, ok := d.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; ok {
		t.Error("the cached deployment's template was modified")
	}
	if ref := metav1.GetControllerOf(rs); ref == nil || ref.UID != d.UID || ref.Kind != "Deployment" || !*ref.BlockOwnerDeletion {
		t.Errorf("controllerRef = %+v", ref)
	}
	// 25% surge of 10 rounds up to 3.
	if *rs.Spec.Replicas != 10 || rs.Spec.MinReadySeconds != 7 {
		t.Errorf("replicas %d minReadySeconds %d, want 10 and 7", *rs.Spec.Replicas, rs.Spec.MinReadySeconds)
	}
	wantAnnotations := map[string]string{
		rollout.RevisionAnnotation: "1", rollout.DesiredReplicasAnnotation: "10", rollout.MaxReplicasAnnotation: "13", "team": "payments",
	}
	if !mapsEqual(rs.Annotations, wantAnnotations) {
		t.Errorf("annotations = %v, want %v", rs.Annotations, wantAnnotations)
	}

	status := f.lastStatusUpdate()
	if status == nil {
		t.Fatal("no status update")
	}
	if status.Annotations[rollout.RevisionAnnotation] != "1" {
		t.Errorf("deployment revision = %q, want 1", status.Annotations[rollout.RevisionAnnotation])
	}
	cond := rollout.GetCondition(status.Status, appsv1.DeploymentProgressing)
	if cond == nil || cond.Reason != rollout.ReasonNewReplicaSetCreated || cond.Message != `Created new replica set "foo-`+hash+`"` {
		t.Errorf("Progressing = %+v", cond)
	}
	if events := f.events(); !slices.Contains(events, "Normal ScalingReplicaSet Scaled up replica set foo-"+hash+" from 0 to 10") {
		t.Errorf("events = %v", events)
	}
}

func TestSyncDeletingDeploymentOnlyUpdatesStatus(t *testing.T) {
	d := newDeployment("foo", 3, intstr.FromInt32(1), intstr.FromInt32(0))
	d.DeletionTimestamp = new(metav1.NewTime(testNow))
	d.Finalizers = []string{"example.com/hold"}
	old := ownedRS(d, "v0", 3, 1, 0)
	f := newFixture(t, d, old)

	if err := f.sync(d); err != nil {
		t.Fatal(err)
	}
	if got := f.writes(); !slices.Equal(got, []string{"update deployments/status foo"}) {
		t.Errorf("writes = %v, want only a status update", got)
	}
}

func TestSyncDoesNotAdoptWhenDeploymentIsDeletedLive(t *testing.T) {
	d := newDeployment("foo", 1, intstr.FromInt32(1), intstr.FromInt32(0))
	orphan := ownedRS(d, "v1", 1, 1, 0)
	orphan.OwnerReferences = nil
	f := newFixture(t, d, orphan)
	// The cache still shows the Deployment; the apiserver says it is being deleted.
	deleting := d.DeepCopy()
	deleting.DeletionTimestamp = new(metav1.NewTime(testNow))
	f.client.PrependReactor("get", "deployments", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, deleting, nil
	})

	if err := f.sync(d); err == nil {
		t.Fatal("want an error: adoption must be refused")
	}
	if got := f.writes(); len(got) != 0 {
		t.Errorf("writes = %v, want none", got)
	}
}

func TestSyncCreatesNothingWhenTheDeploymentIsGoneLive(t *testing.T) {
	d := newDeployment("foo", 1, intstr.FromInt32(1), intstr.FromInt32(0))
	orphan := ownedRS(d, "v0", 1, 1, 0)
	orphan.OwnerReferences = nil
	orphan.Spec.Template.Labels["version"] = "v0"
	f := newFixture(t, d, orphan)
	// The cache still shows the Deployment; the apiserver no longer has it. A NotFound
	// for the owner must stop the sync, not read as "the orphan vanished", or a
	// ReplicaSet would be created for a Deployment that no longer exists.
	f.client.PrependReactor("get", "deployments", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(appsv1.Resource("deployments"), d.Name)
	})

	if err := f.sync(d); err == nil {
		t.Fatal("want an error: the owner is gone")
	}
	if got := f.writes(); len(got) != 0 {
		t.Errorf("writes = %v, want none", got)
	}
}

func TestEmptySelectorEmitsSelectingAllAndStops(t *testing.T) {
	d := newDeployment("foo", 1, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Spec.Selector = &metav1.LabelSelector{}
	d.Generation = 2
	f := newFixture(t, d, ownedRS(d, "v0", 1, 1, 0))

	if err := f.sync(d); err != nil {
		t.Fatal(err)
	}
	if got := f.writes(); !slices.Equal(got, []string{"update deployments/status foo"}) {
		t.Errorf("writes = %v", got)
	}
	if s := f.lastStatusUpdate(); s.Status.ObservedGeneration != 2 {
		t.Errorf("observedGeneration = %d, want 2", s.Status.ObservedGeneration)
	}
	if events := f.events(); len(events) != 1 || !strings.HasPrefix(events[0], "Warning SelectingAll This deployment is selecting all pods.") {
		t.Errorf("events = %v", events)
	}
}

func TestSyncOfDeletedDeploymentIsANoOp(t *testing.T) {
	f := newFixture(t)
	if err := f.c.syncDeployment(f.ctx, "default/gone"); err != nil {
		t.Fatal(err)
	}
	if err := f.c.syncDeployment(f.ctx, "a/b/c"); err != nil {
		t.Fatalf("a malformed key is dropped, not retried: %v", err)
	}
	if len(f.client.Actions()) != 0 {
		t.Errorf("actions = %v", f.client.Actions())
	}
}

func TestUnknownStrategyIsAnError(t *testing.T) {
	d := newDeployment("foo", 1, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: "BlueGreen"}
	f := newFixture(t, d, ownedRS(d, "v1", 1, 1, 0))
	if err := f.sync(d); err == nil || !strings.Contains(err.Error(), "BlueGreen") {
		t.Errorf("err = %v, want an unsupported strategy error", err)
	}
}

func TestReplicaSetsForDeploymentAdoptsAndReleases(t *testing.T) {
	d := newDeployment("foo", 1, intstr.FromInt32(1), intstr.FromInt32(0))
	other := newDeployment("other", 1, intstr.FromInt32(1), intstr.FromInt32(0))

	owned := ownedRS(d, "v1", 1, 1, 0)
	orphan := ownedRS(d, "v2", 1, 2, 1)
	orphan.OwnerReferences = nil
	ownedButNotMatching := ownedRS(d, "v3", 1, 3, 2)
	ownedButNotMatching.Labels = map[string]string{"foo": "other"}
	ownedByOther := ownedRS(other, "v4", 1, 1, 3)
	deletingOrphan := ownedRS(d, "v5", 1, 1, 4)
	deletingOrphan.OwnerReferences = nil
	deletingOrphan.DeletionTimestamp = new(metav1.NewTime(testNow))
	deletingOrphan.Finalizers = []string{"example.com/hold"}
	f := newFixture(t, d, other, owned, orphan, ownedButNotMatching, ownedByOther, deletingOrphan)

	selector, _ := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	claimed, err := f.c.replicaSetsForDeployment(f.ctx, d, selector)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rs := range claimed {
		got = append(got, rs.Name)
	}
	slices.Sort(got)
	want := []string{orphan.Name, owned.Name}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("claimed = %v, want %v", got, want)
	}
	writes := f.writes()
	if !slices.Contains(writes, "patch replicasets "+orphan.Name) || !slices.Contains(writes, "patch replicasets "+ownedButNotMatching.Name) || len(writes) != 2 {
		t.Errorf("writes = %v, want an adoption and a release patch", writes)
	}
	adopted, err := f.client.AppsV1().ReplicaSets("default").Get(f.ctx, orphan.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(adopted); ref == nil || ref.UID != d.UID {
		t.Errorf("adopted controllerRef = %+v", ref)
	}
	released, _ := f.client.AppsV1().ReplicaSets("default").Get(f.ctx, ownedButNotMatching.Name, metav1.GetOptions{})
	if ref := metav1.GetControllerOf(released); ref != nil {
		t.Errorf("released replica set still has controllerRef %+v", ref)
	}
}

func TestPodsByReplicaSetGroupsControlledPods(t *testing.T) {
	d := newRecreateDeployment("foo", 1)
	rs1 := ownedRS(d, "v1", 1, 1, 0)
	rs2 := ownedRS(d, "v2", 1, 2, 1)
	pod := func(name string, owner *appsv1.ReplicaSet) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"foo": "bar"}}}
		if owner != nil {
			p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}
		}
		return p
	}
	f := newFixture(t, d, rs1, rs2, pod("a", rs1), pod("b", rs1), pod("c", rs2), pod("orphan", nil))

	podMap, err := f.c.podsByReplicaSet([]*appsv1.ReplicaSet{rs1, rs2})
	if err != nil {
		t.Fatal(err)
	}
	if len(podMap[rs1.UID]) != 2 || len(podMap[rs2.UID]) != 1 || len(podMap) != 2 {
		t.Errorf("podMap sizes: rs1 %d rs2 %d total %d", len(podMap[rs1.UID]), len(podMap[rs2.UID]), len(podMap))
	}
}

func TestReplicaSetEventsEnqueueTheRightDeployments(t *testing.T) {
	d1 := newDeployment("d1", 1, intstr.FromInt32(1), intstr.FromInt32(0))
	d2 := newDeployment("d2", 1, intstr.FromInt32(1), intstr.FromInt32(0))
	d2.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"foo": "bar", "tier": "web"}}
	unrelated := newDeployment("unrelated", 1, intstr.FromInt32(1), intstr.FromInt32(0))
	unrelated.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}

	owned := func(d *appsv1.Deployment) *appsv1.ReplicaSet {
		rs := ownedRS(d, "v1", 1, 1, 0)
		rs.ResourceVersion = "1"
		return rs
	}
	orphan := func(lbls map[string]string) *appsv1.ReplicaSet {
		rs := owned(d1)
		rs.OwnerReferences = nil
		rs.Labels = lbls
		return rs
	}
	bumped := func(rs *appsv1.ReplicaSet, mutate func(*appsv1.ReplicaSet)) *appsv1.ReplicaSet {
		cur := rs.DeepCopy()
		cur.ResourceVersion = "2"
		mutate(cur)
		return cur
	}
	strangerRef := owned(d1)
	strangerRef.OwnerReferences[0].UID = "someone-else"

	tests := []struct {
		name  string
		event func(c *Controller)
		want  []string
	}{
		{"add of an owned replica set wakes its owner", func(c *Controller) { c.addReplicaSet(klog.Background(), owned(d1)) }, []string{"default/d1"}},
		{"add with a stale controllerRef wakes nobody", func(c *Controller) { c.addReplicaSet(klog.Background(), strangerRef) }, nil},
		{"add of an orphan wakes every matching deployment", func(c *Controller) {
			c.addReplicaSet(klog.Background(), orphan(map[string]string{"foo": "bar", "tier": "web"}))
		}, []string{"default/d1", "default/d2"}},
		{"add of an orphan without labels wakes nobody", func(c *Controller) { c.addReplicaSet(klog.Background(), orphan(nil)) }, nil},
		{"add of a replica set being deleted wakes its owner", func(c *Controller) {
			rs := owned(d2)
			rs.DeletionTimestamp = new(metav1.NewTime(testNow))
			c.addReplicaSet(klog.Background(), rs)
		}, []string{"default/d2"}},
		{"update with the same resource version is ignored", func(c *Controller) { c.updateReplicaSet(klog.Background(), owned(d1), owned(d1)) }, nil},
		{"update of an owned replica set wakes its owner", func(c *Controller) {
			old := owned(d1)
			c.updateReplicaSet(klog.Background(), old, bumped(old, func(rs *appsv1.ReplicaSet) { rs.Spec.Replicas = new(int32(3)) }))
		}, []string{"default/d1"}},
		{"changed controllerRef wakes the old and the new owner", func(c *Controller) {
			old := owned(d1)
			c.updateReplicaSet(klog.Background(), old, bumped(old, func(rs *appsv1.ReplicaSet) {
				rs.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(d2, controllerKind)}
			}))
		}, []string{"default/d1", "default/d2"}},
		{"release wakes the old owner and the matching deployments", func(c *Controller) {
			old := owned(d2)
			c.updateReplicaSet(klog.Background(), old, bumped(old, func(rs *appsv1.ReplicaSet) { rs.OwnerReferences = nil }))
		}, []string{"default/d1", "default/d2"}},
		{"orphan with new labels wakes the newly matching deployments", func(c *Controller) {
			old := orphan(map[string]string{"app": "none"})
			c.updateReplicaSet(klog.Background(), old, bumped(old, func(rs *appsv1.ReplicaSet) { rs.Labels = map[string]string{"app": "other"} }))
		}, []string{"default/unrelated"}},
		{"orphan update without label change wakes nobody", func(c *Controller) {
			old := orphan(map[string]string{"foo": "bar"})
			c.updateReplicaSet(klog.Background(), old, bumped(old, func(rs *appsv1.ReplicaSet) { rs.Spec.Replicas = new(int32(4)) }))
		}, nil},
		{"delete wakes the owner", func(c *Controller) { c.deleteReplicaSet(klog.Background(), owned(d1)) }, []string{"default/d1"}},
		{"delete through a tombstone wakes the owner", func(c *Controller) {
			c.deleteReplicaSet(klog.Background(), cache.DeletedFinalStateUnknown{Key: "default/x", Obj: owned(d2)})
		}, []string{"default/d2"}},
		{"delete of an orphan wakes nobody", func(c *Controller) { c.deleteReplicaSet(klog.Background(), orphan(map[string]string{"foo": "bar"})) }, nil},
		{"a tombstone of the wrong type is ignored", func(c *Controller) {
			c.deleteReplicaSet(klog.Background(), cache.DeletedFinalStateUnknown{Key: "default/x", Obj: &corev1.Pod{}})
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, d1, d2, unrelated)
			tc.event(f.c)
			got := f.queued()
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("queued %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPodDeletionEnqueuesOnlyRecreateDeployments(t *testing.T) {
	recreate := newRecreateDeployment("recreate", 1)
	rolling := newDeployment("rolling", 1, intstr.FromInt32(1), intstr.FromInt32(0))
	rolling.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "rolling"}}
	recreateRS := ownedRS(recreate, "v1", 1, 1, 0)
	rollingRS := ownedRS(rolling, "v1", 1, 1, 0)
	orphanRS := ownedRS(recreate, "v9", 1, 1, 0)
	orphanRS.OwnerReferences = nil
	podOf := func(rs *appsv1.ReplicaSet) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: "p", Namespace: "default",
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))},
		}}
	}
	staleRef := podOf(recreateRS)
	staleRef.OwnerReferences[0].UID = "recreated"

	tests := []struct {
		name string
		obj  any
		want []string
	}{
		{"pod of a Recreate deployment", podOf(recreateRS), []string{"default/recreate"}},
		{"tombstone of a Recreate deployment's pod", cache.DeletedFinalStateUnknown{Key: "default/p", Obj: podOf(recreateRS)}, []string{"default/recreate"}},
		{"pod of a RollingUpdate deployment", podOf(rollingRS), nil},
		{"pod of an orphan replica set", podOf(orphanRS), nil},
		{"pod whose replica set was replaced", staleRef, nil},
		{"pod without owner", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, recreate, rolling, recreateRS, rollingRS, orphanRS)
			f.c.deletePod(klog.Background(), tc.obj)
			if got := f.queued(); !slices.Equal(got, tc.want) {
				t.Errorf("queued %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDeploymentEventsEnqueue(t *testing.T) {
	d := newDeployment("foo", 1, intstr.FromInt32(1), intstr.FromInt32(0))
	f := newFixture(t)
	f.c.addDeployment(klog.Background(), d)
	f.c.deleteDeployment(klog.Background(), cache.DeletedFinalStateUnknown{Key: "default/bar", Obj: newDeployment("bar", 1, intstr.FromInt32(1), intstr.FromInt32(0))})
	got := f.queued()
	slices.Sort(got)
	if !slices.Equal(got, []string{"default/bar", "default/foo"}) {
		t.Errorf("queued %v", got)
	}
}

func TestProcessNextWorkItemRetriesThenDrops(t *testing.T) {
	d := newDeployment("foo", 1, intstr.FromInt32(1), intstr.FromInt32(0))
	f := newFixture(t, d)
	f.client.PrependReactor("create", "replicasets", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("boom")
	})
	key := "default/foo"
	for i := 0; i < maxRetries; i++ {
		f.c.queue.Add(key)
		f.c.queue.ProcessNextWorkItem(f.ctx)
		if got := f.c.queue.NumRequeues(key); got != i+1 {
			t.Fatalf("after failure %d: requeues = %d", i+1, got)
		}
	}
	f.c.queue.Add(key)
	f.c.queue.ProcessNextWorkItem(f.ctx)
	if got := f.c.queue.NumRequeues(key); got != 0 {
		t.Errorf("after %d failures the key must be dropped, requeues = %d", maxRetries+1, got)
	}

	// A terminating namespace is final: the key is forgotten at once.
	terminating := apierrors.NewForbidden(schema.GroupResource{Resource: "replicasets"}, "x", errors.New("namespace is terminating"))
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}
	f.client.PrependReactor("create", "replicasets", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, terminating
	})
	f.c.queue.Add(key)
	f.c.queue.ProcessNextWorkItem(f.ctx)
	if got := f.c.queue.NumRequeues(key); got != 0 {
		t.Errorf("namespace terminating: requeues = %d, want 0", got)
	}
}

func TestRunStopsWorkersOnCancel(t *testing.T) {
	f := newFixture(t)
	f.c.dSynced = func() bool { return true }
	f.c.rsSynced = func() bool { return true }
	f.c.podSynced = func() bool { return true }
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() {
		f.c.Run(ctx, 3)
		close(done)
	}()
	cancel()
	<-done
	if !f.c.queue.ShuttingDown() {
		t.Error("the queue must be shut down when Run returns")
	}
}

func TestDescriptor(t *testing.T) {
	desc := Descriptor()
	if desc.Name != "deployment-controller" || !slices.Equal(desc.Aliases, []string{"deployment"}) || desc.New == nil {
		t.Errorf("descriptor = %+v", desc)
	}
	if _, err := controllers.NewRegistry(desc); err != nil {
		t.Errorf("registry rejects the descriptor: %v", err)
	}
}

type fakeClients struct{ client kubernetes.Interface }

func (f fakeClients) Client(string) (kubernetes.Interface, error) { return f.client, nil }

type fakeRecorders struct{ names *[]string }

func (f fakeRecorders) Recorder(component string) record.EventRecorder {
	*f.names = append(*f.names, component)
	return record.NewFakeRecorder(10)
}

func TestNewAsksForItsInformersAndUsesItsOwnIdentity(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	var recorders []string
	ctrl, workers, err := New(ctx, controllers.Context{
		InformerFactory: factory,
		Clients:         fakeClients{client},
		Events:          fakeRecorders{&recorders},
		Config:          controllers.Config{Options: map[string]controllers.Options{Name: workersOptions(2)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := ctrl.(*Controller); workers != 2 || c == nil || !slices.Equal(recorders, []string{"deployment-controller"}) {
		t.Errorf("workers %d, recorders %v; want 2 and the deployment-controller's", workers, recorders)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	factory.Start(ctx.Done())
	synced := factory.WaitForCacheSync(ctx.Done())
	want := map[string]bool{"*v1.Deployment": true, "*v1.ReplicaSet": true, "*v1.Pod": true}
	if len(synced) != len(want) {
		t.Errorf("informers started: %v, want deployments, replicasets and pods", synced)
	}
	for typ, ok := range synced {
		if !ok || !want[typ.String()] {
			t.Errorf("informer %v synced=%v", typ, ok)
		}
	}

	done := make(chan struct{})
	go func() { ctrl.Run(ctx, workers); close(done) }()
	cancel()
	<-done
}

func TestDeploymentsForReplicaSetIgnoresEmptySelectors(t *testing.T) {
	empty := newDeployment("empty", 1, intstr.FromInt32(1), intstr.FromInt32(0))
	empty.Spec.Selector = &metav1.LabelSelector{}
	invalid := newDeployment("invalid", 1, intstr.FromInt32(1), intstr.FromInt32(0))
	invalid.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "foo", Operator: "Bogus"}}}
	good := newDeployment("good", 1, intstr.FromInt32(1), intstr.FromInt32(0))
	f := newFixture(t, empty, invalid, good)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "rs", Namespace: "default", Labels: labels.Set{"foo": "bar"}, UID: types.UID("rs")}}
	got := f.c.deploymentsForReplicaSet(klog.Background(), rs)
	if len(got) != 1 || got[0].Name != "good" {
		t.Errorf("got %v", got)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// workersOptions returns the controller's options asking for n workers.
func workersOptions(n int32) controllers.Options {
	o := NewOptions().(*controllers.WorkersOptions)
	o.ConcurrentSyncs = n
	return o
}
