package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/apiserver/pkg/server/mux"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/mini-kcm/mini-kcm/app/serving"
	"github.com/mini-kcm/mini-kcm/caches/reconnect"
	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/controllers/all"
	"github.com/mini-kcm/mini-kcm/leaderelection"
)

// InformerClient is Client for the informers: they report their connection nowhere.
func (c *fakeClients) InformerClient(name string, _ *reconnect.Informers) (kubernetes.Interface, error) {
	return c.Client(name)
}

// fakeClients hands the same fake clientset to every caller and remembers who asked.
type fakeClients struct {
	client *fake.Clientset
	mu     sync.Mutex
	names  []string
}

func (f *fakeClients) Client(name string) (kubernetes.Interface, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.names = append(f.names, name)
	return f.client, nil
}

type fakeRecorders struct{}

func (fakeRecorders) Recorder(string) record.EventRecorder { return record.NewFakeRecorder(100) }

// testController is a controller whose Run is supplied by the test. It exists only in
// tests; the product registers no placeholder controller.
type testController func(ctx context.Context)

func (run testController) Run(ctx context.Context, _ int) { run(ctx) }

// workersController is a test controller that sees its worker count.
type workersController func(ctx context.Context, workers int)

func (run workersController) Run(ctx context.Context, workers int) { run(ctx, workers) }

// podController builds a controller that asks for the pod informer in its constructor
// and, in Run, waits for its cache and then for ctx, like a real controller.
type podController struct {
	name string
	// listsAtConstruction is how many pod lists the apiserver had seen when the
	// constructor ran: informers must not have started yet.
	listsAtConstruction atomic.Int32
	informer            cache.SharedIndexInformer
	synced              chan struct{}
	// drain runs after ctx is cancelled, standing in for in-flight syncs.
	drain func()
	// stopped is closed when Run returned.
	stopped chan struct{}
}

func newPodController(name string) *podController {
	return &podController{name: name, synced: make(chan struct{}), stopped: make(chan struct{}), drain: func() {}}
}

func (p *podController) descriptor(lists *atomic.Int32) controllers.Descriptor {
	return controllers.Descriptor{
		Name: p.name,
		New: func(ctx context.Context, cc controllers.Context) (controllers.Controller, int, error) {
			p.informer = cc.InformerFactory.Core().V1().Pods().Informer()
			p.listsAtConstruction.Store(lists.Load())
			return testController(func(ctx context.Context) {
				defer close(p.stopped)
				if !cc.Caches.WaitForCacheSync(ctx, p.name, controllers.InformerSync{Name: "pods", Synced: p.informer.HasSynced}) {
					return
				}
				close(p.synced)
				<-ctx.Done()
				p.drain()
			}), 1, nil
		},
	}
}

// newTestManager returns a manager for the given descriptors, all enabled.
func newTestManager(t *testing.T, client *fake.Clientset, descriptors ...controllers.Descriptor) *controllerManager {
	t.Helper()
	reg, err := controllers.NewRegistry(descriptors...)
	if err != nil {
		t.Fatal(err)
	}
	clients := &fakeClients{client: client}
	return &controllerManager{
		registry:        reg,
		enabled:         reg.Names(),
		clients:         clients,
		informerClient:  clients.InformerClient,
		events:          fakeRecorders{},
		minResyncPeriod: time.Hour,
		shutdownTimeout: 10 * time.Second,
		readiness:       &serving.Readiness{},
	}
}

func testContext(t *testing.T) (context.Context, context.CancelFunc) {
	logger, _ := ktesting.NewTestContext(t)
	return context.WithCancel(klog.NewContext(context.Background(), logger))
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func TestConstructorsRunBeforeInformersStartAndControllersAfter(t *testing.T) {
	ctx, cancel := testContext(t)
	defer cancel()
	client := fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p"}})
	var lists atomic.Int32
	client.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		lists.Add(1)
		return false, nil, nil
	})
	a, b := newPodController("a-controller"), newPodController("b-controller")
	m := newTestManager(t, client, a.descriptor(&lists), b.descriptor(&lists))

	done := make(chan error, 1)
	go func() { done <- m.run(ctx) }()
	waitClosed(t, a.synced, "a's caches")
	waitClosed(t, b.synced, "b's caches")
	if a.listsAtConstruction.Load() != 0 || b.listsAtConstruction.Load() != 0 {
		t.Error("informers were started before every constructor ran")
	}
	if lists.Load() != 1 {
		t.Errorf("pods were listed %d times, want once: the informer is shared", lists.Load())
	}
	if names := m.clients.(*fakeClients).names; len(names) != 1 || names[0] != "shared-informers" {
		t.Errorf("clients built = %q, want the shared informers' own", names)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run() = %v", err)
	}
}

