package expectations

import (
	"sync"
	"testing"
	"time"

	"k8s.io/klog/v2"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestExpectationsAreSatisfiedOnlyWhenEveryCountIsObserved(t *testing.T) {
	logger := klog.Background()
	clock := &fakeClock{t: time.Now()}
	e := NewWithClock(clock.Now)
	const key = "default/rs"

	if !e.Satisfied(logger, key) {
		t.Fatal("a controller without expectations must be allowed to sync")
	}

	adds, dels := 10, 30
	e.Set(logger, key, adds, dels)
	var wg sync.WaitGroup
	for range adds + 1 {
		wg.Go(func() { e.CreationObserved(logger, key) })
	}
	wg.Wait()
	if e.Satisfied(logger, key) {
		t.Fatal("satisfied while deletions are still expected")
	}
	for range dels + 1 {
		wg.Go(func() { e.Lower(logger, key, 0, 1) })
	}
	wg.Wait()
	if add, del, ok := e.Get(key); !ok || add != -1 || del != -1 {
		t.Fatalf("Get = (%d, %d, %v), want surpassed counts (-1, -1, true)", add, del, ok)
	}
	if !e.Satisfied(logger, key) {
		t.Fatal("surpassed expectations must be satisfied")
	}

	e.Set(logger, key, 1, 2)
	if e.Satisfied(logger, key) {
		t.Fatal("fresh expectations must not be satisfied")
	}
	clock.Step(Timeout + time.Second)
	if add, del, _ := e.Get(key); add != 1 || del != 2 {
		t.Fatalf("expiry must not change the counts, got (%d, %d)", add, del)
	}
	if !e.Satisfied(logger, key) {
		t.Fatal("expectations older than Timeout must be satisfied")
	}
}

func TestDeletionObservedCountsEachExpectedPodOnce(t *testing.T) {
	logger := klog.Background()
	tests := []struct {
		name     string
		expected []string
		observed []string
		wantDel  int64
	}{
		{"every expected pod observed", []string{"ns/a", "ns/b"}, []string{"ns/a", "ns/b"}, 0},
		{"graceful delete seen twice counts once", []string{"ns/a", "ns/b"}, []string{"ns/a", "ns/a"}, 1},
		{"pods this controller did not delete are ignored", []string{"ns/a"}, []string{"ns/x", "ns/y"}, 1},
		{"duplicate keys are expected once", []string{"ns/a", "ns/a"}, nil, 1},
		{"nothing to delete is satisfied", nil, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := New()
			const key = "ns/rs"
			e.ExpectDeletions(logger, key, tt.expected)
			for _, pod := range tt.observed {
				e.DeletionObserved(logger, key, pod)
			}
			if _, del, _ := e.Get(key); del != tt.wantDel {
				t.Errorf("outstanding deletions = %d, want %d", del, tt.wantDel)
			}
			if got := e.Satisfied(logger, key); got != (tt.wantDel == 0) {
				t.Errorf("Satisfied = %v, want %v", got, tt.wantDel == 0)
			}
		})
	}
}

func TestDeleteForgetsExpectationsAndTrackedKeys(t *testing.T) {
	logger := klog.Background()
	e := New()
	const key = "ns/rs"
	e.ExpectDeletions(logger, key, []string{"ns/a"})
	e.Delete(logger, key)
	if _, _, ok := e.Get(key); ok {
		t.Fatal("Delete left a record behind")
	}
	if !e.Satisfied(logger, key) {
		t.Fatal("a deleted record must not block syncs")
	}
	// A pod deletion arriving after the record is gone must not resurrect it.
	e.DeletionObserved(logger, key, "ns/a")
	if _, _, ok := e.Get(key); ok {
		t.Fatal("DeletionObserved created a record")
	}
}

func TestExpectCreationsReplacesEarlierDeletions(t *testing.T) {
	logger := klog.Background()
	e := New()
	const key = "ns/rs"
	e.ExpectDeletions(logger, key, []string{"ns/a"})
	e.ExpectCreations(logger, key, 2)
	e.DeletionObserved(logger, key, "ns/a")
	if add, del, _ := e.Get(key); add != 2 || del != 0 {
		t.Fatalf("Get = (%d, %d), want (2, 0)", add, del)
	}
	e.CreationObserved(logger, key)
	e.CreationObserved(logger, key)
	if !e.Satisfied(logger, key) {
		t.Fatal("both creations observed, want satisfied")
	}
}

func TestRaiseAndLowerNeedAnExistingRecord(t *testing.T) {
	logger := klog.Background()
	e := New()
	e.Raise(logger, "ns/none", 1, 1)
	if _, _, ok := e.Get("ns/none"); ok {
		t.Fatal("Raise created a record")
	}
	e.Set(logger, "ns/rs", 0, 0)
	e.Raise(logger, "ns/rs", 2, 1)
	if add, del, _ := e.Get("ns/rs"); add != 2 || del != 1 {
		t.Fatalf("after Raise Get = (%d, %d), want (2, 1)", add, del)
	}
}
