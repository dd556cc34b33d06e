package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

const testLease = "kube-system/test-lease"

// fakeLock is a resourcelock.Interface whose writes run a hook, for the fence's tests.
type fakeLock struct {
	resourcelock.Interface // nil: only what fencedLock calls is implemented
	identity               string
	// current is what Get returns.
	current resourcelock.LeaderElectionRecord
	// onWrite runs in the middle of every Create or Update; its error fails the write.
	onWrite func(resourcelock.LeaderElectionRecord) error
}

func (l *fakeLock) Identity() string { return l.identity }
func (l *fakeLock) Describe() string { return testLease }
func (l *fakeLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	r := l.current
	return &r, nil, nil
}
func (l *fakeLock) Create(_ context.Context, r resourcelock.LeaderElectionRecord) error {
	return l.write(r)
}
func (l *fakeLock) Update(_ context.Context, r resourcelock.LeaderElectionRecord) error {
	return l.write(r)
}
func (l *fakeLock) write(r resourcelock.LeaderElectionRecord) error {
	if l.onWrite != nil {
		if err := l.onWrite(r); err != nil {
			return err
		}
	}
	l.current = r
	return nil
}

// newTestFence returns a fence for a 15s lease on a fake clock, and its lock.
func newTestFence() (*Fence, *clocktesting.FakeClock, *fakeLock, *fencedLock) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fence := NewFence(testLease, 15*time.Second, clk)
	inner := &fakeLock{identity: "me"}
	return fence, clk, inner, &fencedLock{Interface: inner, fence: fence}
}

func renew(t *testing.T, lock resourcelock.Interface) error {
	t.Helper()
	return lock.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me", LeaseDurationSeconds: 15})
}

func TestFenceIsClosedUntilTheFirstAcquisition(t *testing.T) {
	fence, _, _, _ := newTestFence()
	_, err := fence.Check()
	var fenced *FencedError
	if !errors.As(err, &fenced) || !strings.Contains(err.Error(), "has not acquired it") || !strings.Contains(err.Error(), testLease) {
		t.Fatalf("Check() before any acquisition = %v, want a FencedError naming the lease", err)
	}
}

func TestRenewalExtendsTheFenceFromWhenItWasSentNotWhenItCompleted(t *testing.T) {
	fence, clk, inner, lock := newTestFence()
	sent := clk.Now()
	// The renewal takes 3s to be answered.
	inner.onWrite = func(resourcelock.LeaderElectionRecord) error {
		clk.Step(3 * time.Second)
		return nil
	}
	if err := renew(t, lock); err != nil {
		t.Fatal(err)
	}
	wantUntil := sent.Add(15*time.Second - Margin(15*time.Second))
	until, err := fence.Check()
	if err != nil {
		t.Fatalf("Check() right after the renewal: %v", err)
	}
	if !until.Equal(wantUntil) {
		t.Errorf("fence open until %v, want the send time + lease - margin = %v", until, wantUntil)
	}
	clk.SetTime(wantUntil.Add(-time.Millisecond))
	if _, err := fence.Check(); err != nil {
		t.Errorf("Check() 1ms before the fence closes: %v", err)
	}
	clk.SetTime(wantUntil)
	if _, err := fence.Check(); err == nil {
		t.Error("Check() at send time + lease - margin succeeded, want fenced (the answer arrived 3s later and must not count)")
	}
	clk.Step(2 * time.Second)
	_, err = fence.Check()
	if err == nil || !strings.Contains(err.Error(), "since 2s ago") {
		t.Errorf("Check() 2s after expiry = %v, want it to say how long ago the fence closed", err)
	}
}

func TestFailedOrForeignWritesDoNotExtendTheFence(t *testing.T) {
	fence, clk, inner, lock := newTestFence()
	if err := renew(t, lock); err != nil {
		t.Fatal(err)
	}
	first, _ := fence.Check()

	clk.Step(5 * time.Second)
	inner.onWrite = func(resourcelock.LeaderElectionRecord) error { return errors.New("conflict") }
	if err := renew(t, lock); err == nil {
		t.Fatal("want the failed renewal's error")
	}
	if until, _ := fence.Check(); !until.Equal(first) {
		t.Errorf("a failed renewal moved the fence from %v to %v", first, until)
	}

	inner.onWrite = nil
	if err := lock.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "other"}); err != nil {
		t.Fatal(err)
	}
	if _, err := fence.Check(); err == nil {
		t.Error("the fence is open after a write naming another holder")
	}
	// Closed for good: a later successful renewal does not reopen it.
	if err := renew(t, lock); err != nil {
		t.Fatal(err)
	}
	if _, err := fence.Check(); err == nil {
		t.Error("a renewal reopened a closed fence")
	}
}

