// Package endpoints is the Endpoints controller: it keeps a core/v1 Endpoints object for
// every Service with a selector, listing the IPs and ports of the pods the selector
// matches, split into ready and not-ready addresses. It behaves like kube-controller-
// manager's endpoint controller (pkg/controller/endpoint, Kubernetes v1.37):
//
//   - Service events sync that Service at once; Endpoints deletions sync their Service, so
//     a deleted Endpoints comes back (other edits are overwritten at the next sync).
//   - A sync that finds the cache still holding the Endpoints our last update replaced
//     waits, and the update event that brings the cache past it syncs the Service at
//     once; upstream retries it with the queue's backoff instead.
//   - Pod events go through a second queue of "pod projections", whose workers find the
//     Services selecting the pod and sync them after --endpoint-updates-batch-period, so
//     that a burst of pod changes becomes one write per Service.
//   - On start, every existing Endpoints is queued once, so Endpoints whose Service was
//     deleted while no controller ran are deleted too.
package endpoints

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	endpointsliceutil "k8s.io/endpointslice/util"
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/controllers/queueworker"
	"github.com/mini-kcm/mini-kcm/controllers/throttle"
)

const (
	// Name is the controller's canonical name (metrics, logs, cache-sync reports and
	// its client's user agent).
	Name = "endpoints-controller"
	// ComponentName is the event source and the value of the managed-by label, as
	// upstream spells it.
	ComponentName = "endpoint-controller"

	// maxRetries is how often a key is retried before it is dropped. With the default
	// rate limiter the delays run 5ms, 10ms, ... up to 82s, about 3 minutes in all; a
	// dropped Service is synced again at its next event.
	maxRetries = 15
)

// Controller keeps the Endpoints of selector-based Services in line with their pods.
type Controller struct {
	// client writes Endpoints.
	client kubernetes.Interface
	// limiter is client's rate limiter, which lets a sync wait for it before building
	// its write; nil (a fake client) builds the write once and lets the client wait.
	limiter *throttle.Limiter
	// recorder emits FailedToCreateEndpoint and FailedToUpdateEndpoint events.
	recorder record.EventRecorder
	// caches reports which informers are still syncing; nil is fine (tests).
	caches *controllers.CacheSyncTracker
	// syncs records the syncs in progress for the stuck-sync check; nil is fine (tests).
	syncs *controllers.InFlightSyncs
	// fence parks the keys whose writes it refused until it reopens (queueworker).
	fence controllers.WriteFence

	// serviceLister and endpointsLister read the shared informer caches.
	serviceLister   corelisters.ServiceLister
	endpointsLister corelisters.EndpointsLister
	// serviceIndexer finds the Services that may select a pod (serviceSelectorIndex).
	serviceIndexer cache.Indexer
	// podIndexer reads pods from the shared informer's cache, finding the pods of a
	// Service by label (podLabelIndex).
	podIndexer cache.Indexer
	// servicesSynced, podsSynced and endpointsSynced report whether our handlers have
	// seen each informer's initial list. Fields, so that tests can replace them.
	servicesSynced  cache.InformerSynced
	podsSynced      cache.InformerSynced
	endpointsSynced cache.InformerSynced

	// queue holds the keys (namespace/name) of Services to sync. A workqueue rather than
	// a channel: a key queued many times is synced once, and never by two workers at once.
	// A failed key is retried up to maxRetries times, then dropped.
	queue *queueworker.Queue[string]
	// podQueue holds pod events waiting to be matched against the Services of their
	// namespace, which can be costly and so is kept off the informer's goroutine.
	// Projections are pointers, so every event is handled on its own.
	podQueue *queueworker.Queue[*endpointsliceutil.PodProjectionKey]
	// running is set when Run starts. Until then pod events are not queued: nothing
	// would drain them, and since projections are never deduplicated, a warm standby
	// (whose informers run for as long as it stands by) would queue one per pod event
	// without bound. Dropping them loses nothing: every Service is queued by its
	// informer's initial list and stays queued until the workers start, and a Service
	// sync reads all of its pods from the cache.
	running atomic.Bool
	// batchPeriod delays syncs caused by pod events (--endpoint-updates-batch-period).
	batchPeriod time.Duration
	// workerLoopPeriod is how long a worker waits before restarting after it returned.
	workerLoopPeriod time.Duration

	// triggerTimes computes the last-change-trigger-time annotation.
	triggerTimes *endpointsliceutil.TriggerTimeTracker
	// staleEndpoints detects an Endpoints cache that has not yet seen our last update.
	staleEndpoints *staleEndpointsTracker
}

