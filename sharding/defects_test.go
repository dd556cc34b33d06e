package sharding

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/leaderelection"
)

const testBase, testNamespace = "mini-kcm", "kube-system"

// lease returns one of testBase's Leases; epoch and holder may be empty.
func lease(name, role, epoch, holder string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name, ResourceVersion: "1", Labels: Labels(testBase, role)},
		Spec:       coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](15)},
	}
	if epoch != "" {
		l.Labels[LabelEpoch] = epoch
	}
	if holder != "" {
		l.Spec.HolderIdentity = ptr.To(holder)
	}
	return l
}

func planLease(active, next *Epoch) *coordinationv1.Lease {
	l := lease(PlanLeaseName(testBase), RolePlan, "", "")
	l.Annotations = map[string]string{}
	if active != nil {
		l.Annotations[AnnotationPlan] = active.String()
	}
	if next != nil {
		l.Annotations[AnnotationNext] = next.String()
	}
	return l
}

// testReplica is a replica whose Lease cache holds leases, and whose clients write to a
// fake apiserver that holds them too.
func testReplica(t *testing.T, shards int, leases ...*coordinationv1.Lease) (*Replica, *fake.Clientset) {
	t.Helper()
	var objects []runtime.Object
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, l := range leases {
		objects = append(objects, l.DeepCopy())
		if err := indexer.Add(l); err != nil {
			t.Fatal(err)
		}
	}
	client := fake.NewClientset(objects...)
	r := New(Config{
		Base: testBase, Namespace: testNamespace, Identity: "me", Shards: shards,
		Timings:            leaderelection.Timings{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second},
		RebalanceThreshold: 1.2, RebalancePeriod: time.Hour,
		Client: client, CoordinatorClient: client, Probe: client,
		Weigh:    func(context.Context) (map[string]int64, error) { return map[string]int64{}, nil },
		Recorder: func() record.EventRecorder { return record.NewFakeRecorder(100) },
		Exit:     func(int) { t.Fatal("the replica exited") },
	})
	r.recorder = r.Recorder()
	r.leases = coordinationlisters.NewLeaseLister(indexer).Leases(testNamespace)
	r.coordinator.weighed = time.Now() // no weighing unless a test asks for it
	return r, client
}

func getLease(t *testing.T, client *fake.Clientset, name string) *coordinationv1.Lease {
	t.Helper()
	l, err := client.CoordinationV1().Leases(testNamespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting Lease %s: %v", name, err)
	}
	return l
}

// Defect 1: the coordinator reads the Lease cache itself, which can hold a newer
// resourceVersion than the replica last observed. A changed resourceVersion is a
// renewal (or a new holder) that has just happened, never an old, expired one.
func TestALeaseWithAnotherResourceVersionThanObservedIsFreshNotExpired(t *testing.T) {
	l := func(rv string) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: "mini-kcm-1", ResourceVersion: rv},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a"), LeaseDurationSeconds: ptr.To[int32](15)},
		}
	}
	var o observations
	start := time.Now()
	o.observe([]*coordinationv1.Lease{l("1")}, start)
	if o.expired(l("2"), start.Add(20*time.Second)) {
		t.Fatal("a Lease renewed since the last observation (resourceVersion 1 → 2) is expired 20s after resourceVersion 1 was seen")
	}
	if o.expired(l("2"), start.Add(30*time.Second)) {
		t.Error("resourceVersion 2, first seen 20s after the start, expired 10s later with a 15s duration")
	}
	if !o.expired(l("2"), start.Add(36*time.Second)) {
		t.Error("resourceVersion 2 not expired 16s after it was first seen, with a 15s duration")
	}
}

