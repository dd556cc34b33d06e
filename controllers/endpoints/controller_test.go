package endpoints

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/controllers/endpoints/subsets"
	"github.com/mini-kcm/mini-kcm/controllers/podstate"
)

func TestDescriptorUsesUpstreamNames(t *testing.T) {
	d := Descriptor()
	if d.Name != "endpoints-controller" || !slices.Equal(d.Aliases, []string{"endpoints", "endpoint"}) || d.DisabledByDefault {
		t.Errorf("descriptor = %q %v disabled=%v", d.Name, d.Aliases, d.DisabledByDefault)
	}
	if _, err := controllers.NewRegistry(d); err != nil {
		t.Errorf("the registry rejects the descriptor: %v", err)
	}
}

type clientBuilder struct {
	client kubernetes.Interface
	err    error
	asked  []string
}

func (b *clientBuilder) Client(name string) (kubernetes.Interface, error) {
	b.asked = append(b.asked, name)
	return b.client, b.err
}

type recorders struct{ asked []string }

func (r *recorders) Recorder(component string) record.EventRecorder {
	r.asked = append(r.asked, component)
	return record.NewFakeRecorder(10)
}

func TestNewBuildsTheControllerFromTheAppContext(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	clients, events := &clientBuilder{client: client}, &recorders{}
	cc := controllers.Context{
		InformerFactory: factory,
		Clients:         clients,
		Events:          events,
		Config:          controllers.Config{Options: map[string]controllers.Options{Name: &Options{ConcurrentSyncs: 3, UpdatesBatchPeriod: time.Second}}},
	}

	got, workers, err := New(ctx, cc)
	if err != nil {
		t.Fatalf("New: %v", err)
	}

	if !slices.Equal(clients.asked, []string{"endpoints-controller"}) || !slices.Equal(events.asked, []string{"endpoint-controller"}) {
		t.Errorf("asked for clients %v and recorders %v", clients.asked, events.asked)
	}
	if c := got.(*Controller); workers != 3 || c.batchPeriod != time.Second {
		t.Errorf("workers %d, batch period %v; want 3 and 1s", workers, c.batchPeriod)
	}
	// The informers must be registered with the factory by New, before the app starts it.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	factory.Start(ctx.Done())
	synced := factory.WaitForCacheSync(ctx.Done())
	for _, obj := range []any{&v1.Pod{}, &v1.Service{}, &v1.Endpoints{}} {
		found := false
		for typ, ok := range synced {
			found = found || (typ.String() == fmt.Sprintf("%T", obj) && ok)
		}
		if !found {
			t.Errorf("no synced informer for %T in %v", obj, synced)
		}
	}
}

func TestNewFailsWithoutItsClient(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	cc := controllers.Context{
		InformerFactory: informers.NewSharedInformerFactory(fake.NewClientset(), 0),
		Clients:         &clientBuilder{err: errors.New("no kubeconfig")},
		Events:          &recorders{},
	}
	if c, _, err := New(ctx, cc); err == nil {
		t.Errorf("New returned %v and no error", c)
	}
}

func TestCheckLeftoverEndpointsQueuesAllButLeaderElectionRecords(t *testing.T) {
	f := newFixture(t, 0)
	for _, ep := range []*v1.Endpoints{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "foo"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "bar"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "legacy-lock",
			Annotations: map[string]string{resourcelock.LeaderElectionRecordAnnotationKey: "{}"}}},
	} {
		if err := f.endpoints.Add(ep); err != nil {
			t.Fatal(err)
		}
	}

	f.controller.checkLeftoverEndpoints(f.ctx)

	if got := drain(f.controller); !slices.Equal(got, []string{"default/foo", "other/bar"}) {
		t.Errorf("queued %v, want default/foo and other/bar", got)
	}
}

func TestServiceAndEndpointsEventsQueueTheServiceAtOnce(t *testing.T) {
	f := newFixture(t, time.Hour)
	service := testService("ns")
	endpoints := &v1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ep"}}

	f.controller.enqueueService(service)
	f.controller.enqueueService(cache.DeletedFinalStateUnknown{Key: "ns/gone", Obj: service})
	f.controller.enqueueService(endpoints)

	if got := drain(f.controller); !slices.Equal(got, []string{"ns/ep", "ns/foo", "ns/gone"}) {
		t.Errorf("queued %v, want ns/ep, ns/foo and ns/gone despite the batch period", got)
	}
}

