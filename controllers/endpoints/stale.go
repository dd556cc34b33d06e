package endpoints

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// staleEndpointsTracker remembers, per Endpoints, the resourceVersion this controller last
// replaced with an update. Finding that version in the informer cache again means the
// cache has not caught up with our own write; syncing from it would compute a diff against
// old data (and could undo a newer write), so the sync waits instead.
//
// Upstream fails such a sync and retries it with the queue's backoff, which is
// exponential per Service and shared by all of them (10 retries a second once 100 are
// spent). A Service whose pods change while its write is in flight meets its own stale
// cache again and again, so its last sync often waited a backoff of hundreds of
// milliseconds, longer than the cache took to catch up. Here the sync waits for the
// event instead: the Endpoints informer's update that moves the cache past the replaced
// version queues the Service at once (see cacheMovedPast).
type staleEndpointsTracker struct {
	mu sync.Mutex
	// replaced maps an Endpoints to the last version this controller replaced.
	replaced map[types.NamespacedName]*replacedVersion
}

// replacedVersion is a resourceVersion of an Endpoints that this controller replaced.
type replacedVersion struct {
	resourceVersion string
	// passed says that the cache has moved past it: an update event had it as its old
	// object. The cache never goes back to it then.
	passed bool
	// waiting says that a sync found it in the cache and waits for it to be passed.
	waiting bool
}

// staleness is what the tracker knows about an Endpoints read from the cache.
type staleness int

const (
	// cacheCurrent: the Endpoints is not a version this controller replaced.
	cacheCurrent staleness = iota
	// cacheBehind: it is, and the sync that read it is now waiting for the update
	// event that brings the cache past it.
	cacheBehind
	// cachePassed: it is, but the cache has moved past it since it was read; read it
	// again.
	cachePassed
)

func newStaleEndpointsTracker() *staleEndpointsTracker {
	return &staleEndpointsTracker{replaced: map[types.NamespacedName]*replacedVersion{}}
}

// markStale records that endpoints, at its resourceVersion, has been replaced.
func (t *staleEndpointsTracker) markStale(endpoints *v1.Endpoints) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.replaced[keyOf(endpoints)] = &replacedVersion{resourceVersion: endpoints.ResourceVersion}
}

// check tells whether endpoints, just read from the cache, is a version this controller
// has already replaced. If so, and the cache has not moved on since, the caller is
// recorded as waiting: cacheMovedPast reports it when the cache moves on.
func (t *staleEndpointsTracker) check(endpoints *v1.Endpoints) staleness {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.replaced[keyOf(endpoints)]
	switch {
	case !ok || r.resourceVersion != endpoints.ResourceVersion:
		return cacheCurrent
	case r.passed:
		// The update event came between the caller's read and this check.
		return cachePassed
	}
	r.waiting = true
	return cacheBehind
}

// cacheMovedPast is told the Endpoints the cache held before an update event. It
// reports whether a sync of its Service waited for the cache to move past that
// version; the caller then queues the Service.
func (t *staleEndpointsTracker) cacheMovedPast(old *v1.Endpoints) (resume bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.replaced[keyOf(old)]
	if !ok || r.resourceVersion != old.ResourceVersion || r.passed {
		return false
	}
	r.passed = true
	resume, r.waiting = r.waiting, false
	return resume
}

// forget drops what is known about an Endpoints whose Service was deleted.
func (t *staleEndpointsTracker) forget(namespace, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.replaced, types.NamespacedName{Namespace: namespace, Name: name})
}

func keyOf(endpoints *v1.Endpoints) types.NamespacedName {
	return types.NamespacedName{Namespace: endpoints.Namespace, Name: endpoints.Name}
}