func TestReleaseClosesTheFenceBeforeTheReleaseIsWritten(t *testing.T) {
	fence, _, inner, lock := newTestFence()
	if err := renew(t, lock); err != nil {
		t.Fatal(err)
	}
	var openDuringRelease error
	inner.onWrite = func(r resourcelock.LeaderElectionRecord) error {
		_, err := fence.Check()
		if err == nil {
			openDuringRelease = errors.New("fence open while the release was sent")
		}
		return nil
	}
	if err := lock.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "", LeaseDurationSeconds: 1}); err != nil {
		t.Fatal(err)
	}
	if openDuringRelease != nil {
		t.Error(openDuringRelease)
	}
	if _, err := fence.Check(); err == nil || !strings.Contains(err.Error(), "released") {
		t.Errorf("Check() after the release = %v, want fenced because released", err)
	}
}

func TestReadingAnotherHolderClosesTheFenceAtOnce(t *testing.T) {
	fence, _, inner, lock := newTestFence()
	// A standby reading the holder's record is no takeover.
	inner.current = resourcelock.LeaderElectionRecord{HolderIdentity: "other"}
	if _, _, err := lock.Get(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := renew(t, lock); err != nil {
		t.Fatal(err)
	}
	if _, err := fence.Check(); err != nil {
		t.Fatalf("Check() after the acquisition = %v, want open", err)
	}
	inner.current = resourcelock.LeaderElectionRecord{HolderIdentity: "other"}
	if _, _, err := lock.Get(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := fence.Check(); err == nil || !strings.Contains(err.Error(), `taken over by "other"`) {
		t.Errorf("Check() = %v, want fenced, taken over by other", err)
	}
}

// A leader that has not renewed for the renew deadline pauses: the fence closes then,
// before lease - margin, and its next successful renewal reopens it.
func TestTheFenceClosesAtTheRenewDeadlineAndARenewalReopensIt(t *testing.T) {
	fence, clk, _, lock := newTestFence()
	fence.bound(10 * time.Second)
	if err := renew(t, lock); err != nil {
		t.Fatal(err)
	}
	clk.Step(10*time.Second - time.Millisecond)
	if _, err := fence.Check(); err != nil {
		t.Fatalf("Check() 1ms before the renew deadline = %v, want open", err)
	}
	clk.Step(time.Millisecond)
	if _, err := fence.Check(); err == nil || !strings.Contains(err.Error(), "paused") {
		t.Fatalf("Check() at the renew deadline = %v, want fenced as paused", err)
	}
	clk.Step(20 * time.Second)
	if err := renew(t, lock); err != nil {
		t.Fatal(err)
	}
	if _, err := fence.Check(); err != nil {
		t.Errorf("Check() after a renewal ended the pause = %v, want open", err)
	}
}

// A closed fence stays closed for the rest of its term, and opens again only at the
// first acquisition of the next one.
func TestANewTermOpensTheFenceOnlyAtItsAcquisition(t *testing.T) {
	fence, _, _, lock := newTestFence()
	if err := renew(t, lock); err != nil {
		t.Fatal(err)
	}
	fence.Close("lost: taken over")
	if err := renew(t, lock); err != nil {
		t.Fatal(err)
	}
	if _, err := fence.Check(); err == nil {
		t.Fatal("a write reopened a fence closed for its term")
	}
	fence.newTerm()
	if _, err := fence.Check(); err == nil || !strings.Contains(err.Error(), "has not acquired it") {
		t.Fatalf("Check() in a new term before its acquisition = %v, want fenced, not acquired", err)
	}
	if err := renew(t, lock); err != nil {
		t.Fatal(err)
	}
	if _, err := fence.Check(); err != nil {
		t.Errorf("Check() after the new term's acquisition = %v, want open", err)
	}
}

func TestMarginLeavesTheFenceOpenBetweenRenewals(t *testing.T) {
	// A healthy leader renews every retry period, each renewal taking up to the Lease
	// request timeout; the fence must stay open that long after a renewal was sent
	// with upstream's timings, the e2e tests' and short ones.
	for _, timings := range []Timings{
		{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second},
		{LeaseDuration: 6 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: time.Second},
		{LeaseDuration: 5 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: time.Second},
		{LeaseDuration: 3 * time.Second, RenewDeadline: time.Second, RetryPeriod: 500 * time.Millisecond},
		{LeaseDuration: 2 * time.Second, RenewDeadline: 500 * time.Millisecond, RetryPeriod: 400 * time.Millisecond},
	} {
		margin := Margin(timings.LeaseDuration)
		if open, needed := timings.LeaseDuration-margin, timings.RetryPeriod+timings.RequestTimeout(); open <= needed {
			t.Errorf("%+v: margin %v leaves the fence open %v after a renewal, want more than retry + request timeout = %v",
				timings, margin, open, needed)
		}
	}
	// The fence also closes at the renew deadline after a renewal: at the shipped
	// defaults and upstream's, that too leaves it open between renewals.
	for _, timings := range []Timings{
		{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second},
		{LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond},
	} {
		if needed := timings.RetryPeriod + timings.RequestTimeout(); timings.RenewDeadline <= needed {
			t.Errorf("%+v: the renew deadline closes the fence before retry + request timeout = %v", timings, needed)
		}
	}
	if got := Margin(15 * time.Second); got != 1150*time.Millisecond {
		t.Errorf("Margin(15s) = %v, want 1.15s", got)
	}
}

// refusedCount reads the fence's refusal counter of controller from /metrics.
func refusedCount(t *testing.T, controller string) int {
	t.Helper()
	rec := httptest.NewRecorder()
	legacyregistry.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	prefix := `mini_kcm_leader_election_fence_refused_requests_total{controller="` + controller + `"} `
	for line := range strings.Lines(rec.Body.String()) {
		if value, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			n, err := strconv.Atoi(value)
			if err != nil {
				t.Fatalf("metric line %q: %v", line, err)
			}
			return n
		}
	}
	return 0
}

// closeRecorder is a request body that records whether it was closed.
type closeRecorder struct {
	io.Reader
	closed bool
}

func (b *closeRecorder) Close() error {
	b.closed = true
	return nil
}

// roundTripperFunc lets a function be a transport.
type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestTransportRefusesWritesOnlyWhileFenced(t *testing.T) {
	fence, clk, _, lock := newTestFence()
	var sent []string
	var deadlines []time.Duration
	rt := fence.Transport("test-controller")(roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		sent = append(sent, r.Method+" "+r.URL.Path)
		if d, ok := r.Context().Deadline(); ok {
			deadlines = append(deadlines, time.Until(d))
		}
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("{}"))}, nil
	}))
	do := func(method, path string) error {
		body := &closeRecorder{Reader: strings.NewReader("{}")}
		req, err := http.NewRequest(method, "https://apiserver:6443"+path, body)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rt.RoundTrip(req)
		if err != nil && !body.closed {
			t.Errorf("%s %s failed without closing the request body", method, path)
		}
		if err == nil {
			_, _ = io.ReadAll(resp.Body)
			_ = resp.Body.Close()
		}
		return err
	}
	refusedBefore := refusedCount(t, "test-controller")

	// Fenced: reads, events and reviews pass; every mutating verb is refused.
	passes := []struct{ method, path string }{
		{http.MethodGet, "/api/v1/namespaces/ns/pods"},
		{http.MethodGet, "/apis/apps/v1/namespaces/ns/replicasets?watch=true"},
		{http.MethodHead, "/api/v1/namespaces/ns/pods/p"},
		{http.MethodPost, "/api/v1/namespaces/ns/events"},
		{http.MethodPatch, "/api/v1/namespaces/ns/events/e"},
		{http.MethodPost, "/apis/events.k8s.io/v1/namespaces/ns/events"},
		{http.MethodPost, "/apis/authorization.k8s.io/v1/subjectaccessreviews"},
		{http.MethodPost, "/apis/authentication.k8s.io/v1/tokenreviews"},
		{http.MethodPost, "/api/v1/namespaces/kube-system/serviceaccounts/replicaset-controller/token"},
	}
	for _, p := range passes {
		if err := do(p.method, p.path); err != nil {
			t.Errorf("%s %s while fenced: %v, want it to pass", p.method, p.path, err)
		}
	}
	refused := []struct{ method, path string }{
		{http.MethodPost, "/api/v1/namespaces/ns/pods"},
		{http.MethodPut, "/apis/apps/v1/namespaces/ns/replicasets/rs/status"},
		{http.MethodPatch, "/api/v1/namespaces/ns/pods/p"},
		{http.MethodDelete, "/api/v1/namespaces/ns/pods/p"},
		{http.MethodPut, "/api/v1/namespaces/events"}, // the namespace named events
		{http.MethodPost, "/api/v1/namespaces/ns/pods/p/eviction"},
		{http.MethodPost, "/api/v1/namespaces/ns/serviceaccounts"},
		{http.MethodDelete, "/api/v1/namespaces/ns/serviceaccounts/token"},
	}
	for _, p := range refused {
		err := do(p.method, p.path)
		var fenced *FencedError
		if !errors.As(err, &fenced) || !strings.Contains(err.Error(), testLease) {
			t.Errorf("%s %s while fenced: %v, want a FencedError naming the lease", p.method, p.path, err)
		}
	}
	if len(sent) != len(passes) {
		t.Errorf("sent %v while fenced, want only the %d requests that pass", sent, len(passes))
	}
	if got := refusedCount(t, "test-controller") - refusedBefore; got != len(refused) {
		t.Errorf("refusals counted = %v, want %d", got, len(refused))
	}

	// Open: a write goes out with its context ending no later than the fence.
	if err := renew(t, lock); err != nil {
		t.Fatal(err)
	}
	clk.Step(10 * time.Second)
	sent, deadlines = nil, nil
	if err := do(http.MethodPost, "/api/v1/namespaces/ns/pods"); err != nil {
		t.Fatalf("a write while holding the Lease: %v", err)
	}
	left := 15*time.Second - Margin(15*time.Second) - 10*time.Second
	if len(sent) != 1 || len(deadlines) != 1 || deadlines[0] > left || deadlines[0] <= 0 {
		t.Errorf("sent %v with context deadlines in %v, want one request whose context ends within %v", sent, deadlines, left)
	}
}