func TestPodEventsQueueMatchingServicesAfterTheBatchPeriod(t *testing.T) {
	tests := []struct {
		name        string
		batchPeriod time.Duration
		wantAtOnce  []string
	}{
		{"without batching at once", 0, []string{"ns/foo"}},
		{"with batching later", time.Hour, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.batchPeriod)
			f.addService(testService("ns"))
			other := testService("ns")
			other.Name, other.Spec.Selector = "other", map[string]string{"app": "other"}
			f.addService(other)
			pod := testPod("ns", 0, 1, true, ipv4only)

			f.controller.onPodEvent(nil, pod)
			if f.controller.podQueue.Len() != 1 {
				t.Fatalf("pod queue holds %d projections, want 1", f.controller.podQueue.Len())
			}
			f.controller.podQueue.ProcessNextWorkItem(f.ctx)

			if got := drain(f.controller); !slices.Equal(got, tc.wantAtOnce) {
				t.Errorf("queued %v, want %v", got, tc.wantAtOnce)
			}
		})
	}
}

// TestPodEventsAreNotQueuedBeforeRunStarts: a warm standby's informers deliver pod
// events for as long as it stands by; queuing them would grow the never-drained pod
// queue without bound. The Services, queued by their own informer, cover them.
func TestPodEventsAreNotQueuedBeforeRunStarts(t *testing.T) {
	f := newFixture(t, 0)
	f.controller.running.Store(false)
	f.addService(testService("ns"))
	for i := range 100 {
		f.controller.onPodEvent(nil, testPod("ns", i, 1, true, ipv4only))
	}
	if n := f.controller.podQueue.Len(); n != 0 {
		t.Errorf("the pod queue holds %d projections before Run, want 0", n)
	}
}

func TestPodResyncsAreIgnored(t *testing.T) {
	f := newFixture(t, 0)
	pod := testPod("ns", 0, 1, true, ipv4only)

	f.controller.onPodEvent(pod, pod.DeepCopy())

	if f.controller.podQueue.Len() != 0 {
		t.Errorf("a resync queued %d projections", f.controller.podQueue.Len())
	}
}

// TestEndpointsComeBackAfterAServiceIsRecreated replays a Service deleted and recreated
// before the Endpoints cache saw the deletion: the recreated Service's sync finds the old
// Endpoints and writes nothing, and the late deletion event brings the Endpoints back.
func TestEndpointsComeBackAfterAServiceIsRecreated(t *testing.T) {
	f := newFixture(t, 0)
	service := testService("default")
	service.Spec.ClusterIP, service.Spec.Ports = v1.ClusterIPNone, nil
	f.addService(service)
	f.addPods(testPod("default", 0, 1, true, ipv4only))
	f.mustSync("default", "foo")
	created := f.onlyWrite("create")
	created.ResourceVersion = "1"
	if err := f.endpoints.Add(created); err != nil {
		t.Fatal(err)
	}
	f.client.ClearActions()

	if err := f.services.Delete(service); err != nil {
		t.Fatal(err)
	}
	f.mustSync("default", "foo")
	f.onlyWrite("delete")
	f.client.ClearActions()

	f.addService(service)
	f.mustSync("default", "foo")
	f.noWrites()

	if err := f.endpoints.Delete(created); err != nil {
		t.Fatal(err)
	}
	f.controller.enqueueService(created)
	if got := drain(f.controller); !slices.Equal(got, []string{"default/foo"}) {
		t.Fatalf("the Endpoints deletion queued %v", got)
	}
	f.mustSync("default", "foo")
	f.onlyWrite("create")
}

