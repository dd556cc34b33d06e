package leaderelection

import (
	"context"
	"sync"
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
		if f.s.acquire(ctx) {
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
			for range 9 {
				f.clock.Step(time.Second)
				if !tc.watch {
					// A read every retry period: let it happen before the next step.
					time.Sleep(10 * time.Millisecond)
				}
			}
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
	f.clock.Step(6 * time.Second)
	renewedAt := f.clock.Now()
	f.renew()
	f.waitUntilWaiting(renewedAt)
	f.clock.Step(4 * time.Second)
	f.expectNoAcquisition("10s after the first record, 4s after a renewal it saw")
	f.clock.Step(6 * time.Second)
	if at := waitFor(t, f.acquired, "b to take the lease"); at.Sub(renewedAt) != 10*time.Second {
		t.Errorf("b took the lease %s after the renewal it saw, want 10s", at.Sub(renewedAt))
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
	for range 10 {
		f.clock.Step(time.Second)
		time.Sleep(10 * time.Millisecond)
	}
	// The attempt at 10s conflicted; b read the renewal and waits for it to expire.
	lostAt := f.clock.Now()
	f.waitUntilWaiting(lostAt)
	f.expectNoAcquisition("right after losing to a renewal")
	for range 10 {
		f.clock.Step(time.Second)
		time.Sleep(10 * time.Millisecond)
	}
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
	f.clock.Step(6 * time.Second)
	renewedAt := f.clock.Now()
	f.renew()
	// The next read, a retry period later at most, sees the renewal.
	for range 2 {
		time.Sleep(20 * time.Millisecond)
		f.clock.Step(time.Second)
	}
	f.waitUntilWaiting(renewedAt)
	for range 12 {
		time.Sleep(20 * time.Millisecond)
		f.clock.Step(time.Second)
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
