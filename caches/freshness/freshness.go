// Package freshness decides whether a warm standby's informer caches are fresh enough
// to act on once it acquired the Lease: whether each of them has seen every write
// made before a consistent read taken after the acquisition, and so every write of the
// previous leader, whose fence closed before the Lease could be taken.
//
// Two proofs, per cache, in this order:
//
//   - Progress: the store's resourceVersion (cache.Store.LastStoreSyncResourceVersion,
//     the newest version the informer applied to its store, events and bookmarks
//     alike) is at least R, the resourceVersion of a consistent LIST (resourceVersion
//     "") taken after the acquisition. Resource versions are compared as the apiserver
//     documents them (k8s.io/apimachinery/pkg/util/resourceversion). This is how a busy
//     cache proves itself, usually at once.
//   - Contents: a cache whose type is quiet moves only on bookmarks, about once a
//     minute. After a short wait it is compared with a consistent, paged, metadata-only
//     LIST of its resource at L >= R: fresh when every listed object is in the store
//     with the same or a newer resourceVersion, and every stored object not listed is
//     newer than L (created after the list). Then the store holds everything written
//     up to L.
//
// Limits: a cache whose store cannot report its version (client-go's AtomicFIFO gate
// off) can only use the second proof; an object deleted after the LIST and already
// gone from the store fails the comparison, which is retried until the bound.
package freshness

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Cache is one informer's store and the resource it caches. Its informer must list
// the whole resource, unfiltered: the comparison lists it so.
type Cache struct {
	Resource schema.GroupVersionResource
	Store    cache.Store
}

// Barrier waits until every cache is fresh, or gives up.
type Barrier struct {
	// Metadata lists the resources; its reads must be consistent (resourceVersion "").
	Metadata metadata.Interface
	Caches   []Cache
	// Timeout bounds the whole wait.
	Timeout time.Duration
	// CompareAfter is how long a cache may try to prove its progress before it is
	// compared with a LIST instead; the comparisons then back off, doubling.
	CompareAfter time.Duration
	// Poll is how often the progress is checked.
	Poll time.Duration
	// PageSize is the LIST's limit per page.
	PageSize int64
}

// Result says how each cache proved itself.
type Result struct {
	// Revision is R, the resourceVersion of the consistent read after the acquisition.
	Revision string
	// ByProgress and ByContents name the resources proven either way.
	ByProgress, ByContents []string
	// Took is how long the barrier took.
	Took time.Duration
}

// Wait returns once every cache is fresh, or an error naming those that are not
// after Timeout (or when ctx ended). The consistent read that gives R is the first
// thing it does, so the caller must call it after acquiring the Lease.
func (b Barrier) Wait(ctx context.Context) (Result, error) {
	logger := klog.FromContext(ctx)
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, b.Timeout)
	defer cancel()
	var result Result
	if len(b.Caches) == 0 {
		return result, nil
	}
	revision, err := b.currentRevision(ctx)
	if err != nil {
		return result, fmt.Errorf("reading the current resourceVersion after acquiring the lease: %w", err)
	}
	result.Revision = revision
	pending := map[schema.GroupVersionResource]cache.Store{}
	for _, c := range b.Caches {
		pending[c.Resource] = c.Store
	}
	lastProblem := map[schema.GroupVersionResource]string{}
	// The first comparison comes CompareAfter after the start, each next one twice as
	// long after the previous: a LIST of a big resource is not free, and a cache that
	// is merely behind catches up meanwhile.
	nextCompare, interval := start.Add(b.CompareAfter), b.CompareAfter
	poll := time.NewTicker(b.Poll)
	defer poll.Stop()
	for {
		for resource, store := range pending {
			if atLeast(store.LastStoreSyncResourceVersion(), revision) {
				delete(pending, resource)
				result.ByProgress = append(result.ByProgress, resource.String())
			}
		}
		if len(pending) > 0 && !time.Now().Before(nextCompare) {
			interval *= 2
			nextCompare = time.Now().Add(interval)
			for resource, store := range pending {
				problem, err := b.compare(ctx, resource, store)
				if err != nil {
					problem = err.Error()
				}
				if problem == "" {
					delete(pending, resource)
					result.ByContents = append(result.ByContents, resource.String())
					continue
				}
				lastProblem[resource] = problem
				logger.V(2).Info("Cache not proven fresh yet", "resource", resource.String(), "problem", problem)
			}
		}
		if len(pending) == 0 {
			sort.Strings(result.ByProgress)
			sort.Strings(result.ByContents)
			result.Took = time.Since(start)
			return result, nil
		}
		select {
		case <-ctx.Done():
			var stale []string
			for resource, store := range pending {
				why := lastProblem[resource]
				if why == "" {
					why = "not compared yet"
				}
				stale = append(stale, fmt.Sprintf("%s (store at resourceVersion %q: %s)",
					resource.String(), store.LastStoreSyncResourceVersion(), why))
			}
			sort.Strings(stale)
			result.Took = time.Since(start)
			return result, fmt.Errorf("caches not proven as new as resourceVersion %s within %s: %s",
				revision, b.Timeout, strings.Join(stale, "; "))
		case <-poll.C:
		}
	}
}