func TestFencedLeaderElection(t *testing.T) {
	t.Run("the fence is open while leading and closes before the release is written", func(t *testing.T) {
		logger, _ := ktesting.NewTestContext(t)
		ctx, sigterm := context.WithCancel(klog.NewContext(context.Background(), logger))
		defer sigterm()
		client := fake.NewClientset()
		cfg := testConfig(client, "me")
		cfg.Fence = NewFence(leaseNamespace+"/"+leaseName, cfg.LeaseDuration, nil)
		var releasedWhileOpen atomic.Bool
		client.PrependReactor("update", "leases", func(action clienttesting.Action) (bool, runtime.Object, error) {
			lease := action.(clienttesting.UpdateAction).GetObject().(*coordinationv1.Lease)
			if ptr.Deref(lease.Spec.HolderIdentity, "") == "" {
				if _, err := cfg.Fence.Check(); err == nil {
					releasedWhileOpen.Store(true)
				}
			}
			return false, nil, nil
		})
		openWhileLeading := make(chan error, 1)
		done := runInBackground(ctx, cfg, func(ctx context.Context) error {
			_, err := cfg.Fence.Check()
			openWhileLeading <- err
			<-ctx.Done()
			return nil
		})
		if err := waitFor(t, openWhileLeading, "leadership"); err != nil {
			t.Errorf("fence while leading: %v", err)
		}
		sigterm()
		if err := waitFor(t, done, "Run to return"); err != nil {
			t.Fatal(err)
		}
		if ptr.Deref(getLease(t, client).Spec.HolderIdentity, "<nil>") != "" {
			t.Fatal("the lease was not released")
		}
		if releasedWhileOpen.Load() {
			t.Error("the release was written while the fence was open")
		}
	})

}

