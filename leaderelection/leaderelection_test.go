package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
)

const (
	leaseNamespace = "kube-system"
	leaseName      = "test-lease"
)

// testConfig returns fast timings: a lost renewal is detected after one second.
func testConfig(client *fake.Clientset, identity string) Config {
	return Config{
		Client:        client,
		Namespace:     leaseNamespace,
		Name:          leaseName,
		Identity:      identity,
		Timings:       Timings{LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond},
		EventRecorder: record.NewFakeRecorder(100),
	}
}

// leaseUpdates records the holder of every Lease update the client attempts.
type leaseUpdates struct {
	mu      sync.Mutex
	holders []string
}

func (u *leaseUpdates) record(action clienttesting.Action) (bool, runtime.Object, error) {
	lease := action.(clienttesting.UpdateAction).GetObject().(*coordinationv1.Lease)
	u.mu.Lock()
	defer u.mu.Unlock()
	u.holders = append(u.holders, ptr.Deref(lease.Spec.HolderIdentity, ""))
	return false, nil, nil
}

func (u *leaseUpdates) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.holders)
}

func getLease(t *testing.T, client *fake.Clientset) *coordinationv1.Lease {
	t.Helper()
	lease, err := client.CoordinationV1().Leases(leaseNamespace).Get(context.Background(), leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return lease
}

// runInBackground starts Run and returns a channel that yields its result.
func runInBackground(ctx context.Context, cfg Config, run func(context.Context) error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, run) }()
	return done
}

func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func TestSigtermReleasesLeaseOnlyAfterControllersStopped(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	ctx, sigterm := context.WithCancel(klog.NewContext(context.Background(), logger))
	defer sigterm()
	client := fake.NewClientset()
	var drained atomic.Bool
	var releasedEarly atomic.Bool
	updates := &leaseUpdates{}
	client.PrependReactor("update", "leases", func(action clienttesting.Action) (bool, runtime.Object, error) {
		lease := action.(clienttesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		if ptr.Deref(lease.Spec.HolderIdentity, "") == "" && !drained.Load() {
			releasedEarly.Store(true)
		}
		return updates.record(action)
	})
	cfg := testConfig(client, "me")
	recorder := cfg.EventRecorder.(*record.FakeRecorder)

	started := make(chan struct{})
	var updatesWhenCancelled int
	done := runInBackground(ctx, cfg, func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		updatesWhenCancelled = updates.count()
		// Workers finishing in-flight syncs: long enough for several renewals.
		time.Sleep(500 * time.Millisecond)
		drained.Store(true)
		return nil
	})
	waitFor(t, started, "leadership")
	sigterm()
	if err := waitFor(t, done, "Run to return"); err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}

	if releasedEarly.Load() {
		t.Error("the lease was released before the controllers stopped")
	}
	lease := getLease(t, client)
	if holder := ptr.Deref(lease.Spec.HolderIdentity, "<nil>"); holder != "" || ptr.Deref(lease.Spec.LeaseDurationSeconds, 0) != 1 {
		t.Errorf("lease holder %q duration %v, want released (holder \"\", 1s)", holder, ptr.Deref(lease.Spec.LeaseDurationSeconds, 0))
	}
	updates.mu.Lock()
	renewalsWhileDraining := 0
	for _, holder := range updates.holders[updatesWhenCancelled:] {
		if holder == "me" {
			renewalsWhileDraining++
		}
	}
	updates.mu.Unlock()
	if renewalsWhileDraining == 0 {
		t.Error("the lease was not renewed while the controllers drained")
	}
	close(recorder.Events)
	var events []string
	for e := range recorder.Events {
		events = append(events, e)
	}
	want := []string{"Normal LeaderElection me became leader", "Normal LeaderElection me stopped leading"}
	if strings.Join(events, "\n") != strings.Join(want, "\n") {
		t.Errorf("events = %q, want %q", events, want)
	}
}

// failingAPIServer is a fake clientset with the apiserver's optimistic concurrency on
// Leases, whose Lease requests fail once down is set, and which counts the Lease
// writes attempted after lost was closed.
type failingAPIServer struct {
	client          *fake.Clientset
	down            atomic.Bool
	lost            chan struct{}
	writesAfterLoss atomic.Int32
}