func TestRunWaitsForEveryInformer(t *testing.T) {
	tests := []struct {
		name                                      string
		podsSynced, servicesSynced, endpointsSync cache.InformerSynced
		wantWrite                                 bool
	}{
		{"pods not synced", neverReady, alwaysReady, alwaysReady, false},
		{"services not synced", alwaysReady, neverReady, alwaysReady, false},
		{"endpoints not synced", alwaysReady, alwaysReady, neverReady, false},
		{"all synced", alwaysReady, alwaysReady, alwaysReady, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 0)
			f.addPods(testPod("other", 0, 1, true, ipv4only))
			service := testService("other")
			f.addService(service)
			f.controller.enqueueService(service)
			f.controller.podsSynced, f.controller.servicesSynced, f.controller.endpointsSynced = tc.podsSynced, tc.servicesSynced, tc.endpointsSync

			stop := runController(t, f, 1)
			// The cache sync polls every 100ms; give it time for a few polls.
			time.Sleep(300 * time.Millisecond)
			if tc.wantWrite {
				waitFor(t, "the Endpoints to be written", func() bool { return len(f.writes()) == 1 })
			} else if writes := f.writes(); len(writes) != 0 {
				t.Errorf("wrote %v before the caches synced", describe(writes))
			}
			stop()
		})
	}
}

func TestRunStopsItsWorkersBeforeReturning(t *testing.T) {
	f := newFixture(t, 0)
	stop := runController(t, f, 3)
	stop()
	if !f.controller.queue.ShuttingDown() || !f.controller.podQueue.ShuttingDown() {
		t.Error("Run returned with its queues still open")
	}
}

