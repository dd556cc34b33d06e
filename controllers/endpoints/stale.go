package endpoints

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// staleEndpointsTracker remembers, per Endpoints, the resourceVersion this controller last
// replaced with an update. Finding that version in the informer cache again means the
// cache has not caught up with our own write; syncing from it would compute a diff against
// old data (and could undo a newer write), so the sync fails and is retried instead.
type staleEndpointsTracker struct {
	mu sync.RWMutex
	// staleVersions maps an Endpoints to the resourceVersion known to be outdated.
	staleVersions map[types.NamespacedName]string
}

func newStaleEndpointsTracker() *staleEndpointsTracker {
	return &staleEndpointsTracker{staleVersions: map[types.NamespacedName]string{}}
}

// markStale records that endpoints, at its resourceVersion, has been replaced.
func (t *staleEndpointsTracker) markStale(endpoints *v1.Endpoints) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.staleVersions[types.NamespacedName{Namespace: endpoints.Namespace, Name: endpoints.Name}] = endpoints.ResourceVersion
}

// isStale reports whether endpoints is a version this controller has already replaced.
func (t *staleEndpointsTracker) isStale(endpoints *v1.Endpoints) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	stale, ok := t.staleVersions[types.NamespacedName{Namespace: endpoints.Namespace, Name: endpoints.Name}]
	return ok && stale == endpoints.ResourceVersion
}

// forget drops what is known about an Endpoints whose Service was deleted.
func (t *staleEndpointsTracker) forget(namespace, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.staleVersions, types.NamespacedName{Namespace: namespace, Name: name})
}
