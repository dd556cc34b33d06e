// Package endpointslice is the EndpointSlice controller: it keeps the discovery/v1
// EndpointSlices of every Service with a selector in line with the pods the selector
// matches. It behaves like kube-controller-manager's endpointslice controller
// (pkg/controller/endpointslice, Kubernetes v1.37) because it is built on the same
// reconciler library, k8s.io/endpointslice, which decides what the slices hold and which
// writes bring them there:
//
//   - Slices carry upstream's labels, kubernetes.io/service-name and
//     endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io, so mini-kcm
//     and kube-controller-manager take over each other's slices without rewriting them.
//   - Service events sync that Service at once. Pod events go through a second queue of
//     pod projections, whose workers find the Services selecting the pod and sync them
//     after --endpointslice-updates-batch-period. Changes to our slices made by anyone
//     else sync their Service after at least a second, so that a burst is one sync.
//   - The library's EndpointSliceTracker remembers the generation of every slice we
//     wrote: a sync that finds the cache older than that fails as "stale" and is retried
//     with backoff, rather than acting on what it no longer is.
//   - Node changes that move zones or readiness recompute the topology hints of the
//     Services that use them.
//
// One deliberate addition: mini-kcm runs no garbage collector, so when a Service is gone
// its sync deletes the slices that Service owned, which upstream leaves to the garbage
// collector's owner-reference cascade (see sync.go).
package endpointslice

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/time/rate"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	endpointslicerec "k8s.io/endpointslice"
	endpointslicemetrics "k8s.io/endpointslice/metrics"
	"k8s.io/endpointslice/topologycache"
	endpointsliceutil "k8s.io/endpointslice/util"
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/controllers/queueworker"
)

const (
	// Name is the controller's canonical name (metrics, logs, cache-sync reports and
	// its client's user agent), as upstream names it.
	Name = "endpointslice-controller"
	// ComponentName is the source of the controller's events, as upstream spells it.
	ComponentName = "endpoint-slice-controller"
	// ManagedBy is the value of the endpointslice.kubernetes.io/managed-by label on the
	// slices this controller owns: upstream's, so that either controller recognises the
	// other's slices as its own.
	ManagedBy = "endpointslice-controller.k8s.io"

	// maxRetries is how often a Service is retried before it is dropped. With the
	// service queue's backoff (1s doubling up to 1000s) that is about an hour; a dropped
	// Service is synced again at its next event.
	maxRetries = 15

	// syncBackOff and maxSyncBackOff bound the service queue's per-key backoff:
	// upstream's, 200 times the default 5ms start, because one failed sync can mean
	// many slice writes and a quick retry would only hammer the apiserver.
	syncBackOff    = 1 * time.Second
	maxSyncBackOff = 1000 * time.Second

	// sliceChangeMinSyncDelay is the least delay before syncing a Service after one of
	// its slices changed under us, so that changes to several slices become one sync.
	// A longer --endpointslice-updates-batch-period wins.
	sliceChangeMinSyncDelay = 1 * time.Second

	// topologyKey is the only key of the topology queue: every node change leads to
	// one recomputation of the node distribution.
	topologyKey = "topology"
)

// Controller keeps the EndpointSlices of selector-based Services in line with their pods.
type Controller struct {
	// client deletes the slices of deleted Services; the reconciler writes with it too.
	client kubernetes.Interface
	// recorder emits the FailedToListPods, FailedToListEndpointSlices and
	// FailedToUpdateEndpointSlices warnings; the reconciler emits its own events on it.
	recorder record.EventRecorder
	// caches reports which informers are still syncing; nil is fine (tests).
	caches *controllers.CacheSyncTracker
	// syncs records the syncs in progress for the stuck-sync check; nil is fine (tests).
	syncs *controllers.InFlightSyncs
	// fence parks the keys whose writes it refused until it reopens (queueworker).
	fence controllers.WriteFence

	// serviceLister, podLister, nodeLister and sliceLister read the shared caches.
	serviceLister corelisters.ServiceLister
	podLister     corelisters.PodLister
	nodeLister    corelisters.NodeLister
	sliceLister   discoverylisters.EndpointSliceLister
	// servicesSynced, podsSynced, nodesSynced and slicesSynced report whether our
	// handlers have seen each informer's initial list.
	servicesSynced cache.InformerSynced
	podsSynced     cache.InformerSynced
	nodesSynced    cache.InformerSynced
	slicesSynced   cache.InformerSynced

	// reconciler (the library) computes and writes a Service's slices.
	reconciler *endpointslicerec.Reconciler
	// sliceTracker remembers the generation of each slice we wrote or deleted, to tell
	// a stale cache, and our own changes, from somebody else's.
	sliceTracker *endpointsliceutil.EndpointSliceTracker
	// triggerTimes computes the endpoints.kubernetes.io/last-change-trigger-time
	// annotation.
	triggerTimes *endpointsliceutil.TriggerTimeTracker
	// topologyCache tracks the nodes' zones and CPUs, for topology-aware hints.
	topologyCache *topologycache.TopologyCache

	// queue holds the keys (namespace/name) of Services to sync.
	queue *queueworker.Queue[string]
	// podQueue holds pod projections waiting to be matched against the Services of
	// their namespace, which can be costly and so is kept off the informer's goroutine.
	podQueue *queueworker.Queue[*endpointsliceutil.PodProjectionKey]
	// topologyQueue holds topologyKey while the node distribution needs recomputing.
	topologyQueue *queueworker.Queue[string]
	// batchPeriod delays syncs caused by pod events.
	batchPeriod time.Duration
}