func newFailingAPIServer(objects ...runtime.Object) *failingAPIServer {
	api := &failingAPIServer{client: fake.NewClientset(objects...), lost: make(chan struct{})}
	withOptimisticConcurrency(api.client)
	api.client.PrependReactor("*", "leases", func(action clienttesting.Action) (bool, runtime.Object, error) {
		select {
		case <-api.lost:
			if action.GetVerb() != "get" {
				api.writesAfterLoss.Add(1)
			}
		default:
		}
		if api.down.Load() {
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})
	return api
}

var leasesResource = coordinationv1.SchemeGroupVersion.WithResource("leases")

// withOptimisticConcurrency makes the fake clientset's Lease updates fail with a
// conflict unless they carry the stored resourceVersion, and bumps it on every write,
// as the apiserver does.
func withOptimisticConcurrency(client *fake.Clientset) {
	var mu sync.Mutex
	var version int
	client.PrependReactor("update", "leases", func(action clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		lease := action.(clienttesting.UpdateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		stored, err := client.Tracker().Get(leasesResource, lease.Namespace, lease.Name)
		if err != nil {
			return true, nil, err
		}
		if stored.(*coordinationv1.Lease).ResourceVersion != lease.ResourceVersion {
			return true, nil, apierrors.NewConflict(coordinationv1.Resource("leases"), lease.Name, errors.New("the object has been modified"))
		}
		version++
		lease.ResourceVersion = fmt.Sprint(version)
		return true, lease, client.Tracker().Update(leasesResource, lease, lease.Namespace)
	})
	client.PrependReactor("create", "leases", func(action clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		lease := action.(clienttesting.CreateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		version++
		lease.ResourceVersion = fmt.Sprint(version)
		return true, lease, client.Tracker().Create(leasesResource, lease, lease.Namespace)
	})
}

// writeLease writes the Lease as another replica would, holder and all.
func writeLease(t *testing.T, client *fake.Clientset, name string, change func(*coordinationv1.Lease)) {
	t.Helper()
	lease, err := client.CoordinationV1().Leases(leaseNamespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	change(lease)
	if _, err := client.CoordinationV1().Leases(leaseNamespace).Update(context.Background(), lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// fencedConfig is testConfig on api's client with a fence.
func fencedConfig(api *failingAPIServer) Config {
	cfg := testConfig(api.client, "me")
	cfg.Fence = NewFence(leaseNamespace+"/"+leaseName, cfg.LeaseDuration, nil)
	return cfg
}

// eventually polls cond every 10ms for up to 10s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A stall of the apiserver pauses the leader: its fence closes at the renew deadline,
// its workers keep running, and the first renewal that succeeds afterwards reopens the
// fence. Nothing is lost, nothing exits.
func TestAStalledAPIServerPausesTheLeaderAndTheNextRenewalResumesIt(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	ctx, sigterm := context.WithCancel(klog.NewContext(context.Background(), logger))
	defer sigterm()
	api := newFailingAPIServer()
	cfg := fencedConfig(api)
	cfg.Name = "pause-test"
	pausesBefore, _ := testutil.GetCounterMetricValue(pauses.WithLabelValues(cfg.Name))
	resumesBefore, _ := testutil.GetCounterMetricValue(resumes.WithLabelValues(cfg.Name))

	started := make(chan struct{})
	var cancelledWhileLeading atomic.Bool
	done := runInBackground(ctx, cfg, func(runCtx context.Context) error {
		close(started)
		<-runCtx.Done()
		if ctx.Err() == nil {
			cancelledWhileLeading.Store(true)
		}
		return nil
	})
	waitFor(t, started, "leadership")
	if _, err := cfg.Fence.Check(); err != nil {
		t.Fatalf("fence closed while leading: %v", err)
	}
	api.down.Store(true)
	stalledAt := time.Now()
	eventually(t, "the fence to close", func() bool { _, err := cfg.Fence.Check(); return err != nil })
	if d := time.Since(stalledAt); d > cfg.RenewDeadline+200*time.Millisecond {
		t.Errorf("the fence closed %s into the stall, want by the renew deadline (%s)", d, cfg.RenewDeadline)
	}
	// Stalled for longer than the lease: the leader stays paused, not lost.
	time.Sleep(cfg.LeaseDuration + time.Second)
	_, err := cfg.Fence.Check()
	if err == nil || !strings.Contains(err.Error(), "paused") {
		t.Errorf("Check() while stalled = %v, want fenced as paused", err)
	}
	if v, _ := masterStatus(t, cfg.Name); v != 0 {
		t.Errorf("leader_election_master_status = %v while paused, want 0", v)
	}
	api.down.Store(false)
	eventually(t, "the fence to reopen", func() bool { _, err := cfg.Fence.Check(); return err == nil })
	if cancelledWhileLeading.Load() {
		t.Error("the run function was cancelled by a stall")
	}
	if n, _ := testutil.GetCounterMetricValue(pauses.WithLabelValues(cfg.Name)); n-pausesBefore != 1 {
		t.Errorf("pauses_total rose by %v, want 1", n-pausesBefore)
	}
	if n, _ := testutil.GetCounterMetricValue(resumes.WithLabelValues(cfg.Name)); n-resumesBefore != 1 {
		t.Errorf("resumes_total rose by %v, want 1", n-resumesBefore)
	}
	if v, _ := masterStatus(t, cfg.Name); v != 1 {
		t.Errorf("leader_election_master_status = %v after resuming, want 1", v)
	}
	sigterm()
	if err := waitFor(t, done, "Run to return"); err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
}

// A Lease read in another replica's hands after a conflicting renewal is lost: the
// fence closes before the workers learn of it, the run function drains, Run returns
// ErrLeaseLost and writes the Lease no more.
func TestATakenOverLeaseClosesTheFenceDrainsAndReturnsErrLeaseLost(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	ctx := klog.NewContext(context.Background(), logger)
	api := newFailingAPIServer()
	cfg := fencedConfig(api)
	cfg.Name = "lost-test"
	lostBefore, _ := testutil.GetCounterMetricValue(leasesLost.WithLabelValues(cfg.Name))

	started := make(chan struct{})
	var drained atomic.Bool
	fenceWhileDraining := make(chan error, 1)
	done := runInBackground(ctx, cfg, func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		// A worker finishing its sync tries to write: the fence must refuse it.
		_, err := cfg.Fence.Check()
		fenceWhileDraining <- err
		time.Sleep(300 * time.Millisecond)
		drained.Store(true)
		return nil
	})
	waitFor(t, started, "leadership")
	writeLease(t, api.client, cfg.Name, func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = ptr.To("other") })
	close(api.lost)
	if err := waitFor(t, done, "Run to return"); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Run() = %v, want ErrLeaseLost", err)
	}
	if !drained.Load() {
		t.Error("Run returned before the controllers drained")
	}
	if err := waitFor(t, fenceWhileDraining, "the drain"); err == nil || !strings.Contains(err.Error(), `taken over by "other"`) {
		t.Errorf("fence while draining = %v, want closed as taken over by other", err)
	}
	// The one write after the takeover is the renewal that found it.
	if n := api.writesAfterLoss.Load(); n > 1 {
		t.Errorf("%d Lease writes after the takeover, want at most the renewal that found it", n)
	}
	if lease, err := api.client.CoordinationV1().Leases(leaseNamespace).Get(ctx, cfg.Name, metav1.GetOptions{}); err != nil ||
		ptr.Deref(lease.Spec.HolderIdentity, "") != "other" {
		t.Errorf("lease = %v (%v), want other's record untouched", lease, err)
	}
	if v, ok := masterStatus(t, cfg.Name); !ok || v != 0 {
		t.Errorf("leader_election_master_status = %v (reported: %v) after the loss, want 0", v, ok)
	}
	if n, err := testutil.GetCounterMetricValue(leasesLost.WithLabelValues(cfg.Name)); err != nil || n-lostBefore != 1 {
		t.Errorf("mini_kcm_leader_election_leases_lost_total rose by %v (%v), want 1", n-lostBefore, err)
	}
	// The same fence opens again for the next term, at its acquisition.
	ctx2, stop := context.WithCancel(ctx)
	defer stop()
	writeLease(t, api.client, cfg.Name, func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = ptr.To("") })
	again := make(chan error, 1)
	done = runInBackground(ctx2, cfg, func(ctx context.Context) error {
		_, err := cfg.Fence.Check()
		again <- err
		<-ctx.Done()
		return nil
	})
	if err := waitFor(t, again, "the next term"); err != nil {
		t.Errorf("fence in the next term = %v, want open", err)
	}
	stop()
	if err := waitFor(t, done, "Run to return"); err != nil {
		t.Errorf("Run() = %v, want nil", err)
	}
}

func TestALostLeaseWhoseControllersAreStuckReturnsBothErrors(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	ctx := klog.NewContext(context.Background(), logger)
	api := newFailingAPIServer()
	cfg := fencedConfig(api)
	started := make(chan struct{})
	done := runInBackground(ctx, cfg, func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		return fmt.Errorf("gave up after 1s, 1 worker still running: %w", ErrControllersStillRunning)
	})
	waitFor(t, started, "leadership")
	writeLease(t, api.client, cfg.Name, func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = ptr.To("other") })
	err := waitFor(t, done, "Run to return")
	if !errors.Is(err, ErrLeaseLost) || !errors.Is(err, ErrControllersStillRunning) {
		t.Errorf("Run() = %v, want ErrLeaseLost and ErrControllersStillRunning (the caller exits)", err)
	}
}