func TestShutdownWaitsForControllersThenStopsInformers(t *testing.T) {
	ctx, cancel := testContext(t)
	var lists atomic.Int32
	c := newPodController("slow-controller")
	var informerStoppedWhileDraining atomic.Bool
	var drained atomic.Bool
	c.drain = func() {
		time.Sleep(300 * time.Millisecond)
		informerStoppedWhileDraining.Store(c.informer.IsStopped())
		drained.Store(true)
	}
	m := newTestManager(t, fake.NewClientset(), c.descriptor(&lists))
	done := make(chan error, 1)
	go func() { done <- m.run(ctx) }()
	waitClosed(t, c.synced, "caches")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run() = %v", err)
	}
	if !drained.Load() {
		t.Error("run returned before the controller finished")
	}
	if informerStoppedWhileDraining.Load() {
		t.Error("informers stopped while a controller was still draining")
	}
	if !c.informer.IsStopped() {
		t.Error("informers still run after run returned")
	}
}

func TestShutdownTimeoutReportsControllersStillRunning(t *testing.T) {
	ctx, cancel := testContext(t)
	release := make(chan struct{})
	defer close(release)
	stuck := controllers.Descriptor{
		Name: "stuck-controller",
		New: func(context.Context, controllers.Context) (controllers.Controller, int, error) {
			return testController(func(context.Context) { <-release }), 1, nil
		},
	}
	m := newTestManager(t, fake.NewClientset(), stuck)
	m.shutdownTimeout = 300 * time.Millisecond
	done := make(chan error, 1)
	go func() { done <- m.run(ctx) }()
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, leaderelection.ErrControllersStillRunning) || !strings.Contains(err.Error(), "stuck-controller") {
			t.Errorf("run() = %v, want ErrControllersStillRunning naming stuck-controller", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("run did not give up after the shutdown timeout")
	}
}

func TestConstructorErrorAbortsTheStart(t *testing.T) {
	ctx, cancel := testContext(t)
	defer cancel()
	var ran atomic.Bool
	good := controllers.Descriptor{
		Name: "a-controller",
		New: func(context.Context, controllers.Context) (controllers.Controller, int, error) {
			return testController(func(context.Context) { ran.Store(true) }), 1, nil
		},
	}
	bad := controllers.Descriptor{
		Name: "b-controller",
		New: func(context.Context, controllers.Context) (controllers.Controller, int, error) {
			return nil, 0, errors.New("missing permission")
		},
	}
	err := newTestManager(t, fake.NewClientset(), good, bad).run(ctx)
	if err == nil || err.Error() != "building controller b-controller: missing permission" {
		t.Errorf("run() = %v, want the constructor's error", err)
	}
	if ran.Load() {
		t.Error("a controller ran although the start was aborted")
	}
}

