package queueworker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"

	"github.com/mini-kcm/mini-kcm/controllers"
)

var errSync = errors.New("sync failed")

func TestRetryPolicyDecidesForgetRetryOrDrop(t *testing.T) {
	errPermanent := errors.New("permanent")
	errQuiet := errors.New("quiet")
	tests := []struct {
		name         string
		retry        Retry
		err          error
		failures     int
		wantRequeues int
	}{
		{name: "success forgets the key", err: nil, failures: 3, wantRequeues: 0},
		{name: "forever keeps retrying", retry: Retry{}, err: errSync, failures: 20, wantRequeues: 20},
		{name: "max retries drops the key after the last retry", retry: Retry{MaxRetries: 3}, err: errSync, failures: 4, wantRequeues: 0},
		{name: "max retries retries up to the bound", retry: Retry{MaxRetries: 3}, err: errSync, failures: 3, wantRequeues: 3},
		{name: "a permanent error forgets the key", retry: Retry{MaxRetries: 3, Permanent: func(err error) bool { return err == errPermanent }}, err: errPermanent, failures: 2, wantRequeues: 0},
		{name: "a quiet error is still retried", retry: Retry{Quiet: func(err error) bool { return err == errQuiet }}, err: errQuiet, failures: 5, wantRequeues: 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := NewQueue("test", "test-controller", func(context.Context, string) error { return tc.err }, tc.retry)
			defer q.ShutDown()
			for range tc.failures {
				q.Add("ns/a")
				// Take the rate-limited re-add out of the way: only the counter matters.
				if !q.ProcessNextWorkItem(context.Background()) {
					t.Fatal("queue shut down")
				}
			}
			if got := q.NumRequeues("ns/a"); got != tc.wantRequeues {
				t.Errorf("requeues = %d, want %d", got, tc.wantRequeues)
			}
		})
	}
}

func TestWedgedSyncFailsTheCheckNamingControllerAndKey(t *testing.T) {
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	syncs := &controllers.InFlightSyncs{Threshold: time.Minute, Now: clock}

	entered := make(chan struct{})
	release := make(chan struct{})
	q := NewQueue("wedge", "wedge-controller", func(_ context.Context, key string) error {
		close(entered)
		<-release // a write that never returns
		return nil
	}, Retry{})
	q.Add("default/stuck")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, Spec{Controller: "wedge-controller", Workers: 1, Syncs: syncs, Queues: []Loop{q},
			Informers: []controllers.InformerSync{{Name: "things", Synced: func() bool { return true }}}})
	}()
	<-entered
	if err := syncs.Check(); err != nil {
		t.Errorf("a sync younger than the threshold failed the check: %v", err)
	}

	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	err := syncs.Check()
	if err == nil || !strings.Contains(err.Error(), "wedge-controller") || !strings.Contains(err.Error(), `"default/stuck"`) {
		t.Errorf("check = %v, want a failure naming wedge-controller and default/stuck", err)
	}

	close(release)
	waitFor(t, func() bool { return syncs.Check() == nil })
	cancel()
	<-done
}

func TestThresholdZeroTurnsTheCheckOff(t *testing.T) {
	syncs := &controllers.InFlightSyncs{Now: func() time.Time { return time.Unix(0, 0) }}
	defer syncs.Started("c", "k")()
	syncs.Now = func() time.Time { return time.Unix(3600, 0) }
	if err := syncs.Check(); err != nil {
		t.Errorf("threshold 0 must pass, got %v", err)
	}
}

func TestRunReturnsOnlyAfterItsWorkersStopped(t *testing.T) {
	started := make(chan struct{})
	var running sync.WaitGroup
	q := NewQueue("stop", "stop-controller", func(ctx context.Context, _ string) error {
		running.Add(1)
		defer running.Done()
		close(started)
		time.Sleep(50 * time.Millisecond)
		return nil
	}, Retry{})
	q.Add("a")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		Run(ctx, Spec{Controller: "stop-controller", Workers: 2, Queues: []Loop{q}})
		close(done)
	}()
	<-started
	cancel()
	<-done
	if !q.ShuttingDown() {
		t.Error("Run returned without shutting its queue down")
	}
	running.Wait() // would race with Add if a sync were still running
}