// A renewal whose answer was lost (a timeout on a backlogged apiserver) may still be
// applied; the next renewal then conflicts, and the term must recognise its own record
// and go on leading rather than take the Lease for lost.
func TestARenewalAppliedAfterItsAnswerWasLostKeepsTheLease(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	ctx, sigterm := context.WithCancel(klog.NewContext(context.Background(), logger))
	defer sigterm()
	api := newFailingAPIServer()
	cfg := fencedConfig(api)
	var lostOnce atomic.Bool
	var renewals atomic.Int32
	api.client.PrependReactor("update", "leases", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if renewals.Add(1) != 3 {
			return false, nil, nil
		}
		// Apply the renewal behind the client's back, with a new resourceVersion,
		// and tell the client it timed out.
		lease := action.(clienttesting.UpdateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		lease.ResourceVersion = "applied-late"
		if err := api.client.Tracker().Update(leasesResource, lease, leaseNamespace); err != nil {
			t.Error(err)
		}
		lostOnce.Store(true)
		return true, nil, apierrors.NewTimeoutError("request timed out", 1)
	})
	started := make(chan struct{})
	cancelled := make(chan struct{})
	done := runInBackground(ctx, cfg, func(runCtx context.Context) error {
		close(started)
		<-runCtx.Done()
		close(cancelled)
		return nil
	})
	waitFor(t, started, "leadership")
	eventually(t, "a renewal applied with its answer lost", lostOnce.Load)
	eventually(t, "renewals after it", func() bool { return renewals.Load() > 6 })
	select {
	case <-cancelled:
		t.Fatal("the term ended after one of its own renewals was applied late")
	default:
	}
	if _, err := cfg.Fence.Check(); err != nil {
		t.Errorf("fence = %v, want open", err)
	}
	sigterm()
	if err := waitFor(t, done, "Run to return"); err != nil {
		t.Errorf("Run() = %v, want nil", err)
	}
}