// writeEnd is how a write through the fenced transport ends, for the settle tests.
type writeEnd int

const (
	// answered: the apiserver answered, so it applied the write or never will.
	answered writeEnd = iota
	// failed: the round trip ended without an answer (a reset connection); the
	// apiserver may still apply the write.
	failed
	// inFlight: no answer yet when the release is due.
	inFlight
)

// TestSettleWaitsUntilNoWriteWithoutAnswerMayStillBeApplied checks Fence.settle, which
// Run calls before it releases the Lease: it waits until every write the fence let
// through was answered or was sent longer ago than the write allowance (1s at the
// shipped 4s leases), and no longer than that.
func TestSettleWaitsUntilNoWriteWithoutAnswerMayStillBeApplied(t *testing.T) {
	type write struct {
		at  time.Duration
		end writeEnd
	}
	for _, tc := range []struct {
		name   string
		writes []write
		// settleAt is when settle is called; cancelAfter, when set, cancels its
		// context that long after.
		settleAt, cancelAfter time.Duration
		want                  time.Duration
	}{
		{name: "no write", settleAt: 300 * time.Millisecond},
		{name: "every write answered", writes: []write{{0, answered}, {200 * time.Millisecond, answered}},
			settleAt: 300 * time.Millisecond},
		{name: "a write that failed without an answer, until its send time + the allowance",
			writes: []write{{0, failed}}, settleAt: 300 * time.Millisecond, want: 700 * time.Millisecond},
		{name: "a write still in flight, until its send time + the allowance",
			writes: []write{{0, inFlight}}, settleAt: 300 * time.Millisecond, want: 700 * time.Millisecond},
		{name: "the latest write without an answer counts, and a later answered one does not end the wait",
			writes:   []write{{0, failed}, {200 * time.Millisecond, inFlight}, {400 * time.Millisecond, answered}},
			settleAt: 500 * time.Millisecond, want: 700 * time.Millisecond},
		{name: "a failed write sent longer ago than the allowance",
			writes: []write{{0, failed}}, settleAt: 1200 * time.Millisecond},
		{name: "a write in flight sent longer ago than the allowance",
			writes: []write{{0, inFlight}}, settleAt: 1500 * time.Millisecond},
		{name: "a cancelled context ends the wait",
			writes: []write{{0, inFlight}}, settleAt: 300 * time.Millisecond, cancelAfter: 200 * time.Millisecond,
			want: 200 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// In the bubble the real clock, the fence's and settle's timer, is fake.
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				fence := NewFence(testLease, 4*time.Second, nil)
				if err := renew(t, &fencedLock{Interface: &fakeLock{identity: "me"}, fence: fence}); err != nil {
					t.Fatal(err)
				}
				release := make(chan struct{})
				var pending sync.WaitGroup
				defer pending.Wait()
				defer close(release)
				for _, w := range tc.writes {
					time.Sleep(time.Until(start.Add(w.at)))
					rt := fence.Transport("test-controller")(roundTripperFunc(func(r *http.Request) (*http.Response, error) {
						switch w.end {
						case failed:
							return nil, errors.New("connection reset by peer")
						case inFlight:
							select {
							case <-release:
							case <-r.Context().Done():
								return nil, r.Context().Err()
							}
						}
						return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("{}"))}, nil
					}))
					req, err := http.NewRequest(http.MethodPut, "https://apiserver:6443/api/v1/namespaces/default/configmaps/c", nil)
					if err != nil {
						t.Fatal(err)
					}
					pending.Go(func() {
						if resp, err := rt.RoundTrip(req); err == nil {
							_ = resp.Body.Close()
						}
					})
					synctest.Wait()
				}
				time.Sleep(time.Until(start.Add(tc.settleAt)))
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if tc.cancelAfter > 0 {
					stop := time.AfterFunc(tc.cancelAfter, cancel)
					defer stop.Stop()
				}
				called := time.Now()
				waited := fence.settle(ctx)
				if elapsed := time.Since(called); elapsed != tc.want {
					t.Errorf("settle returned after %s, want %s", elapsed, tc.want)
				}
				// settle reports the wait it planned, which a cancelled context cuts short.
				if tc.cancelAfter == 0 && waited != tc.want {
					t.Errorf("settle() = %s, want %s", waited, tc.want)
				}
			})
		})
	}
}