// Defect 1, as the interleaving of the issue: B has just acquired shard 1 (a new
// resourceVersion in the coordinator's cache, not yet observed by the replica's loop);
// the coordinator's handover must not take it away.
func TestTheHandoverDoesNotRelabelAShardLeaseRenewedSinceItWasObserved(t *testing.T) {
	active := Epoch{Number: 2, Plan: Equal(2)}
	next := Epoch{Number: 3, Plan: Equal(2)}
	old := lease(ShardLeaseName(testBase, 1), RoleShard, active.Label(1), "d")
	r, client := testReplica(t, 2, planLease(&active, &next), lease(ShardLeaseName(testBase, 0), RoleShard, next.Label(0), ""), old)
	r.seen.observe([]*coordinationv1.Lease{old}, time.Now().Add(-time.Minute)) // D died a minute ago
	acquired := old.DeepCopy()
	acquired.ResourceVersion, acquired.Spec.HolderIdentity = "2", ptr.To("b")
	acquired.Labels[LabelEpoch] = active.Label(1)
	indexerUpdate(t, r, acquired)
	if _, err := client.CoordinationV1().Leases(testNamespace).Update(context.Background(), acquired, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.coordinator.handOver(context.Background(), next)
	if got := getLease(t, client, old.Name); holder(got) != "b" || got.Labels[LabelEpoch] != active.Label(1) {
		t.Errorf("the handover took shard 1 from b, who had just acquired it: holder %q, epoch %s", holder(got), got.Labels[LabelEpoch])
	}
}

// Defect 1 in forgetDeparted: a membership renewed since it was observed is a live
// replica.
func TestAMembershipRenewedSinceItWasObservedIsNotForgotten(t *testing.T) {
	m := lease(MemberLeaseName(testBase, "b"), RoleMember, "", "b")
	r, client := testReplica(t, 2, m)
	r.seen.observe([]*coordinationv1.Lease{m}, time.Now().Add(-time.Minute))
	renewed := m.DeepCopy()
	renewed.ResourceVersion = "2"
	indexerUpdate(t, r, renewed)
	r.coordinator.forgetDeparted(context.Background())
	if _, err := client.CoordinationV1().Leases(testNamespace).Get(context.Background(), m.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("a live replica's membership was deleted: %v", err)
	}
}

// indexerUpdate puts l into the replica's Lease cache.
func indexerUpdate(t *testing.T, r *Replica, l *coordinationv1.Lease) {
	t.Helper()
	all, _ := r.leases.List(labels.Everything())
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, x := range all {
		if x.Name != l.Name {
			_ = indexer.Add(x)
		}
	}
	_ = indexer.Add(l)
	r.leases = coordinationlisters.NewLeaseLister(indexer).Leases(testNamespace)
}

// Defect 3: the plan Lease was deleted while the shards carry epoch 2. The plan that
// replaces it must have an epoch no Lease has carried, or a handover waits forever (or
// a Lease of the old cut counts as handed over).
func TestARecreatedPlanNeverRepeatsAnEpoch(t *testing.T) {
	e2 := Epoch{Number: 2, Plan: Equal(3)}
	r, client := testReplica(t, 3,
		lease(ShardLeaseName(testBase, 0), RoleShard, e2.Label(0), "a"),
		lease(ShardLeaseName(testBase, 1), RoleShard, e2.Label(1), "b"),
		lease(ShardLeaseName(testBase, 2), RoleShard, e2.Label(2), ""))
	if err := r.coordinator.step(context.Background()); err != nil {
		t.Fatal(err)
	}
	active, next, err := PlanOf(getLease(t, client, PlanLeaseName(testBase)))
	if err != nil {
		t.Fatal(err)
	}
	if active != nil || next == nil {
		t.Fatalf("the recreated plan has active %v, next %v; want only a next one", active, next)
	}
	if next.Number <= 2 || next.Label(0) == e2.Label(0) {
		t.Errorf("the recreated plan is epoch %d (label %s) while the shard Leases carry %s: epochs must never repeat",
			next.Number, next.Label(0), e2.Label(0))
	}
}

// Defect 3: a plan that only has a next epoch (its Lease was recreated) still stops
// every election: their shards must be handed over to it.
func TestANextPlanStopsEveryElectionEvenWithoutAnActiveOne(t *testing.T) {
	next := Epoch{Number: 3, Plan: Equal(2)}
	r, _ := testReplica(t, 2, planLease(nil, &next), lease(ShardLeaseName(testBase, 0), RoleShard, "2", "me"))
	stopped := false
	r.elections[0] = &shardElection{label: "2", cancel: func() { stopped = true }, done: make(chan struct{})}
	r.elections[0].leading.Store(true)
	r.reconcile(klog.NewContext(context.Background(), klog.Background()))
	if !stopped {
		t.Error("the election of shard 0 (epoch 2) goes on while the plan hands over to epoch 3")
	}
}

// Defect 4: a handover (recut or fair share) whose workers do not stop within
// --controller-shutdown-timeout ends the process, as a lost shard does: its goroutines
// would otherwise leak while the informers stop under them.
func TestAShardWhoseWorkersDoNotStopEndsTheProcessOnEveryStopPath(t *testing.T) {
	r, _ := testReplica(t, 2)
	exited := -1
	r.Exit = func(code int) { exited = code }
	stuck := fmt.Errorf("controller shutdown timeout (1s) reached with [replicaset-controller]: %w", leaderelection.ErrControllersStillRunning)
	r.electionEnded(klog.Background(), stuck, leaderelection.NewFence("x", time.Second, nil))
	if exited != 1 {
		t.Errorf("a handover that gave up on its workers did not exit the process (exit code %d)", exited)
	}
}

// Defect 4: a shard Lease above a gap (shard 2 deleted, 3 left over from a larger
// plan) is relabelled too, so that nobody works on it under the old epoch.
func TestTheHandoverRelabelsTheHighestShardLeaseAcrossAGap(t *testing.T) {
	active := Epoch{Number: 2, Plan: Equal(4)}
	next := Epoch{Number: 3, Plan: Equal(2)}
	r, client := testReplica(t, 2, planLease(&active, &next),
		lease(ShardLeaseName(testBase, 0), RoleShard, active.Label(0), ""),
		lease(ShardLeaseName(testBase, 1), RoleShard, active.Label(1), ""),
		lease(ShardLeaseName(testBase, 3), RoleShard, active.Label(3), ""))
	r.coordinator.handOver(context.Background(), next)
	if got := getLease(t, client, ShardLeaseName(testBase, 3)); got.Labels[LabelEpoch] != next.Label(3) {
		t.Errorf("shard Lease 3 still carries epoch %s after the handover to %s", got.Labels[LabelEpoch], next.Label(3))
	}
}

// Defect 4: a deleted shard Lease is recreated at the next step, not at the next recut:
// its namespaces would go unserved until then. It is recreated held, so that nobody
// takes it before its last holder's fence closed.
func TestADeletedShardLeaseIsRecreatedAtOnceAndHeldForALeaseDuration(t *testing.T) {
	active := Epoch{Number: 2, Plan: Equal(3)}
	r, client := testReplica(t, 3, planLease(&active, nil),
		lease(ShardLeaseName(testBase, 0), RoleShard, active.Label(0), "a"),
		lease(ShardLeaseName(testBase, 2), RoleShard, active.Label(2), "b"))
	if err := r.coordinator.step(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := client.CoordinationV1().Leases(testNamespace).Get(context.Background(), ShardLeaseName(testBase, 1), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("shard Lease 1 was not recreated: %v", err)
	}
	if got.Labels[LabelEpoch] != active.Label(1) || holder(got) == "" {
		t.Errorf("shard Lease 1 was recreated with epoch %q and holder %q; want the active epoch %s, held",
			got.Labels[LabelEpoch], holder(got), active.Label(1))
	}
}

// Defect 2: a shard's informers on an apiserver that ignores shardSelector (the fake
// client ignores it too) never cache an object outside the shard's range, listed or
// watched, and count what they dropped.
func TestAShardTermOnAnApiserverThatIgnoresTheFilterNeverCachesOtherShardsObjects(t *testing.T) {
	plan := Balanced(map[string]int64{"tenant-a": 1, "tenant-b": 1}, 2)
	in, out := "tenant-a", "tenant-b"
	if plan.Shard(in) != 0 {
		in, out = out, in
	}
	rs := func(ns, name string) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	client := fake.NewClientset(rs(in, "listed"), rs(out, "listed"))
	var report outOfRange
	var first string
	report.first = func(o metav1.Object) { first = o.GetNamespace() }
	shard := &Informers{selector: plan.Selector(0).String(), filter: rangeFilter{selector: plan.Selector(0), report: &report}}
	factory := informers.NewSharedInformerFactoryWithOptions(shard.Client(client), 0, shard.Options()...)
	replicaSets := factory.Apps().V1().ReplicaSets()
	informer := replicaSets.Informer()
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); factory.Shutdown() }()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("the shard's ReplicaSet informer did not sync")
	}
	for _, r := range []*appsv1.ReplicaSet{rs(in, "watched"), rs(out, "watched")} {
		if _, err := client.AppsV1().ReplicaSets(r.Namespace).Create(ctx, r, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := replicaSets.Lister().ReplicaSets(in).Get("watched"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the shard's own watched ReplicaSet never reached its cache")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var cached []string
	for _, obj := range informer.GetStore().List() {
		r := obj.(*appsv1.ReplicaSet)
		cached = append(cached, r.Namespace+"/"+r.Name)
		if r.Namespace == out {
			t.Errorf("shard 0 cached %s/%s, which belongs to shard %d", r.Namespace, r.Name, plan.Shard(out))
		}
	}
	if len(cached) != 2 {
		t.Errorf("shard 0 cached %v, want its own two ReplicaSets", cached)
	}
	for report.dropped.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // the watched one of the other shard
	}
	if got := report.dropped.Load(); got != 2 || first != out {
		t.Errorf("%d objects counted as dropped (first from %q), want 2 from %s", got, first, out)
	}
	if !strings.Contains(shard.selector, "shardRange") {
		t.Errorf("the shard's informers do not ask the apiserver to filter: selector %q", shard.selector)
	}
}

// Defect 5: an epoch number can come back with other cuts (the plan Lease and the
// shard Leases carrying the highest epoch deleted, or the plan edited by hand). A
// label names the range as well as the number, so the guard of an election of the old
// cuts refuses a Lease labelled for the new ones, though the numbers are equal.
func TestTheGuardRefusesALeaseOfTheSameEpochNumberWithOtherCuts(t *testing.T) {
	ctx := t.Context()
	before := Epoch{Number: 2, Plan: Equal(3)}
	after := Epoch{Number: 2, Plan: Plan{Cuts: []uint64{1 << 62, 1 << 63}}}
	if before.Label(1) == after.Label(1) {
		t.Fatalf("epoch 2 labels shard 1 %s with either cut", before.Label(1))
	}
	client := fake.NewClientset(lease(ShardLeaseName(testBase, 1), RoleShard, after.Label(1), ""))
	leases := GuardEpoch(client.CoordinationV1(), testNamespace, before.Label(1)).Leases(testNamespace)
	read, err := leases.Get(ctx, ShardLeaseName(testBase, 1), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	read.Spec.HolderIdentity = ptr.To("me")
	if _, err := leases.Update(ctx, read, metav1.UpdateOptions{}); !errors.Is(err, ErrOtherEpoch) {
		t.Errorf("an election of epoch 2's old cuts took the Lease of epoch 2's new cuts: %v", err)
	}
}

// Defect 5: a coordinator whose Lease cache is behind (it shows epoch 2 while its
// successor activated epoch 3, which moved shard 1) must not re-create a deleted
// shard Lease with epoch 2's label: a replica as far behind could take it and work on
// the old range, and nobody would campaign for it under epoch 3 until the next recut.
func TestAStaleCoordinatorDoesNotRecreateAShardLeaseWithTheLabelOfAMovedRange(t *testing.T) {
	e2 := Epoch{Number: 2, Plan: Equal(3)}
	e3 := e2.Next(3, Plan{Cuts: []uint64{e2.Plan.Cuts[0], e2.Plan.Cuts[1] + 5}})
	r, client := testReplica(t, 3, planLease(&e2, nil),
		lease(ShardLeaseName(testBase, 0), RoleShard, e2.Label(0), "a"),
		lease(ShardLeaseName(testBase, 2), RoleShard, e2.Label(2), "b"))
	// The apiserver has moved on: epoch 3 is active.
	current := getLease(t, client, PlanLeaseName(testBase))
	current.Annotations[AnnotationPlan] = e3.String()
	if _, err := client.CoordinationV1().Leases(testNamespace).Update(t.Context(), current, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.coordinator.step(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, err := client.CoordinationV1().Leases(testNamespace).Get(t.Context(), ShardLeaseName(testBase, 1), metav1.GetOptions{})
	if err == nil && got.Labels[LabelEpoch] != e3.Label(1) {
		t.Errorf("the coordinator re-created shard 1's Lease with label %s from its stale cache; the plan gives it %s", got.Labels[LabelEpoch], e3.Label(1))
	}
}

// Defect 5: a shard Lease that carries another label than the active plan gives it
// (the plan was edited by hand, or a stale coordinator re-created the Lease) is
// relabelled once released or expired, so that its namespaces are served again
// without waiting for a recut.
func TestTheCoordinatorRelabelsAShardLeaseThatCarriesAnotherLabelThanTheActivePlan(t *testing.T) {
	e2 := Epoch{Number: 2, Plan: Equal(3)}
	other := Epoch{Number: 2, Plan: Plan{Cuts: []uint64{1 << 62, 1 << 63}}}
	r, client := testReplica(t, 3, planLease(&e2, nil),
		lease(ShardLeaseName(testBase, 0), RoleShard, e2.Label(0), "a"),
		lease(ShardLeaseName(testBase, 1), RoleShard, other.Label(1), ""),
		lease(ShardLeaseName(testBase, 2), RoleShard, e2.Label(2), "b"))
	if err := r.coordinator.step(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := getLease(t, client, ShardLeaseName(testBase, 1)); got.Labels[LabelEpoch] != e2.Label(1) {
		t.Errorf("shard 1's released Lease still carries %s under the active plan, which gives it %s", got.Labels[LabelEpoch], e2.Label(1))
	}
}