func TestControllersRunWithTheWorkersTheirConstructorAsksFor(t *testing.T) {
	ctx, cancel := testContext(t)
	defer cancel()
	got := make(chan int, 1)
	d := controllers.Descriptor{Name: "a-controller", New: func(context.Context, controllers.Context) (controllers.Controller, int, error) {
		return workersController(func(ctx context.Context, workers int) {
			got <- workers
			<-ctx.Done()
		}), 7, nil
	}}
	done := make(chan error, 1)
	go func() { done <- newTestManager(t, fake.NewClientset(), d).run(ctx) }()
	select {
	case workers := <-got:
		if workers != 7 {
			t.Errorf("ran with %d workers, want the constructor's 7", workers)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the controller never ran")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestAControllerAskingForNoWorkersAbortsTheStart(t *testing.T) {
	ctx, cancel := testContext(t)
	defer cancel()
	var ran atomic.Bool
	idle := controllers.Descriptor{Name: "idle-controller", New: func(context.Context, controllers.Context) (controllers.Controller, int, error) {
		return testController(func(context.Context) { ran.Store(true) }), 0, nil
	}}
	err := newTestManager(t, fake.NewClientset(), idle).run(ctx)
	if err == nil || err.Error() != "building controller idle-controller: it needs at least 1 worker, got 0" {
		t.Errorf("run() = %v, want an error naming the controller and its worker count", err)
	}
	if ran.Load() {
		t.Error("a controller without workers ran")
	}
}

func TestNilControllerIsSkippedAndDisabledOnesAreNotBuilt(t *testing.T) {
	ctx, cancel := testContext(t)
	defer cancel()
	built := map[string]bool{}
	var mu sync.Mutex
	descriptor := func(name string, skip bool) controllers.Descriptor {
		return controllers.Descriptor{Name: name, New: func(_ context.Context, cc controllers.Context) (controllers.Controller, int, error) {
			mu.Lock()
			built[name] = true
			mu.Unlock()
			if skip {
				return nil, 0, nil
			}
			return testController(func(ctx context.Context) {
				cc.Caches.WaitForCacheSync(ctx, name)
				<-ctx.Done()
			}), 1, nil
		}}
	}
	m := newTestManager(t, fake.NewClientset(), descriptor("skipped-controller", true), descriptor("running-controller", false),
		descriptor("disabled-controller", false))
	m.enabled = []string{"running-controller", "skipped-controller"}
	done := make(chan error, 1)
	go func() { done <- m.run(ctx) }()
	// The skipped controller must not hold /readyz back.
	readyz := endpoint("/readyz", m.readiness.Checks()...)
	deadline := time.Now().Add(5 * time.Second)
	for code, _ := get(t, readyz, "/readyz"); code != http.StatusOK; code, _ = get(t, readyz, "/readyz") {
		if time.Now().After(deadline) {
			_, body := get(t, readyz, "/readyz/controllers")
			t.Fatalf("never ready: %s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if want := map[string]bool{"skipped-controller": true, "running-controller": true}; fmt.Sprint(built) != fmt.Sprint(want) {
		t.Errorf("built %v, want %v", built, want)
	}
}

func TestEveryControllerStoppingEarlyIsAnError(t *testing.T) {
	ctx, cancel := testContext(t)
	defer cancel()
	quitter := controllers.Descriptor{Name: "quitter-controller", New: func(context.Context, controllers.Context) (controllers.Controller, int, error) {
		return testController(func(context.Context) {}), 1, nil
	}}
	if err := newTestManager(t, fake.NewClientset(), quitter).run(ctx); err == nil {
		t.Error("run() = nil, want an error when every controller stopped on its own")
	}
}

func TestNoControllersRunsUntilShutdown(t *testing.T) {
	ctx, cancel := testContext(t)
	m := newTestManager(t, fake.NewClientset())
	done := make(chan error, 1)
	go func() { done <- m.run(ctx) }()
	select {
	case err := <-done:
		t.Fatalf("run() returned early: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestRegistryRejectsDuplicateNamesAndAliases(t *testing.T) {
	noop := func(context.Context, controllers.Context) (controllers.Controller, int, error) { return nil, 0, nil }
	tests := map[string][]controllers.Descriptor{
		"duplicate name": {{Name: "a-controller", New: noop}, {Name: "a-controller", New: noop}},
		"duplicate alias": {{Name: "a-controller", Aliases: []string{"x"}, New: noop},
			{Name: "b-controller", Aliases: []string{"x"}, New: noop}},
		"alias equal to a name": {{Name: "a-controller", New: noop}, {Name: "b-controller", Aliases: []string{"a-controller"}, New: noop}},
	}
	for name, descriptors := range tests {
		if _, err := controllers.NewRegistry(descriptors...); err == nil {
			t.Errorf("%s: NewRegistry() = nil error", name)
		}
	}
}

func TestProductRegistryHasUpstreamNamesAndAliases(t *testing.T) {
	reg := newRegistry() // panics on a duplicate name or alias
	want := map[string]string{
		"replicaset-controller": "replicaset-controller", "replicaset": "replicaset-controller",
		"deployment-controller": "deployment-controller", "deployment": "deployment-controller",
		"endpoints-controller": "endpoints-controller", "endpoints": "endpoints-controller", "endpoint": "endpoints-controller",
	}
	for name, canonical := range want {
		if got, ok := reg.Canonical(name); !ok || got != canonical {
			t.Errorf("Canonical(%q) = %q, %v; want %q", name, got, ok, canonical)
		}
	}
	// Exactly the listed controllers, however many: adding one is an entry in package
	// all, not an edit here.
	if names, listed := reg.Names(), all.Descriptors(); len(names) != len(listed) {
		t.Errorf("registered %q, want exactly the %d listed controllers", names, len(listed))
	}
	if disabled := reg.DisabledByDefault(); len(disabled) != 0 {
		t.Errorf("disabled by default: %q, want none", disabled)
	}
}

func TestResyncPeriodIsJitteredBetweenMinAndTwiceMin(t *testing.T) {
	for range 1000 {
		if d := resyncPeriod(time.Hour); d < time.Hour || d >= 2*time.Hour {
			t.Fatalf("resyncPeriod(1h) = %s", d)
		}
	}
	if d := resyncPeriod(0); d != 0 {
		t.Errorf("resyncPeriod(0) = %s, want 0 (no resync)", d)
	}
}

// TestWarmStandbySyncsItsCachesAndWritesNothingUntilItLeads runs the manager as a warm
// standby does: the informers stage in the process's lifecycle, the workers only once
// "leading". While standing by, the controllers are built and the caches sync (and
// /readyz says so), but no controller runs and the only requests are lists and watches.
func TestWarmStandbySyncsItsCachesAndWritesNothingUntilItLeads(t *testing.T) {
	ctx, cancel := testContext(t)
	defer cancel()
	client := fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p"}})
	// The pod list waits for the test, so that /readyz is seen before the sync.
	allowList := make(chan struct{})
	var lists atomic.Int32
	client.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		<-allowList
		lists.Add(1)
		return false, nil, nil
	})
	c := newPodController("warm-controller")
	var drainedBeforeInformersStopped atomic.Bool
	c.drain = func() {
		time.Sleep(100 * time.Millisecond)
		drainedBeforeInformersStopped.Store(!c.informer.IsStopped())
	}
	m := newTestManager(t, client, c.descriptor(&lists))
	m.readiness.SetStandby()
	readyz := endpoint("/readyz", m.readiness.Checks()...)

	process := newLifecycle("process")
	built := m.addStages(process)
	standingBy, lead := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- process.run(ctx, "election", func(ctx context.Context) error {
			close(standingBy)
			select {
			case <-lead:
			case <-ctx.Done():
				return nil
			}
			return m.runWorkers(ctx, built)
		})
	}()

	// Standing by: built, informers started but not synced, so not ready.
	waitUntil := func(cond func() bool, what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitClosed(t, standingBy, "the election to start")
	if len(built.controllers) != 1 {
		t.Fatalf("built %d controllers before the election, want 1", len(built.controllers))
	}
	if code, body := get(t, readyz, "/readyz/controllers"); code != http.StatusInternalServerError ||
		!strings.Contains(body, "warm standby: informers not synced yet: *v1.Pod") {
		t.Errorf("standby before its sync: /readyz/controllers = %d %q, want 500 naming the pod informer", code, body)
	}
	close(allowList)
	waitUntil(func() bool { return c.informer.HasSynced() }, "the standby's pod cache")
	if code, body := get(t, readyz, "/readyz?verbose"); code != http.StatusOK {
		t.Errorf("synced standby: /readyz = %d %q, want 200", code, body)
	}
	if got := len(c.informer.GetStore().List()); got != 1 {
		t.Errorf("standby's pod cache holds %d pods, want 1", got)
	}
	select {
	case <-c.synced:
		t.Fatal("the controller ran while standing by")
	case <-time.After(100 * time.Millisecond):
	}

	// Leading: the controller runs on the synced cache without listing again.
	close(lead)
	waitClosed(t, c.synced, "the leader's controller")
	if lists.Load() != 1 {
		t.Errorf("pods were listed %d times, want once: leading must reuse the standby's cache", lists.Load())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run() = %v", err)
	}
	if !drainedBeforeInformersStopped.Load() {
		t.Error("informers stopped while the controller was still draining")
	}
	if !c.informer.IsStopped() {
		t.Error("informers still run after the process lifecycle returned")
	}
	for _, a := range client.Actions() {
		if verb := a.GetVerb(); verb != "list" && verb != "watch" {
			t.Errorf("request %s %s, want only lists and watches", verb, a.GetResource().Resource)
		}
	}
}

func TestAControllerWaitingForItsStartIntervalStopsWithoutRunning(t *testing.T) {
	ctx, cancel := testContext(t)
	defer cancel()
	var ran atomic.Bool
	m := newTestManager(t, fake.NewClientset())
	m.startInterval = time.Hour
	waiting := testController(func(context.Context) { ran.Store(true) })
	done := make(chan error, 1)
	go func() {
		done <- m.runControllers(ctx, []builtController{{name: "waiting-controller", controller: waiting, workers: 1}})
	}()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("runControllers() = %v, want nil on shutdown", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("runControllers did not return on shutdown while a controller waited for its start interval")
	}
	if ran.Load() {
		t.Error("the controller ran although mini-kcm shut down before its start interval passed")
	}
}

// get serves target with h and returns the answer's code and body.
func get(t *testing.T, h http.Handler, target string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

// endpoint serves checks as path, with a path per check beneath it.
func endpoint(path string, checks ...healthz.HealthChecker) http.Handler {
	m := mux.NewPathRecorderMux("test")
	healthz.InstallPathHandler(m, path, checks...)
	return m
}