// WhenOpen is closed at once while the fence is open, and otherwise when a renewal or
// the end of a hold reopens it: what a controller's queue waits on for its fenced keys.
func TestWhenOpenIsClosedWhenARenewalOrTheEndOfAHoldReopensTheFence(t *testing.T) {
	fence, clk, _, lock := newTestFence()
	fence.bound(10 * time.Second)
	isClosed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	beforeAcquisition := fence.WhenOpen()
	if isClosed(beforeAcquisition) {
		t.Fatal("WhenOpen() was closed before the first acquisition")
	}
	if err := renew(t, lock); err != nil {
		t.Fatal(err)
	}
	if !isClosed(beforeAcquisition) || !isClosed(fence.WhenOpen()) {
		t.Fatal("WhenOpen() was not closed once the acquisition opened the fence")
	}
	clk.Step(10 * time.Second) // paused
	paused := fence.WhenOpen()
	if isClosed(paused) {
		t.Fatal("WhenOpen() was closed while the fence was paused")
	}
	fence.hold("resuming")
	if err := renew(t, lock); err != nil {
		t.Fatal(err)
	}
	if isClosed(paused) {
		t.Fatal("a renewal reopened a held fence")
	}
	if _, err := fence.Check(); err == nil || !strings.Contains(err.Error(), "resuming") {
		t.Fatalf("Check() of a held fence = %v, want fenced with the hold's reason", err)
	}
	fence.unhold()
	if !isClosed(paused) {
		t.Fatal("WhenOpen() was not closed when the hold ended")
	}
	if !fence.Refused(fmt.Errorf("creating pods: %w", &FencedError{Lease: testLease, Reason: "paused"})) {
		t.Error("Refused() did not recognise a wrapped FencedError")
	}
}
