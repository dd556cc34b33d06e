// Package expectations lets a controller remember the creates and deletes it issued
// until its informer has seen them, as upstream's ControllerExpectations do.
//
// A controller that just created five pods must not count pods again before the watch
// delivered those five: its cache would still show the old number and it would create
// five more. So after issuing writes it records what it expects to observe, its event
// handlers count observations down, and it only acts again once the counts reach zero,
// or after Timeout in case an event was lost (the controller must never sleep forever).
//
// Deletions are tracked by pod key as well as by count: a graceful delete is seen twice
// (the update that sets deletionTimestamp, then the delete), and only the first sighting
// of a key this controller deleted may count.
package expectations

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
)

// Timeout is how long expectations are trusted. After it a controller syncs even if
// events are missing. At roughly 10 pod creations observed per second, 500 pods (one
// burst) take about a minute; five minutes leave room for slow watches.
const Timeout = 5 * time.Minute

// ControllerExpectations holds, per controller key ("namespace/name"), the number of
// creations and deletions still to be observed. It is safe for concurrent use by
// workers and event handlers.
type ControllerExpectations struct {
	// now is the clock; tests replace it to expire records.
	now func() time.Time

	mu sync.Mutex
	// records maps a controller key to what it still expects.
	records map[string]*record
}

// record is what one controller still expects to observe.
type record struct {
	add, del int64
	// timestamp is when the expectations were set; they expire Timeout later.
	timestamp time.Time
	// deleteKeys are the pod keys whose deletion is expected and not yet observed.
	deleteKeys sets.Set[string]
}

// New returns empty expectations on the real clock.
func New() *ControllerExpectations {
	return NewWithClock(time.Now)
}

// NewWithClock returns empty expectations that read time from now.
func NewWithClock(now func() time.Time) *ControllerExpectations {
	return &ControllerExpectations{now: now, records: map[string]*record{}}
}

// Satisfied reports whether the controller may act: it has no expectations, all of them
// were observed, or they are older than Timeout.
func (e *ControllerExpectations) Satisfied(logger klog.Logger, key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.records[key]
	switch {
	case !ok:
		// A new controller, or one that never needed to write: nothing to wait for.
		logger.V(4).Info("Controller has no expectations", "controller", key)
		return true
	case r.add <= 0 && r.del <= 0:
		logger.V(4).Info("Controller expectations fulfilled", "controller", key, "add", r.add, "del", r.del)
		return true
	case e.now().Sub(r.timestamp) > Timeout:
		logger.V(4).Info("Controller expectations expired", "controller", key, "add", r.add, "del", r.del)
		return true
	default:
		logger.V(4).Info("Controller still waiting on expectations", "controller", key, "add", r.add, "del", r.del)
		return false
	}
}

// Get returns the outstanding counts for key, and false if it has no record.
func (e *ControllerExpectations) Get(key string) (add, del int64, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r, found := e.records[key]; found {
		return r.add, r.del, true
	}
	return 0, 0, false
}

// Set replaces key's expectations with add creations and del deletions, forgetting
// whatever it expected before, and restarts the Timeout.
func (e *ControllerExpectations) Set(logger klog.Logger, key string, add, del int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.set(logger, key, add, del, nil)
}

func (e *ControllerExpectations) set(logger klog.Logger, key string, add, del int, deleteKeys sets.Set[string]) {
	logger.V(4).Info("Setting expectations", "controller", key, "add", add, "del", del)
	e.records[key] = &record{add: int64(add), del: int64(del), timestamp: e.now(), deleteKeys: deleteKeys}
}

// ExpectCreations records that key is about to create n objects.
func (e *ControllerExpectations) ExpectCreations(logger klog.Logger, key string, n int) {
	e.Set(logger, key, n, 0)
}

// ExpectDeletions records that key is about to delete the pods with the given keys
// ("namespace/name"). Only DeletionObserved for one of these keys counts, once each.
func (e *ControllerExpectations) ExpectDeletions(logger klog.Logger, key string, podKeys []string) {
	keys := sets.New(podKeys...)
	logger.V(4).Info("Controller waiting on deletions", "controller", key, "keys", podKeys)
	e.mu.Lock()
	defer e.mu.Unlock()
	if r, ok := e.records[key]; ok && r.deleteKeys.Len() > 0 {
		// Deletions from an earlier, expired round were never observed: they are
		// forgotten now, which the Timeout already allowed.
		logger.V(2).Info("Clobbering unobserved deletion expectations", "controller", key, "keys", sets.List(r.deleteKeys))
	}
	e.set(logger, key, 0, keys.Len(), keys)
}

// Lower decrements key's outstanding counts; it does nothing if key has no record.
func (e *ControllerExpectations) Lower(logger klog.Logger, key string, add, del int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r, ok := e.records[key]; ok {
		r.add -= int64(add)
		r.del -= int64(del)
		logger.V(4).Info("Lowered expectations", "controller", key, "add", r.add, "del", r.del)
	}
}

// Raise increments key's outstanding counts; it does nothing if key has no record.
func (e *ControllerExpectations) Raise(logger klog.Logger, key string, add, del int) {
	e.Lower(logger, key, -add, -del)
}

// CreationObserved counts one expected creation as seen (or as never going to happen,
// when the create request failed).
func (e *ControllerExpectations) CreationObserved(logger klog.Logger, key string) {
	e.Lower(logger, key, 1, 0)
}

// DeletionObserved counts the deletion of the pod with podKey, if key expected it and
// has not counted it yet. Later sightings of the same pod (the delete event after the
// deletionTimestamp update) do not count again.
func (e *ControllerExpectations) DeletionObserved(logger klog.Logger, key, podKey string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.records[key]
	if !ok || !r.deleteKeys.Has(podKey) {
		return
	}
	r.deleteKeys.Delete(podKey)
	r.del--
	logger.V(4).Info("Controller observed expected deletion", "controller", key, "pod", podKey, "add", r.add, "del", r.del)
}

// Delete forgets key's expectations, e.g. when the controller object was deleted, so
// that an object recreated under the same name starts clean.
func (e *ControllerExpectations) Delete(logger klog.Logger, key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.records[key]; ok {
		logger.V(4).Info("Deleting expectations", "controller", key)
		delete(e.records, key)
	}
}
