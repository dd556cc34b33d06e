package leaderelection

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// heldLease is a Lease held by holder for seconds, renewed at renewed.
func heldLease(holder string, seconds int32, renewed time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: leaseNamespace, Name: leaseName},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(holder),
			LeaseDurationSeconds: ptr.To(seconds),
			AcquireTime:          &metav1.MicroTime{Time: renewed},
			RenewTime:            &metav1.MicroTime{Time: renewed},
		},
	}
}

// standbyFixture is a standby "b" on a fake clock, watching a Lease that "a" holds
// for 10s, and the Lease writes it attempts.
type standbyFixture struct {
	t      *testing.T
	client *fake.Clientset
	clock  *clocktesting.FakeClock
	s      *standby
	// acquired yields the clock's time when acquire returned true.
	acquired chan time.Time

	mu      sync.Mutex
	updates []string
}

func newStandbyFixture(t *testing.T, watch bool) *standbyFixture {
	return newStandbyFixtureWith(t, watch, func(*fake.Clientset) {})
}

// newStandbyFixtureWith is newStandbyFixture with the fake clientset's reactors set by
// react before the standby starts.
func newStandbyFixtureWith(t *testing.T, watch bool, react func(*fake.Clientset)) *standbyFixture {
	logger, _ := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	f := &standbyFixture{
		t:        t,
		client:   fake.NewClientset(heldLease("a", 10, time.Now())),
		clock:    clocktesting.NewFakeClock(time.Now()),
		acquired: make(chan time.Time, 1),
	}
	f.client.PrependReactor("update", "leases", func(action clienttesting.Action) (bool, runtime.Object, error) {
		lease := action.(clienttesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.updates = append(f.updates, ptr.Deref(lease.Spec.HolderIdentity, ""))
		return false, nil, nil
	})
	react(f.client)
	cfg := testConfig(f.client, "b")
	cfg.LeaseDuration = 10 * time.Second
	cfg.RetryPeriod = time.Second
	if watch {
		cfg.LeaseWatch = fakeLeaseWatch{f.client.CoordinationV1()}
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: leaseNamespace, Name: leaseName},
		Client:     f.client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: "b"},
	}
	f.s = newStandby(cfg, lock, f.clock)
	var running sync.WaitGroup
	running.Go(func() {
		if _, _, ok := f.s.acquire(ctx); ok {
			f.acquired <- f.clock.Now()
		}
	})
	t.Cleanup(func() {
		cancel()
		running.Wait()
	})
	return f
}

// fakeLeaseWatch is the fake clientset's Lease client, which cannot stream an initial
// list in a watch, and says so as the fake clientset does.
type fakeLeaseWatch struct {
	coordinationv1client.LeasesGetter
}

func (fakeLeaseWatch) IsWatchListSemanticsUnSupported() bool { return true }

// updatesSoFar returns the holders of the Lease updates attempted so far.
func (f *standbyFixture) updatesSoFar() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.updates...)
}

// waitUntilWaiting waits until the standby has seen a record first seen at or after
// since and sleeps on the fake clock.
func (f *standbyFixture) waitUntilWaiting(since time.Time) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		f.s.mu.Lock()
		seen := f.s.raw != nil && !f.s.seenAt.Before(since)
		f.s.mu.Unlock()
		if seen && f.clock.HasWaiters() {
			return
		}
		time.Sleep(time.Millisecond)
	}
	f.t.Fatalf("the standby did not wait on a record seen since %s", since)
}