// NewController wires the controller to the given informers. It does not start them.
func NewController(ctx context.Context, podInformer coreinformers.PodInformer, serviceInformer coreinformers.ServiceInformer,
	endpointsInformer coreinformers.EndpointsInformer, client kubernetes.Interface, recorder record.EventRecorder,
	batchPeriod time.Duration) (*Controller, error) {
	c := &Controller{
		client:           client,
		limiter:          throttle.Of(client),
		recorder:         recorder,
		serviceLister:    serviceInformer.Lister(),
		endpointsLister:  endpointsInformer.Lister(),
		batchPeriod:      batchPeriod,
		workerLoopPeriod: time.Second,
		triggerTimes:     endpointsliceutil.NewTriggerTimeTracker(),
		staleEndpoints:   newStaleEndpointsTracker(),
	}
	retry := queueworker.Retry{MaxRetries: maxRetries}
	c.queue = queueworker.NewQueue("endpoint", Name, c.syncService, retry)
	// Pod projections only fan out to Service keys; the Service syncs are what the
	// sync metrics count.
	c.podQueue = queueworker.NewQueue("endpoint_pods", Name, c.syncPod, retry)
	c.podQueue.Unrecorded = true
	if err := controllers.AddIndexerOnce(podInformer.Informer(), podLabelIndex, podLabelIndexValues); err != nil {
		return nil, fmt.Errorf("adding the pod label index: %w", err)
	}
	c.podIndexer = podInformer.Informer().GetIndexer()
	if err := controllers.AddIndexerOnce(serviceInformer.Informer(), serviceSelectorIndex, serviceSelectorIndexValues); err != nil {
		return nil, fmt.Errorf("adding the service selector index: %w", err)
	}
	c.serviceIndexer = serviceInformer.Informer().GetIndexer()

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
	// Deletions bring a deleted Endpoints back. Updates matter only to a sync waiting
	// for the cache to see our own last write; other edits to an Endpoints are
	// overwritten at the next sync of its Service, as upstream does.
	endpoints, err := endpointsInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: c.onEndpointsUpdate,
		DeleteFunc: c.enqueueService,
	})
	if err != nil {
		return nil, fmt.Errorf("adding endpoints event handler: %w", err)
	}
	c.servicesSynced = services.HasSynced
	c.podsSynced = pods.HasSynced
	c.endpointsSynced = endpoints.HasSynced
	return c, nil
}

// enqueueService queues the Service a Service or Endpoints event is about; both share
// namespace and name.
func (c *Controller) enqueueService(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("getting key of %T: %w", obj, err))
		return
	}
	c.queue.Add(key)
}

// onEndpointsUpdate queues the Service of an Endpoints whose sync waits for the cache to
// move past a version this controller replaced, now that it has (see
// staleEndpointsTracker). Resyncs, which keep the version, move nothing.
func (c *Controller) onEndpointsUpdate(oldObj, newObj any) {
	old, ok := oldObj.(*v1.Endpoints)
	cur, curOK := newObj.(*v1.Endpoints)
	if !ok || !curOK || old.ResourceVersion == cur.ResourceVersion {
		return
	}
	if c.staleEndpoints.cacheMovedPast(old) {
		c.enqueueService(cur)
	}
}

// onPodEvent queues the projection of a pod add (oldObj nil), update or delete (newObj
// nil) for the pod workers.
func (c *Controller) onPodEvent(oldObj, newObj any) {
	if !c.running.Load() {
		return
	}
	// The library reports an event without a pod itself, and returns nil for it.
	if projection := endpointsliceutil.GetPodUpdateProjectionKey(oldObj, newObj); projection != nil {
		c.podQueue.Add(projection)
	}
}

// Run waits for the caches, starts workers Service workers and as many pod workers,
// and blocks until ctx is done. It returns only after every worker has stopped.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.running.Store(true)
	klog.FromContext(ctx).Info("Pod-driven syncs are batched", "batchPeriod", c.batchPeriod)
	queueworker.Run(ctx, queueworker.Spec{
		Controller: Name,
		Workers:    workers,
		Caches:     c.caches,
		Informers: []controllers.InformerSync{
			{Name: "pods", Synced: c.podsSynced},
			{Name: "services", Synced: c.servicesSynced},
			{Name: "endpoints", Synced: c.endpointsSynced},
		},
		Syncs:      c.syncs,
		Fence:      c.fence,
		Queues:     []queueworker.Loop{c.queue, c.podQueue},
		AfterSync:  c.checkLeftoverEndpoints,
		LoopPeriod: c.workerLoopPeriod,
	})
}

// checkLeftoverEndpoints queues every existing Endpoints once, so that one whose Service
// was deleted while no controller ran is deleted too; in steady state Service deletions
// take care of that. Endpoints holding a leader-election record are skipped: they have no
// Service by design, and deleting one would force a re-election of whoever uses it.
func (c *Controller) checkLeftoverEndpoints(ctx context.Context) {
	list, err := c.endpointsLister.List(labels.Everything())
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Listing Endpoints failed; orphaned Endpoints will not be cleaned up until the next restart")
		return
	}
	for _, endpoints := range list {
		if _, ok := endpoints.Annotations[resourcelock.LeaderElectionRecordAnnotationKey]; ok {
			continue
		}
		c.enqueueService(endpoints)
	}
}

// syncPod queues, after the batch period, every Service whose Endpoints a pod event may
// change. A Service already waiting keeps its earlier time, which is what batches the
// pod events of one period into one sync.
func (c *Controller) syncPod(ctx context.Context, projection *endpointsliceutil.PodProjectionKey) error {
	keys, err := servicesToSync(c.serviceIndexer, projection)
	if err != nil {
		return err
	}
	klog.FromContext(ctx).V(4).Info("Pod event affects services", "namespace", projection.Namespace, "services", keys.UnsortedList())
	for key := range keys {
		c.queue.AddAfter(key, c.batchPeriod)
	}
	return nil
}