// currentRevision is the resourceVersion of a consistent LIST of one object of the
// first cache's resource: the apiserver's current revision, which follows every write
// it acknowledged before.
func (b Barrier) currentRevision(ctx context.Context) (string, error) {
	list, err := b.Metadata.Resource(b.Caches[0].Resource).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return "", err
	}
	if list.ResourceVersion == "" {
		return "", fmt.Errorf("the LIST of %s has no resourceVersion", b.Caches[0].Resource.String())
	}
	return list.ResourceVersion, nil
}

// compare lists resource consistently, metadata only, and compares it with store. It
// returns "" when the store holds everything the list does, else the first difference.
func (b Barrier) compare(ctx context.Context, resource schema.GroupVersionResource, store cache.Store) (string, error) {
	listed := map[string]string{}
	var at string
	options := metav1.ListOptions{Limit: b.PageSize}
	for {
		page, err := b.Metadata.Resource(resource).List(ctx, options)
		if err != nil {
			return "", fmt.Errorf("listing %s: %w", resource.String(), err)
		}
		at = page.ResourceVersion
		for i := range page.Items {
			item := &page.Items[i]
			key := item.Name
			if item.Namespace != "" {
				key = item.Namespace + "/" + item.Name
			}
			listed[key] = item.ResourceVersion
		}
		if page.Continue == "" {
			break
		}
		options.Continue = page.Continue
	}
	for key, version := range listed {
		obj, exists, err := store.GetByKey(key)
		if err != nil {
			return "", err
		}
		if !exists {
			return fmt.Sprintf("%s is missing from the cache", key), nil
		}
		accessor, err := meta.Accessor(obj)
		if err != nil {
			return "", err
		}
		if !atLeast(accessor.GetResourceVersion(), version) {
			return fmt.Sprintf("%s is at resourceVersion %s in the cache, %s in the apiserver",
				key, accessor.GetResourceVersion(), version), nil
		}
	}
	for _, key := range store.ListKeys() {
		if _, ok := listed[key]; ok {
			continue
		}
		obj, exists, err := store.GetByKey(key)
		if err != nil || !exists {
			continue
		}
		accessor, err := meta.Accessor(obj)
		if err != nil {
			return "", err
		}
		if !atLeast(accessor.GetResourceVersion(), at) {
			return fmt.Sprintf("%s is in the cache but was deleted", key), nil
		}
	}
	return "", nil
}

// atLeast reports whether resource version a is known to be at least b. Versions that
// cannot be compared prove nothing.
func atLeast(a, b string) bool {
	cmp, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && cmp >= 0
}