// Without a fence nothing can keep the run function from writing while paused, so a
// stall ends the term at the renew deadline, as client-go's elector does; the next
// campaign finds the Lease still naming this candidate and takes it back with a write.
func TestWithoutAFenceAStallEndsTheTermAndTheNextCampaignTakesTheLeaseBack(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	ctx, sigterm := context.WithCancel(klog.NewContext(context.Background(), logger))
	defer sigterm()
	api := newFailingAPIServer()
	cfg := testConfig(api.client, "me")
	started := make(chan struct{})
	done := runInBackground(ctx, cfg, func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		return nil
	})
	waitFor(t, started, "leadership")
	api.down.Store(true)
	if err := waitFor(t, done, "Run to return"); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Run() = %v, want ErrLeaseLost", err)
	}
	api.down.Store(false)
	transitions := ptr.Deref(getLease(t, api.client).Spec.LeaseTransitions, 0)
	startedAgain := make(chan struct{})
	done = runInBackground(ctx, cfg, func(ctx context.Context) error {
		close(startedAgain)
		<-ctx.Done()
		return nil
	})
	waitFor(t, startedAgain, "leadership again")
	if got := ptr.Deref(getLease(t, api.client).Spec.LeaseTransitions, 0); got != transitions {
		t.Errorf("lease transitions %d after taking back its own lease, want %d", got, transitions)
	}
	sigterm()
	if err := waitFor(t, done, "Run to return"); err != nil {
		t.Errorf("Run() = %v, want nil", err)
	}
}