// NewController wires the controller to the given informers. It does not start them.
func NewController(ctx context.Context, podInformer coreinformers.PodInformer, serviceInformer coreinformers.ServiceInformer,
	nodeInformer coreinformers.NodeInformer, sliceInformer discoveryinformers.EndpointSliceInformer,
	client kubernetes.Interface, recorder record.EventRecorder, maxEndpointsPerSlice int32, batchPeriod time.Duration) (*Controller, error) {
	endpointslicemetrics.RegisterMetrics()
	c := &Controller{
		client:        client,
		recorder:      recorder,
		serviceLister: serviceInformer.Lister(),
		podLister:     podInformer.Lister(),
		nodeLister:    nodeInformer.Lister(),
		sliceLister:   sliceInformer.Lister(),
		sliceTracker:  endpointsliceutil.NewEndpointSliceTracker(),
		triggerTimes:  endpointsliceutil.NewTriggerTimeTracker(),
		topologyCache: topologycache.NewTopologyCache(),
		batchPeriod:   batchPeriod,
	}
	// PreferSameTrafficDistribution is GA and locked on in Kubernetes v1.37.
	c.reconciler = endpointslicerec.NewReconciler(client, c.nodeLister, maxEndpointsPerSlice, c.sliceTracker,
		c.topologyCache, recorder, ManagedBy, endpointslicerec.WithPreferSameTrafficDistributionEnabled(true))

	retry := queueworker.Retry{MaxRetries: maxRetries, Quiet: isStaleCache}
	c.queue = &queueworker.Queue[string]{
		TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedMaxOfRateLimiter(
				workqueue.NewTypedItemExponentialFailureRateLimiter[string](syncBackOff, maxSyncBackOff),
				// 10 qps, 100 burst over all keys: only the speed of retries.
				&workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
			),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "endpoint_slice"},
		),
		Controller: Name,
		Sync:       c.syncService,
		Retry:      retry,
	}
	// Pod projections only fan out to Service keys, and the topology queue only to
	// Services; the Service syncs are what the sync metrics count.
	c.podQueue = queueworker.NewQueue("endpoint_slice_pods", Name, c.syncPod, queueworker.Retry{MaxRetries: maxRetries})
	c.podQueue.Unrecorded = true
	c.topologyQueue = queueworker.NewQueue("endpoint_slice_topology", Name, c.syncTopology, queueworker.Retry{})
	c.topologyQueue.Unrecorded = true

	services, err := serviceInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueService,
		UpdateFunc: func(_, cur any) { c.enqueueService(cur) },
		DeleteFunc: c.enqueueService,
	})
	if err != nil {
		return nil, fmt.Errorf("adding service event handler: %w", err)
	}
	pods, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onPodEvent(nil, obj) },
		UpdateFunc: c.onPodEvent,
		DeleteFunc: func(obj any) { c.onPodEvent(obj, nil) },
	})
	if err != nil {
		return nil, fmt.Errorf("adding pod event handler: %w", err)
	}
	logger := klog.FromContext(ctx)
	slices, err := sliceInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onSliceAdd,
		UpdateFunc: func(oldObj, newObj any) { c.onSliceUpdate(logger, oldObj, newObj) },
		DeleteFunc: c.onSliceDelete,
	})
	if err != nil {
		return nil, fmt.Errorf("adding endpointslice event handler: %w", err)
	}
	nodes, err := nodeInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.topologyQueue.Add(topologyKey) },
		UpdateFunc: c.onNodeUpdate,
		DeleteFunc: func(any) { c.topologyQueue.Add(topologyKey) },
	})
	if err != nil {
		return nil, fmt.Errorf("adding node event handler: %w", err)
	}
	c.servicesSynced = services.HasSynced
	c.podsSynced = pods.HasSynced
	c.slicesSynced = slices.HasSynced
	c.nodesSynced = nodes.HasSynced
	return c, nil
}

// Run waits for the caches, starts workers Service workers, as many pod workers and
// topology workers, and blocks until ctx is done. It returns only after every worker
// has stopped.
func (c *Controller) Run(ctx context.Context, workers int) {
	klog.FromContext(ctx).Info("Pod-driven syncs are batched", "batchPeriod", c.batchPeriod)
	queueworker.Run(ctx, queueworker.Spec{
		Controller: Name,
		Workers:    workers,
		Caches:     c.caches,
		Informers: []controllers.InformerSync{
			{Name: "pods", Synced: c.podsSynced},
			{Name: "services", Synced: c.servicesSynced},
			{Name: "endpointslices", Synced: c.slicesSynced},
			{Name: "nodes", Synced: c.nodesSynced},
		},
		Syncs:  c.syncs,
		Fence:  c.fence,
		Queues: []queueworker.Loop{c.queue, c.podQueue, c.topologyQueue},
	})
}