func TestDeletedObjectUnwrapsTombstones(t *testing.T) {
	type thing struct{ name string }
	if got, ok := DeletedObject[*thing](&thing{name: "a"}); !ok || got.name != "a" {
		t.Errorf("object: got %v, %v", got, ok)
	}
	if got, ok := DeletedObject[*thing](cache.DeletedFinalStateUnknown{Key: "b", Obj: &thing{name: "b"}}); !ok || got.name != "b" {
		t.Errorf("tombstone: got %v, %v", got, ok)
	}
	if _, ok := DeletedObject[*thing](cache.DeletedFinalStateUnknown{Key: "c", Obj: "not a thing"}); ok {
		t.Error("a tombstone of another type must be rejected")
	}
	if _, ok := DeletedObject[*thing]("not a thing"); ok {
		t.Error("another type must be rejected")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSplitKeyDropsWhatNoRetryCanSplit: a namespaced and a cluster-scoped key split; a
// key with two slashes is refused, so the sync drops it instead of retrying forever.
func TestSplitKeyDropsWhatNoRetryCanSplit(t *testing.T) {
	for _, tc := range []struct {
		key, namespace, name string
		ok                   bool
	}{
		{key: "ns/web", namespace: "ns", name: "web", ok: true},
		{key: "node-1", name: "node-1", ok: true},
		{key: "a/b/c"},
	} {
		namespace, name, ok := SplitKey(context.Background(), "Thing", tc.key)
		if namespace != tc.namespace || name != tc.name || ok != tc.ok {
			t.Errorf("SplitKey(%q) = %q, %q, %v; want %q, %q, %v", tc.key, namespace, name, ok, tc.namespace, tc.name, tc.ok)
		}
	}
}

// testFence is a write fence the test opens and closes.
type testFence struct {
	mu     sync.Mutex
	open   bool
	opened chan struct{}
}

var errFenced = errors.New("write fenced: this replica does not hold the lease")

func (f *testFence) Refused(err error) bool { return errors.Is(err, errFenced) }

func (f *testFence) WhenOpen() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.opened == nil {
		f.opened = make(chan struct{})
	}
	if f.open {
		close(f.opened)
		ch := f.opened
		f.opened = nil
		return ch
	}
	return f.opened
}

func (f *testFence) setOpen(open bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.open = open
	if open && f.opened != nil {
		close(f.opened)
		f.opened = nil
	}
}

func (f *testFence) isOpen() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.open
}

func TestAKeyTheFenceRefusedWaitsForItToReopenAndIsSyncedAtOnceWithoutBackoff(t *testing.T) {
	fence := &testFence{}
	var mu sync.Mutex
	synced := 0
	q := NewQueue("fenced", "fenced-controller", func(context.Context, string) error {
		mu.Lock()
		synced++
		mu.Unlock()
		if !fence.isOpen() {
			return errFenced
		}
		return nil
	}, Retry{})
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return synced
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, Spec{Controller: "fenced-controller", Workers: 1, Queues: []Loop{q}, Fence: fence,
			Informers: []controllers.InformerSync{{Name: "things", Synced: func() bool { return true }}}})
	}()
	defer func() {
		cancel()
		<-done
	}()
	q.Add("ns/a")
	deadline := time.Now().Add(5 * time.Second)
	for count() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	// Parked, not backed off: no retry while the fence stays closed, no requeue counted.
	time.Sleep(300 * time.Millisecond)
	if n := count(); n != 1 {
		t.Fatalf("a key the fence refused was synced %d times while it stayed closed; want once, then parked", n)
	}
	if n := q.NumRequeues("ns/a"); n != 0 {
		t.Errorf("a fenced key was counted as %d failures", n)
	}
	opened := time.Now()
	fence.setOpen(true)
	for count() < 2 && time.Since(opened) < 5*time.Second {
		time.Sleep(time.Millisecond)
	}
	if count() != 2 {
		t.Fatalf("the parked key was synced %d times in all after the fence reopened; want once more", count())
	}
}