func TestSigtermWhileStandingByReturnsAtOnceWithoutRunning(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	ctx, sigterm := context.WithCancel(klog.NewContext(context.Background(), logger))
	defer sigterm()
	now := metav1.NewMicroTime(time.Now())
	held := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: leaseNamespace, Name: leaseName},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To("other"),
			LeaseDurationSeconds: ptr.To[int32](60),
			AcquireTime:          &now,
			RenewTime:            &now,
		},
	}
	client := fake.NewClientset(held)
	gets := make(chan struct{}, 100)
	client.PrependReactor("get", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
		gets <- struct{}{}
		return false, nil, nil
	})
	var ran atomic.Bool
	done := runInBackground(ctx, testConfig(client, "me"), func(context.Context) error {
		ran.Store(true)
		return nil
	})
	waitFor(t, gets, "a first acquisition attempt")
	start := time.Now()
	sigterm()
	if err := waitFor(t, done, "Run to return"); err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("a standby took %s to stop", elapsed)
	}
	if ran.Load() {
		t.Error("run was called although this candidate never led")
	}
	if holder := ptr.Deref(getLease(t, client).Spec.HolderIdentity, ""); holder != "other" {
		t.Errorf("lease holder = %q, want the other candidate's lease untouched", holder)
	}
}

func TestRunErrorReleasesTheLeaseAndIsReturned(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	ctx := klog.NewContext(context.Background(), logger)
	client := fake.NewClientset()
	buildErr := errors.New("building controller x: boom")
	err := Run(ctx, testConfig(client, "me"), func(context.Context) error { return buildErr })
	if !errors.Is(err, buildErr) {
		t.Fatalf("Run() = %v, want %v", err, buildErr)
	}
	if holder := ptr.Deref(getLease(t, client).Spec.HolderIdentity, "<nil>"); holder != "" {
		t.Errorf("lease holder = %q, want released", holder)
	}
}

func TestControllersStillRunningKeepTheLeaseUntilItExpires(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	ctx, sigterm := context.WithCancel(klog.NewContext(context.Background(), logger))
	client := fake.NewClientset()
	started := make(chan struct{})
	done := runInBackground(ctx, testConfig(client, "me"), func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		return fmt.Errorf("controller shutdown timeout reached: %w", ErrControllersStillRunning)
	})
	waitFor(t, started, "leadership")
	sigterm()
	if err := waitFor(t, done, "Run to return"); !errors.Is(err, ErrControllersStillRunning) {
		t.Fatalf("Run() = %v, want ErrControllersStillRunning", err)
	}
	if holder := ptr.Deref(getLease(t, client).Spec.HolderIdentity, ""); holder != "me" {
		t.Errorf("lease holder = %q, want still held by me", holder)
	}
}

