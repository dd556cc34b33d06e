package replicaset

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
)

var (
	podsResource        = schema.GroupResource{Resource: "pods"}
	replicaSetsResource = schema.GroupResource{Group: "apps", Resource: "replicasets"}
)

// resourceVersionReader is the part of an informer store the guard needs: the newest
// resourceVersion the store has seen (empty if client-go cannot tell).
type resourceVersionReader interface {
	LastStoreSyncResourceVersion() string
}

// consistencyGuard is the read-your-writes guard of upstream's
// StaleControllerConsistencyReplicaSet gate (beta, on in 1.37). For every ReplicaSet it
// remembers the newest resourceVersion this controller wrote per resource (pods it
// created or adopted, its own status), and holds the next sync of that ReplicaSet back
// until the informer stores have seen at least that version. Expectations already cover
// pod creations and deletions; the guard also covers adoptions and status writes, after
// which a sync on a stale cache would otherwise recount or re-adopt.
//
// Resource versions are compared with the apiserver's documented ordering; a version
// that cannot be compared (or a store that cannot report one) never blocks a sync.
//
// A nil *consistencyGuard guards nothing, like upstream's NoopConsistencyStore with the
// gate off: every method is a no-op and EnsureReady never holds a sync back.
type consistencyGuard struct {
	// stores are the informer stores whose progress is checked, per resource.
	stores map[schema.GroupResource]resourceVersionReader

	mu sync.Mutex
	// written maps a ReplicaSet to the versions written on its behalf.
	written map[types.NamespacedName]*writtenVersions
}

// writtenVersions are the newest versions written for one ReplicaSet incarnation.
type writtenVersions struct {
	uid      types.UID
	versions map[schema.GroupResource]string
}

func newConsistencyGuard(stores map[schema.GroupResource]resourceVersionReader) *consistencyGuard {
	return &consistencyGuard{stores: stores, written: map[types.NamespacedName]*writtenVersions{}}
}

// staleCacheError reports that an informer has not yet seen one of our writes.
type staleCacheError struct {
	resource      schema.GroupResource
	read, written string
	owner         types.NamespacedName
}

func (e *staleCacheError) Error() string {
	return fmt.Sprintf("waiting for the %s cache to catch up with our writes for ReplicaSet %s: read resourceVersion %s, wrote %s",
		e.resource, e.owner, e.read, e.written)
}

// WroteAt records that rv of resource was written on behalf of the ReplicaSet owner
// with the given UID. Only the newest version per resource is kept; a record for an
// older incarnation of owner (another UID) is replaced.
func (g *consistencyGuard) WroteAt(owner types.NamespacedName, uid types.UID, resource schema.GroupResource, rv string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.written[owner]
	if w == nil || w.uid != uid {
		w = &writtenVersions{uid: uid, versions: map[schema.GroupResource]string{}}
		g.written[owner] = w
	}
	if prev, ok := w.versions[resource]; ok {
		if cmp, err := resourceversion.CompareResourceVersion(prev, rv); err == nil && cmp >= 0 {
			return
		}
	}
	w.versions[resource] = rv
}

// Clear forgets owner's writes; a non-empty uid only forgets them if they belong to that
// incarnation, so that deleting an old ReplicaSet keeps its successor's record.
func (g *consistencyGuard) Clear(owner types.NamespacedName, uid types.UID) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if w := g.written[owner]; w != nil && (uid == "" || w.uid == uid) {
		delete(g.written, owner)
	}
}

// EnsureReady returns a *staleCacheError if an informer store has not yet seen a
// version written for owner. Once every store caught up the record is dropped, so a
// ReplicaSet without recent writes costs one map lookup.
func (g *consistencyGuard) EnsureReady(owner types.NamespacedName) error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.written[owner]
	if w == nil {
		return nil
	}
	for resource, wrote := range w.versions {
		store := g.stores[resource]
		if store == nil {
			continue
		}
		read := store.LastStoreSyncResourceVersion()
		if read == "" {
			continue
		}
		if cmp, err := resourceversion.CompareResourceVersion(wrote, read); err == nil && cmp > 0 {
			staleSyncSkips.WithLabelValues(resource.Group, resource.Resource).Inc()
			return &staleCacheError{resource: resource, read: read, written: wrote, owner: owner}
		}
	}
	delete(g.written, owner)
	return nil
}