// advance steps the fake clock n retry periods (1s), letting the standby read the
// Lease after each, as it does every retry period: after each step it waits until the
// standby sleeps on the clock again (or acquired).
func (f *standbyFixture) advance(n int) {
	f.t.Helper()
	for range n {
		f.clock.Step(time.Second)
		deadline := time.Now().Add(10 * time.Second)
		for !f.clock.HasWaiters() && len(f.acquired) == 0 {
			if time.Now().After(deadline) {
				f.t.Fatal("the standby did not wait on its clock again")
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// renew writes a renewal of a's Lease, as a's elector does.
func (f *standbyFixture) renew() {
	f.t.Helper()
	lease, err := f.client.CoordinationV1().Leases(leaseNamespace).Get(context.Background(), leaseName, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	lease.Spec.RenewTime = &metav1.MicroTime{Time: lease.Spec.RenewTime.Add(time.Second)}
	if _, err := f.client.CoordinationV1().Leases(leaseNamespace).Update(context.Background(), lease, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// expectNoAcquisition checks, after a moment of real time, that b neither wrote nor
// acquired.
func (f *standbyFixture) expectNoAcquisition(when string) {
	f.t.Helper()
	time.Sleep(100 * time.Millisecond)
	select {
	case <-f.acquired:
		f.t.Fatalf("b acquired the lease %s", when)
	default:
	}
	for _, holder := range f.updatesSoFar() {
		if holder == "b" {
			f.t.Fatalf("b tried to take the lease %s", when)
		}
	}
}

func TestStandbyTakesTheLeaseAtExpiryByItsOwnClockAndNeverBefore(t *testing.T) {
	for _, tc := range []struct {
		name  string
		watch bool
	}{{"watching the lease", true}, {"reading it every retry period", false}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newStandbyFixture(t, tc.watch)
			start := f.clock.Now()
			f.waitUntilWaiting(start)
			f.advance(9)
			f.clock.Step(999 * time.Millisecond)
			f.expectNoAcquisition("before it expired by b's clock")
			f.clock.Step(time.Millisecond)
			at := waitFor(t, f.acquired, "b to take the lease at expiry")
			if got := at.Sub(start); got != 10*time.Second {
				t.Errorf("b took the lease %s after it first saw the record, want exactly the 10s lease", got)
			}
			lease := getLease(t, f.client)
			if ptr.Deref(lease.Spec.HolderIdentity, "") != "b" || ptr.Deref(lease.Spec.LeaseTransitions, 0) != 1 {
				t.Errorf("lease holder %q transitions %d, want b and 1",
					ptr.Deref(lease.Spec.HolderIdentity, ""), ptr.Deref(lease.Spec.LeaseTransitions, 0))
			}
		})
	}
}

func TestStandbyWaitsAFullLeaseFromEachRenewalItSees(t *testing.T) {
	f := newStandbyFixture(t, true)
	f.waitUntilWaiting(f.clock.Now())
	f.advance(6)
	renewedAt := f.clock.Now()
	f.renew()
	f.waitUntilWaiting(renewedAt)
	f.advance(4)
	f.expectNoAcquisition("10s after the first record, 4s after a renewal it saw")
	f.advance(6)
	if at := waitFor(t, f.acquired, "b to take the lease"); at.Sub(renewedAt) != 10*time.Second {
		t.Errorf("b took the lease %s after the renewal it saw, want 10s", at.Sub(renewedAt))
	}
}

// A standby whose reads go unanswered (the apiserver stalled for everyone, so the
// holder could not renew either) does not count the stall: it takes the Lease only
// once it saw it unchanged for a whole lease duration while in contact.
func TestStandbyCountsOnlyTimeInContactWithTheAPIServer(t *testing.T) {
	var stalled atomic.Bool
	f := newStandbyFixtureWith(t, true, func(c *fake.Clientset) {
		c.PrependReactor("get", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
			if stalled.Load() {
				return true, nil, apierrors.NewTimeoutError("request timed out", 1)
			}
			return false, nil, nil
		})
	})
	start := f.clock.Now()
	f.waitUntilWaiting(start)
	f.advance(4)
	stalled.Store(true)
	f.advance(30)
	stalled.Store(false)
	f.advance(5)
	f.expectNoAcquisition("39s after the record, of which 4s before a 30s stall and 5s after it")
	f.advance(1)
	f.expectNoAcquisition("6s after the stall")
	f.advance(1)
	at := waitFor(t, f.acquired, "b to take the lease")
	// 4s in contact before the stall; the first read after it, at 35s, restarts the
	// count; 6s more in contact make the 10s lease.
	if got := at.Sub(start); got != 41*time.Second {
		t.Errorf("b took the lease %s after first seeing it, want 41s: 4s before a 30s stall, and 6s after the first read answered after it", got)
	}
}

func TestStandbyReadsAgainAfterAConflictAndWaitsForTheRenewalItLostTo(t *testing.T) {
	f := newStandbyFixture(t, false)
	// The first takeover attempt loses to a renewal written after b's read.
	var once sync.Once
	f.client.PrependReactor("update", "leases", func(action clienttesting.Action) (bool, runtime.Object, error) {
		lease := action.(clienttesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		if ptr.Deref(lease.Spec.HolderIdentity, "") != "b" {
			return false, nil, nil
		}
		conflict := false
		once.Do(func() { conflict = true })
		if !conflict {
			return false, nil, nil
		}
		renewal := heldLease("a", 10, time.Now().Add(time.Hour))
		if err := f.client.Tracker().Update(schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"},
			renewal, leaseNamespace); err != nil {
			t.Error(err)
		}
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, leaseName, nil)
	})
	f.waitUntilWaiting(f.clock.Now())
	f.advance(10)
	// The attempt at 10s conflicted; b read the renewal and waits for it to expire.
	lostAt := f.clock.Now()
	f.waitUntilWaiting(lostAt)
	f.expectNoAcquisition("right after losing to a renewal")
	f.advance(10)
	if at := waitFor(t, f.acquired, "b to take the lease"); at.Sub(lostAt) != 10*time.Second {
		t.Errorf("b took the lease %s after the renewal it lost to, want 10s", at.Sub(lostAt))
	}
}

func TestStandbyTakesAReleasedLeaseAtOnce(t *testing.T) {
	f := newStandbyFixture(t, true)
	f.waitUntilWaiting(f.clock.Now())
	lease := getLease(t, f.client)
	lease.Spec.HolderIdentity = ptr.To("")
	lease.Spec.LeaseDurationSeconds = ptr.To[int32](1)
	if _, err := f.client.CoordinationV1().Leases(leaseNamespace).Update(context.Background(), lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if at := waitFor(t, f.acquired, "b to take the released lease"); !at.Equal(f.clock.Now()) {
		t.Errorf("b took the released lease after %s of its clock, want at once", at.Sub(f.clock.Now()))
	}
}

// TestStandbyWhoseWatchIsForbiddenReadsEveryRetryPeriod: a watch that cannot run (no
// list/watch grant on the Lease, the apiserver refusing it) must cost promptness only,
// not a lease duration: the standby then reads the Lease every retry period, so a
// renewal is seen within one and the Lease is taken a lease duration after it.
func TestStandbyWhoseWatchIsForbiddenReadsEveryRetryPeriod(t *testing.T) {
	forbidden := func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, leaseName, nil)
	}
	f := newStandbyFixtureWith(t, true, func(c *fake.Clientset) {
		c.PrependReactor("list", "leases", forbidden)
		c.PrependWatchReactor("leases", func(a clienttesting.Action) (bool, watch.Interface, error) {
			_, _, err := forbidden(a)
			return true, nil, err
		})
	})
	f.waitUntilWaiting(f.clock.Now())
	f.advance(6)
	renewedAt := f.clock.Now()
	f.renew()
	// The next read, a retry period later at most, sees the renewal.
	f.advance(2)
	f.waitUntilWaiting(renewedAt)
	for range 12 {
		f.advance(1)
		select {
		case at := <-f.acquired:
			if got := at.Sub(renewedAt); got > 11*time.Second || got < 10*time.Second {
				t.Errorf("b took the lease %s after the renewal, want within a lease duration plus one retry period", got)
			}
			return
		default:
		}
	}
	t.Fatal("b did not take the lease within a lease duration plus two retry periods of the renewal")
}

// TestStandbyWhoseAttemptReadsSlowlyDoesNotTakeALiveLease: the attempt reads the Lease
// before it writes; when that read takes longer than a retry period, the count does not
// move, and "read again now" is not "free now". The election simulator found a standby
// taking a Lease renewed a moment before this way, at the shipped timings (a 1s read
// against a 0.5s retry period).
func TestStandbyWhoseAttemptReadsSlowlyDoesNotTakeALiveLease(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	ctx := klog.NewContext(context.Background(), logger)
	client := fake.NewClientset(heldLease("a", 10, time.Now()))
	clk := clocktesting.NewFakeClock(time.Now())
	var slow atomic.Bool
	client.PrependReactor("get", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
		if slow.Load() {
			// Answered 4s after it was sent: four retry periods, longer than a gap
			// that counts as contact.
			clk.Step(4 * time.Second)
		}
		return false, nil, nil
	})
	updates := &leaseUpdates{}
	client.PrependReactor("update", "leases", updates.record)
	cfg := testConfig(client, "b")
	cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod = 10*time.Second, 5*time.Second, time.Second
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: leaseNamespace, Name: leaseName},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: "b"},
	}
	s := newStandby(cfg, lock, clk)
	// The standby has just read a's record, renewed a moment ago.
	s.read(ctx)
	slow.Store(true)
	if _, _, ok, _ := s.try(ctx); ok {
		t.Fatal("the attempt took a's Lease, renewed moments before, after one slow read")
	}
	if n := updates.count(); n != 0 {
		t.Errorf("the attempt wrote the Lease %d times; want no write", n)
	}
}