func TestStandbyTakesOverAReleasedLeaseWithinARetryPeriod(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	base := klog.NewContext(context.Background(), logger)
	client := fake.NewClientset()

	ctxA, stopA := context.WithCancel(base)
	startedA := make(chan struct{})
	doneA := runInBackground(ctxA, testConfig(client, "a"), func(ctx context.Context) error {
		close(startedA)
		<-ctx.Done()
		return nil
	})
	waitFor(t, startedA, "a to lead")

	ctxB, stopB := context.WithCancel(base)
	defer stopB()
	startedB := make(chan time.Time, 1)
	doneB := runInBackground(ctxB, testConfig(client, "b"), func(ctx context.Context) error {
		startedB <- time.Now()
		<-ctx.Done()
		return nil
	})
	// Let b observe a's lease before a steps down.
	time.Sleep(300 * time.Millisecond)
	stopA()
	if err := waitFor(t, doneA, "a to return"); err != nil {
		t.Fatal(err)
	}
	releasedAt := time.Now()
	takeover := waitFor(t, startedB, "b to take over").Sub(releasedAt)
	// Without the release b would wait for the 2s lease duration.
	if takeover > time.Second {
		t.Errorf("b took over %s after a released the lease", takeover)
	}
	lease := getLease(t, client)
	if ptr.Deref(lease.Spec.HolderIdentity, "") != "b" || ptr.Deref(lease.Spec.LeaseTransitions, 0) != 1 {
		t.Errorf("lease holder %q transitions %d, want b and 1", ptr.Deref(lease.Spec.HolderIdentity, ""), ptr.Deref(lease.Spec.LeaseTransitions, 0))
	}
	stopB()
	if err := waitFor(t, doneB, "b to return"); err != nil {
		t.Fatal(err)
	}
}

func TestInconsistentTimingIsAnErrorNotAPanic(t *testing.T) {
	cfg := testConfig(fake.NewClientset(), "me")
	cfg.RenewDeadline = cfg.LeaseDuration
	err := Run(context.Background(), cfg, func(context.Context) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "leaseDuration must be greater than renewDeadline") {
		t.Errorf("Run() = %v, want a configuration error", err)
	}
}

func TestIdentityIsHostnameAndUniquifier(t *testing.T) {
	a, err := NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewIdentity()
	if a == b || !strings.Contains(a, "_") {
		t.Errorf("identities %q and %q, want hostname_uuid and distinct", a, b)
	}
}

// A cut-off leader acts until its last renewal's latency (the request timeout), one
// retry period and the renew deadline have passed; only a longer lease keeps a standby
// from starting before it stopped.
func TestTimingsBoundIncludesTheLastRenewalsLatency(t *testing.T) {
	tests := []struct {
		name                  string
		lease, renew, retry   time.Duration
		wantTimeout, wantStop time.Duration
		wantSafe              bool
	}{
		{"upstream defaults fit with a 1.5s request timeout", 15 * time.Second, 10 * time.Second, 2 * time.Second, 1500 * time.Millisecond, 13500 * time.Millisecond, true},
		{"a generous lease keeps half the renew deadline", 60 * time.Second, 10 * time.Second, 2 * time.Second, 5 * time.Second, 17 * time.Second, true},
		{"no slack: the one-second floor does not fit", 15 * time.Second, 10 * time.Second, 4 * time.Second, time.Second, 15 * time.Second, false},
		{"lease just above renew + retry is not safe", 15 * time.Second, 10 * time.Second, 4500 * time.Millisecond, time.Second, 15500 * time.Millisecond, false},
		{"the e2e short timings sit on the bound", 5 * time.Second, 3 * time.Second, time.Second, time.Second, 5 * time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			timings := Timings{LeaseDuration: tt.lease, RenewDeadline: tt.renew, RetryPeriod: tt.retry}
			if got := timings.RequestTimeout(); got != tt.wantTimeout {
				t.Errorf("RequestTimeout() = %v, want %v", got, tt.wantTimeout)
			}
			if got := timings.StopBound(); got != tt.wantStop {
				t.Errorf("StopBound() = %v, want %v", got, tt.wantStop)
			}
			if got := timings.Safe(); got != tt.wantSafe {
				t.Errorf("Safe() = %v, want %v", got, tt.wantSafe)
			}
		})
	}
}