// enqueueService queues the Service of a Service event.
func (c *Controller) enqueueService(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("getting key of %T: %w", obj, err))
		return
	}
	c.queue.Add(key)
}

// onPodEvent queues the projection of a pod add (oldObj nil), update or delete (newObj
// nil) for the pod workers; the library returns nil for a change no slice can reflect.
func (c *Controller) onPodEvent(oldObj, newObj any) {
	if key := endpointsliceutil.GetPodUpdateProjectionKey(oldObj, newObj); key != nil {
		c.podQueue.Add(key)
	}
}

// syncPod queues, after the batch period, every Service whose slices a pod change may
// change. A Service already waiting keeps its earlier time, which is what batches the
// pod changes of one period into one sync.
func (c *Controller) syncPod(ctx context.Context, key *endpointsliceutil.PodProjectionKey) error {
	services, err := endpointsliceutil.GetServicesToUpdate(c.serviceLister, key)
	if err != nil {
		return err
	}
	klog.FromContext(ctx).V(4).Info("Pod change affects services", "namespace", key.Namespace, "services", services.UnsortedList())
	for service := range services {
		c.queue.AddAfter(service, c.batchPeriod)
	}
	return nil
}

// onSliceAdd syncs the Service of a slice of ours that we did not just write: one made
// by somebody else, or, at start, every slice, since the tracker knows none yet. That
// first round is also what deletes the slices of Services deleted while no controller
// ran.
func (c *Controller) onSliceAdd(obj any) {
	slice, ok := obj.(*discovery.EndpointSlice)
	if !ok || slice == nil {
		utilruntime.HandleError(fmt.Errorf("unexpected object %T in an EndpointSlice add event", obj))
		return
	}
	if c.reconciler.ManagedByController(slice) && c.sliceTracker.ShouldSync(slice) {
		c.queueServiceForSlice(slice)
	}
}

// onSliceUpdate syncs the Service of a slice that somebody else changed, that changed
// hands to or from us, or that moved to another Service (users may relabel a slice;
// the generation does not change with labels). Both Services sync in that last case.
func (c *Controller) onSliceUpdate(logger klog.Logger, oldObj, newObj any) {
	old, oldOK := oldObj.(*discovery.EndpointSlice)
	cur, curOK := newObj.(*discovery.EndpointSlice)
	if !oldOK || !curOK || old == nil || cur == nil {
		utilruntime.HandleError(fmt.Errorf("unexpected objects %T, %T in an EndpointSlice update event", oldObj, newObj))
		return
	}
	if oldService, curService := old.Labels[discovery.LabelServiceName], cur.Labels[discovery.LabelServiceName]; oldService != curService {
		logger.Info("EndpointSlice moved to another Service", "endpointslice", klog.KObj(cur), "oldService", oldService, "newService", curService)
		c.queueServiceForSlice(cur)
		c.queueServiceForSlice(old)
		return
	}
	if c.reconciler.ManagedByChanged(old, cur) || (c.reconciler.ManagedByController(cur) && c.sliceTracker.ShouldSync(cur)) {
		c.queueServiceForSlice(cur)
	}
}

// onSliceDelete syncs the Service of a slice of ours that we did not delete ourselves,
// so that it comes back.
func (c *Controller) onSliceDelete(obj any) {
	slice, ok := queueworker.DeletedObject[*discovery.EndpointSlice](obj)
	if !ok || !c.reconciler.ManagedByController(slice) || !c.sliceTracker.Has(slice) {
		return
	}
	// HandleDeletion returns false if we did not expect this deletion.
	if !c.sliceTracker.HandleDeletion(slice) {
		c.queueServiceForSlice(slice)
	}
}

// queueServiceForSlice queues the Service a slice belongs to, after the larger of
// sliceChangeMinSyncDelay and the batch period.
func (c *Controller) queueServiceForSlice(slice *discovery.EndpointSlice) {
	key, err := endpointslicerec.ServiceControllerKey(slice)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("getting the Service key of EndpointSlice %s/%s: %w", slice.Namespace, slice.Name, err))
		return
	}
	c.queue.AddAfter(key, max(sliceChangeMinSyncDelay, c.batchPeriod))
}

// onNodeUpdate recomputes the node distribution when a node's readiness or zone
// changed; the zone label may come late, from a cloud provider.
func (c *Controller) onNodeUpdate(oldObj, newObj any) {
	old, oldOK := oldObj.(*v1.Node)
	cur, curOK := newObj.(*v1.Node)
	if !oldOK || !curOK {
		return
	}
	if isNodeReady(old) != isNodeReady(cur) || old.Labels[v1.LabelTopologyZone] != cur.Labels[v1.LabelTopologyZone] {
		c.topologyQueue.Add(topologyKey)
	}
}

// isNodeReady reports whether the node's Ready condition is True.
func isNodeReady(node *v1.Node) bool {
	for _, cond := range node.Status.Conditions {
		if cond.Type == v1.NodeReady {
			return cond.Status == v1.ConditionTrue
		}
	}
	return false
}
