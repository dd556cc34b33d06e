package sharding

import (
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apisharding "k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/watchlist"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// The apiserver filters a shard's lists and watches by its shardSelector only while it
// has the ShardedListAndWatch gate: an apiserver without it (a rolling upgrade or
// rollback, a second apiserver behind the load balancer) ignores the field at the next
// relist, and a shard's controllers would then act on every namespace, in several
// replicas at once, each under its own shard's fence. So every object a shard's
// informers receive is checked against the shard's range again here, in the list and
// watch layer below the informers, and one outside it is dropped before it reaches the
// store. (client-go's TransformFunc cannot drop an object, only change it.)

var (
	outOfRangeObjects = metrics.NewCounter(&metrics.CounterOpts{
		Name: "mini_kcm_shard_out_of_range_objects_total",
		Help: "Objects outside a shard's range that the apiserver sent to the shard's informers (it ignored " +
			"shardSelector) and mini-kcm dropped before caching them.",
		StabilityLevel: metrics.ALPHA,
	})
	registerFilterMetrics sync.Once
)

// outOfRange counts, for a replica, the objects its shards' informers dropped, and tells
// the replica once that the apiserver stopped filtering.
type outOfRange struct {
	dropped atomic.Int64
	// first is called once, at the first dropped object.
	first func(example metav1.Object)
	once  sync.Once
}

func (o *outOfRange) drop(obj metav1.Object) {
	registerFilterMetrics.Do(func() { legacyregistry.MustRegister(outOfRangeObjects) })
	outOfRangeObjects.Inc()
	o.dropped.Add(1)
	if o.first != nil {
		o.once.Do(func() { o.first(obj) })
	}
}

// rangeFilter admits the objects of one shard's range.
type rangeFilter struct {
	selector apisharding.Selector
	report   *outOfRange
}

// admits reports whether obj belongs to the shard, counting it when not. An object
// the selector cannot read is dropped too: caching it could only make a controller act
// outside the shard.
func (f rangeFilter) admits(obj metav1.Object) bool {
	if rangeFilterOff {
		return true
	}
	ro, ok := obj.(runtime.Object)
	if !ok {
		return false
	}
	if in, err := f.selector.Matches(ro); err == nil && in {
		return true
	}
	if f.report != nil {
		f.report.drop(obj)
	}
	return false
}

// keep returns the items f admits, in place.
func keep[T any, PT interface {
	*T
	metav1.Object
}](f rangeFilter, items []T) []T {
	kept := items[:0]
	for i := range items {
		if f.admits(PT(&items[i])) {
			kept = append(kept, items[i])
		}
	}
	return kept
}

// watch drops the events of objects outside the range; errors and bookmarks pass.
func (f rangeFilter) watch(w watch.Interface, err error) (watch.Interface, error) {
	if err != nil {
		return w, err
	}
	return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		switch e.Type {
		case watch.Added, watch.Modified, watch.Deleted:
			if obj, ok := e.Object.(metav1.Object); ok {
				return e, f.admits(obj)
			}
		}
		return e, true
	}), nil
}

// clusterScoped are the cached resources that no shard owns: they come from the
// replica's unfiltered factory (see Informers.Wrap), which routes each of them. The
// namespaced ones, filteredResources, are generated (zz_generated_filter.go).
var clusterScoped = []schema.GroupResource{{Resource: "nodes"}}

// filteredClient is the client of a shard's informers: the lists and watches of every
// namespaced resource a registered controller caches return only the shard's objects.
// Its typed wrappers, one per group and resource, are generated from the registry by
// `make generate` (zz_generated_filter.go, from hack/rbacgen); a test fails when they
// and the registry disagree.
type filteredClient struct {
	kubernetes.Interface
	f rangeFilter
}

// IsWatchListSemanticsUnSupported passes on what the filtered client says: the
// informers ask it whether they may stream their initial list as watch events.
func (c filteredClient) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(c.Interface)
}