// With upstream's 15s/10s/2s the Lease client's own timeout must leave the bound below
// the lease duration; a timeout of half the renew deadline (5s) did not: 5+2+10 > 15.
func TestLeaseClientTimeoutKeepsUpstreamDefaultsSafe(t *testing.T) {
	timings := Timings{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
	cfg := clientConfig(&rest.Config{Host: "https://127.0.0.1:6443"}, "mini-kcm/test (leader-election)", timings)
	if stop := cfg.Timeout + timings.RetryPeriod + timings.RenewDeadline; stop >= timings.LeaseDuration {
		t.Errorf("request timeout %v: a cut-off leader may act for %v after its last renewal, not less than the %v lease",
			cfg.Timeout, stop, timings.LeaseDuration)
	}
	if cfg.UserAgent != "mini-kcm/test (leader-election)" {
		t.Errorf("user agent %q", cfg.UserAgent)
	}
}

// A replica re-campaigning for a Lease that still names it (its renewals were lost to a
// stalled apiserver, and nobody took the Lease yet) reads itself as holder; if its write
// then fails and the campaign is stopped, Run must return: it never led in this
// campaign, so there is no run function to wait for.
func TestRunReturnsWhenTheCampaignStopsAfterAFailedWriteToALeaseNamingItself(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	defer cancel()
	now := metav1.NewMicroTime(time.Now())
	stale := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: leaseNamespace, Name: leaseName},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("me"), LeaseDurationSeconds: ptr.To[int32](2),
			AcquireTime: &now, RenewTime: &now},
	}
	client := fake.NewClientset(stale)
	var updates atomic.Int32
	client.PrependReactor("update", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
		updates.Add(1)
		return true, nil, apierrors.NewConflict(coordinationv1.Resource("leases"), leaseName, errors.New("another replica released it"))
	})
	cfg := testConfig(client, "me")
	done := runInBackground(ctx, cfg, func(context.Context) error {
		t.Error("run was called although no write naming this replica succeeded")
		return nil
	})
	deadline := time.Now().Add(10 * time.Second)
	for updates.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := waitFor(t, done, "Run to return after the campaign stopped"); err != nil {
		t.Errorf("Run() = %v, want nil", err)
	}
}

// A paused term with Resume writes again only once Resume returned: the renewal that
// ends the pause leaves the fence closed until then, and the renewals go on.
func TestAPausedTermWritesAgainOnlyOnceResumeReturned(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	ctx, sigterm := context.WithCancel(klog.NewContext(context.Background(), logger))
	defer sigterm()
	api := newFailingAPIServer()
	cfg := fencedConfig(api)
	cfg.Name = "resume-test"
	resuming := make(chan time.Duration, 2)
	fresh := make(chan struct{})
	cfg.Resume = func(ctx context.Context, pausedFor time.Duration) error {
		resuming <- pausedFor
		select {
		case <-fresh:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	started := make(chan struct{})
	done := runInBackground(ctx, cfg, func(runCtx context.Context) error {
		close(started)
		<-runCtx.Done()
		return nil
	})
	waitFor(t, started, "leadership")
	open := func() bool { _, err := cfg.Fence.Check(); return err == nil }

	api.down.Store(true)
	eventually(t, "the fence to close", func() bool { return !open() })
	time.Sleep(cfg.LeaseDuration)
	api.down.Store(false)
	pausedFor := waitFor(t, resuming, "Resume to be called")
	if pausedFor < cfg.LeaseDuration {
		t.Errorf("Resume was told of a pause of %s, want at least %s", pausedFor, cfg.LeaseDuration)
	}
	updates := func() string {
		lease, err := api.client.CoordinationV1().Leases(leaseNamespace).Get(context.Background(), cfg.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return lease.ResourceVersion
	}
	before := updates()
	time.Sleep(3 * cfg.RetryPeriod)
	if updates() == before {
		t.Error("no renewal while Resume ran")
	}
	_, err := cfg.Fence.Check()
	if err == nil || !strings.Contains(err.Error(), "caches are shown fresh") {
		t.Fatalf("Check() while Resume runs = %v, want fenced until the caches are shown fresh", err)
	}
	close(fresh)
	eventually(t, "the fence to reopen once Resume returned", open)
	sigterm()
	if err := waitFor(t, done, "Run to return"); err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
}
