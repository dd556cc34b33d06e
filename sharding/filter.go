package sharding

import (
	"context"
	"sync"
	"sync/atomic"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apisharding "k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	discoveryv1client "k8s.io/client-go/kubernetes/typed/discovery/v1"
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

// filteredResources are the namespaced resources whose lists and watches filteredClient
// filters; clusterScoped are those that no shard owns (the unfiltered factory's).
var (
	filteredResources = []schema.GroupResource{
		{Resource: "pods"}, {Resource: "services"}, {Resource: "endpoints"},
		{Group: "apps", Resource: "replicasets"}, {Group: "apps", Resource: "deployments"},
		{Group: "discovery.k8s.io", Resource: "endpointslices"},
	}
	clusterScoped = []schema.GroupResource{{Resource: "nodes"}}
)

// filteredClient is the client of a shard's informers: the lists and watches of the
// namespaced resources mini-kcm's controllers cache (Pods, Services, Endpoints,
// ReplicaSets, Deployments, EndpointSlices) return only the shard's objects. Nodes are
// cluster-scoped and come from the replica's unfiltered factory (see Informers.Wrap); a
// controller that caches another namespaced resource adds it here and to
// filteredResources (a test checks the registry's Caches against that list).
type filteredClient struct {
	kubernetes.Interface
	f rangeFilter
}

// IsWatchListSemanticsUnSupported passes on what the filtered client says: the
// informers ask it whether they may stream their initial list as watch events.
func (c filteredClient) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(c.Interface)
}

func (c filteredClient) CoreV1() corev1client.CoreV1Interface {
	return filteredCoreV1{CoreV1Interface: c.Interface.CoreV1(), f: c.f}
}

func (c filteredClient) AppsV1() appsv1client.AppsV1Interface {
	return filteredAppsV1{AppsV1Interface: c.Interface.AppsV1(), f: c.f}
}

func (c filteredClient) DiscoveryV1() discoveryv1client.DiscoveryV1Interface {
	return filteredDiscoveryV1{DiscoveryV1Interface: c.Interface.DiscoveryV1(), f: c.f}
}

type filteredCoreV1 struct {
	corev1client.CoreV1Interface
	f rangeFilter
}

func (c filteredCoreV1) Pods(namespace string) corev1client.PodInterface {
	return filteredPods{PodInterface: c.CoreV1Interface.Pods(namespace), f: c.f}
}

func (c filteredCoreV1) Services(namespace string) corev1client.ServiceInterface {
	return filteredServices{ServiceInterface: c.CoreV1Interface.Services(namespace), f: c.f}
}

func (c filteredCoreV1) Endpoints(namespace string) corev1client.EndpointsInterface {
	return filteredEndpoints{EndpointsInterface: c.CoreV1Interface.Endpoints(namespace), f: c.f}
}

type filteredAppsV1 struct {
	appsv1client.AppsV1Interface
	f rangeFilter
}

func (c filteredAppsV1) ReplicaSets(namespace string) appsv1client.ReplicaSetInterface {
	return filteredReplicaSets{ReplicaSetInterface: c.AppsV1Interface.ReplicaSets(namespace), f: c.f}
}

func (c filteredAppsV1) Deployments(namespace string) appsv1client.DeploymentInterface {
	return filteredDeployments{DeploymentInterface: c.AppsV1Interface.Deployments(namespace), f: c.f}
}

type filteredDiscoveryV1 struct {
	discoveryv1client.DiscoveryV1Interface
	f rangeFilter
}

func (c filteredDiscoveryV1) EndpointSlices(namespace string) discoveryv1client.EndpointSliceInterface {
	return filteredEndpointSlices{EndpointSliceInterface: c.DiscoveryV1Interface.EndpointSlices(namespace), f: c.f}
}

type filteredPods struct {
	corev1client.PodInterface
	f rangeFilter
}

func (c filteredPods) List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error) {
	l, err := c.PodInterface.List(ctx, opts)
	if l != nil {
		l.Items = keep(c.f, l.Items)
	}
	return l, err
}

func (c filteredPods) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return c.f.watch(c.PodInterface.Watch(ctx, opts))
}

type filteredServices struct {
	corev1client.ServiceInterface
	f rangeFilter
}

func (c filteredServices) List(ctx context.Context, opts metav1.ListOptions) (*corev1.ServiceList, error) {
	l, err := c.ServiceInterface.List(ctx, opts)
	if l != nil {
		l.Items = keep(c.f, l.Items)
	}
	return l, err
}

func (c filteredServices) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return c.f.watch(c.ServiceInterface.Watch(ctx, opts))
}

type filteredEndpoints struct {
	corev1client.EndpointsInterface
	f rangeFilter
}

func (c filteredEndpoints) List(ctx context.Context, opts metav1.ListOptions) (*corev1.EndpointsList, error) {
	l, err := c.EndpointsInterface.List(ctx, opts)
	if l != nil {
		l.Items = keep(c.f, l.Items)
	}
	return l, err
}

func (c filteredEndpoints) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return c.f.watch(c.EndpointsInterface.Watch(ctx, opts))
}

type filteredReplicaSets struct {
	appsv1client.ReplicaSetInterface
	f rangeFilter
}

func (c filteredReplicaSets) List(ctx context.Context, opts metav1.ListOptions) (*appsv1.ReplicaSetList, error) {
	l, err := c.ReplicaSetInterface.List(ctx, opts)
	if l != nil {
		l.Items = keep(c.f, l.Items)
	}
	return l, err
}

func (c filteredReplicaSets) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return c.f.watch(c.ReplicaSetInterface.Watch(ctx, opts))
}

type filteredDeployments struct {
	appsv1client.DeploymentInterface
	f rangeFilter
}

func (c filteredDeployments) List(ctx context.Context, opts metav1.ListOptions) (*appsv1.DeploymentList, error) {
	l, err := c.DeploymentInterface.List(ctx, opts)
	if l != nil {
		l.Items = keep(c.f, l.Items)
	}
	return l, err
}

func (c filteredDeployments) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return c.f.watch(c.DeploymentInterface.Watch(ctx, opts))
}

type filteredEndpointSlices struct {
	discoveryv1client.EndpointSliceInterface
	f rangeFilter
}

func (c filteredEndpointSlices) List(ctx context.Context, opts metav1.ListOptions) (*discoveryv1.EndpointSliceList, error) {
	l, err := c.EndpointSliceInterface.List(ctx, opts)
	if l != nil {
		l.Items = keep(c.f, l.Items)
	}
	return l, err
}

func (c filteredEndpointSlices) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return c.f.watch(c.EndpointSliceInterface.Watch(ctx, opts))
}