// TestRunBatchesPodUpdates drives the controller through real informers on a fake
// apiserver and counts the Endpoints updates that pod IP changes cause.
func TestRunBatchesPodUpdates(t *testing.T) {
	if testing.Short() {
		t.Skip("takes a few seconds of real time")
	}
	type podUpdate struct {
		delay time.Duration // before the update
		pod   int
	}
	tests := []struct {
		name        string
		batchPeriod time.Duration
		updates     []podUpdate
		wantUpdates int
	}{
		{"no batching: one write per update", 0, []podUpdate{{0, 0}, {200 * time.Millisecond, 1}, {200 * time.Millisecond, 2}}, 3},
		// The batch period is long against the gaps between updates, so that a loaded
		// machine (CI runs this with -race beside other work) cannot stretch three
		// updates 100ms apart across a batch boundary.
		{"three updates in one batch", 2 * time.Second, []podUpdate{{0, 0}, {100 * time.Millisecond, 1}, {100 * time.Millisecond, 2}}, 1},
		{"three updates in two batches", 2 * time.Second, []podUpdate{{0, 0}, {100 * time.Millisecond, 1}, {2500 * time.Millisecond, 2}}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			client := fake.NewClientset()
			bumpResourceVersions(client)
			factory := informers.NewSharedInformerFactory(client, 0)
			core := factory.Core().V1()
			c, err := NewController(ctx, core.Pods(), core.Services(), core.Endpoints(), client, record.NewFakeRecorder(100), tc.batchPeriod)
			if err != nil {
				t.Fatal(err)
			}
			c.workerLoopPeriod = 10 * time.Millisecond
			factory.Start(ctx.Done())
			f := &fixture{t: t, ctx: ctx, client: client, controller: c}

			for _, pod := range testPods("other", 10, 0, 1, ipv4only) {
				if _, err := client.CoreV1().Pods("other").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := client.CoreV1().Services("other").Create(ctx, testService("other"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			stop := runController(t, f, 1)
			defer stop()
			waitFor(t, "the Endpoints to be created and cached", func() bool {
				ep, err := core.Endpoints().Lister().Endpoints("other").Get("foo")
				return err == nil && len(ep.Subsets) == 1 && len(ep.Subsets[0].Addresses) == 10
			})
			// Let the syncs of the initial pod adds finish: they wait in the delaying
			// queue for a batch period, where queue.Len does not count them.
			time.Sleep(tc.batchPeriod + 200*time.Millisecond)
			waitFor(t, "the queues to drain", func() bool { return c.queue.Len() == 0 && c.podQueue.Len() == 0 })
			client.ClearActions()

			for _, u := range tc.updates {
				time.Sleep(u.delay)
				pod, err := client.CoreV1().Pods("other").Get(ctx, fmt.Sprintf("pod%d", u.pod), metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				ip := fmt.Sprintf("10.0.0.%d", u.pod)
				pod.Status.PodIP, pod.Status.PodIPs = ip, []v1.PodIP{{IP: ip}}
				if _, err := client.CoreV1().Pods("other").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(tc.batchPeriod + 700*time.Millisecond)

			if got := len(f.writes()); got != tc.wantUpdates {
				t.Errorf("%d Endpoints writes (%v), want %d", got, describe(f.writes()), tc.wantUpdates)
			}
		})
	}
}

// runController runs the controller with workers workers and returns a function that
// stops it and waits until Run returned.
func runController(t *testing.T, f *fixture, workers int) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(f.ctx)
	var wg sync.WaitGroup
	wg.Go(func() { f.controller.Run(ctx, workers) })
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return after its context was cancelled")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func waitFor(t *testing.T, what string, condition func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return condition(), nil })
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// drain returns the sorted keys waiting in the Service queue and empties it.
func drain(c *Controller) []string {
	var keys []string
	for c.queue.Len() > 0 {
		key, _ := c.queue.Get()
		keys = append(keys, key)
		c.queue.Done(key)
		c.queue.Forget(key)
	}
	slices.Sort(keys)
	return keys
}

// TestASyncBehindItsOwnWriteResumesWhenTheCacheCatchesUp replays the end of a readiness
// flip: a pod changes while its Service's Endpoints update is in flight, so the next
// sync finds the cache still holding the version that update replaced. That sync must
// run again as soon as the cache sees the write, not after a retry backoff: the queue
// here runs on a clock that never moves, so only an immediate requeue brings the
// Service back.
func TestASyncBehindItsOwnWriteResumesWhenTheCacheCatchesUp(t *testing.T) {
	const ns = "default"
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := fake.NewClientset()
	bumpResourceVersions(client)
	// The Endpoints watch delivers only what the test sends, so the test decides when
	// the cache sees the controller's write.
	endpointsWatch := watch.NewFake()
	client.PrependWatchReactor("endpoints", core.DefaultWatchReactor(endpointsWatch, nil))
	factory := informers.NewSharedInformerFactory(client, 0)
	cached := factory.Core().V1()
	c, err := NewController(ctx, cached.Pods(), cached.Services(), cached.Endpoints(), client, record.NewFakeRecorder(100), 0)
	if err != nil {
		t.Fatal(err)
	}
	c.queue.TypedRateLimitingInterface = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Clock: clocktesting.NewFakeClock(time.Now())})
	defer c.queue.ShutDown()

	if _, err := client.CoreV1().Pods(ns).Create(ctx, testPod(ns, 0, 1, true, ipv4only), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Services(ns).Create(ctx, testService(ns), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	empty := &v1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "foo", Labels: managedLabels()}}
	if _, err := client.CoreV1().Endpoints(ns).Create(ctx, empty, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("cache of %v did not sync", typ)
		}
	}
	stored := func() *v1.Endpoints {
		t.Helper()
		ep, err := client.CoreV1().Endpoints(ns).Get(ctx, "foo", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ep
	}
	syncQueued := func() {
		t.Helper()
		if n := c.queue.Len(); n != 1 {
			t.Fatalf("%d Services ready to sync, want 1", n)
		}
		c.queue.ProcessNextWorkItem(ctx)
	}

	// The first sync publishes the ready pod; its write is not in the cache yet.
	c.queue.Add(ns + "/foo")
	syncQueued()
	written := stored()
	if ready, _ := subsets.Count(written.Subsets); ready != 1 {
		t.Fatalf("the first write has %d ready addresses, want 1", ready)
	}

	// The pod turns not ready meanwhile, and its Service's sync finds its own write
	// missing from the cache.
	pod, err := client.CoreV1().Pods(ns).Get(ctx, "pod0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Conditions[0].Status = v1.ConditionFalse
	if _, err := client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pod cache to see the pod not ready", func() bool {
		pod, err := cached.Pods().Lister().Pods(ns).Get("pod0")
		return err == nil && !podstate.IsReady(pod)
	})
	c.queue.Add(ns + "/foo")
	syncQueued()
	if got := stored(); got.ResourceVersion != written.ResourceVersion {
		t.Fatalf("a sync from the stale cache wrote version %s", got.ResourceVersion)
	}

	// The cache catches up: the Service syncs again at once and publishes the change.
	endpointsWatch.Modify(written)
	waitFor(t, "the Service to be queued again", func() bool { return c.queue.Len() == 1 })
	syncQueued()
	if ready, notReady := subsets.Count(stored().Subsets); ready != 0 || notReady != 1 {
		t.Errorf("the Endpoints have %d ready and %d not-ready addresses, want the pod not ready", ready, notReady)
	}
}
