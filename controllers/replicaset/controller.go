// Package replicaset is the ReplicaSet controller: it keeps the number of active pods
// that a ReplicaSet controls equal to spec.replicas, adopting matching orphans and
// releasing pods that stopped matching, and reports the pods it sees in the
// ReplicaSet's status. It behaves like kube-controller-manager v1.37.2's replicaset
// controller on the same inputs: same pods created and deleted (in the same order),
// same ownerReferences, status, conditions and events.
//
// Two mechanisms keep it from acting on a stale cache, which would create or delete
// pods twice. Expectations remember the creates and deletes issued until the pod
// informer has delivered them. A read-your-writes guard (upstream's
// StaleControllerConsistencyReplicaSet, which --feature-gates can turn off) holds a sync
// back until the informers have seen the resourceVersions this controller wrote.
package replicaset

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/controllers/controllerref"
	"github.com/mini-kcm/mini-kcm/controllers/expectations"
	"github.com/mini-kcm/mini-kcm/controllers/podcontrol"
	"github.com/mini-kcm/mini-kcm/controllers/podstate"
	"github.com/mini-kcm/mini-kcm/controllers/queueworker"
)

const (
	// Name is the controller's canonical name; it is also the event source component,
	// the client's user agent suffix and the metrics label.
	Name = "replicaset-controller"

	// BurstReplicas caps the pods created or deleted in one sync. The controller then
	// waits for the informer to deliver them (expectations) before doing more, which
	// bounds the damage of acting on a stale cache.
	BurstReplicas = 500

	// controllerUIDIndex indexes ReplicaSets by the UID of their controller (usually a
	// Deployment), to find the sibling ReplicaSets whose pods count for the
	// co-location rank without scanning every ReplicaSet.
	controllerUIDIndex = "controllerUID"
)

// controllerKind is the kind written into the controllerRef of our pods.
var controllerKind = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")

// Controller reconciles ReplicaSets with their pods.
type Controller struct {
	// client writes ReplicaSet status and reads a ReplicaSet live before adoptions.
	client kubernetes.Interface
	// podControl creates, deletes and patches pods and records the events about them.
	podControl podcontrol.Interface
	// burstReplicas caps the pods created or deleted per sync.
	burstReplicas int

	// expectations remembers, per ReplicaSet key, the pod creations and deletions
	// issued but not yet seen by the pod informer; a ReplicaSet with outstanding
	// expectations only gets its status updated.
	expectations *expectations.ControllerExpectations
	// consistency holds a sync back until the informers have caught up with the
	// resourceVersions of this controller's own writes; nil (guarding nothing) with
	// StaleControllerConsistencyReplicaSet off.
	consistency *consistencyGuard
	// features are the feature gates this controller honours.
	features controllers.Features

	// rsLister reads ReplicaSets from the shared informer's cache.
	rsLister appslisters.ReplicaSetLister
	// rsIndexer finds ReplicaSets by controller UID (controllerUIDIndex).
	rsIndexer cache.Indexer
	// podLister reads pods from the shared informer's cache.
	podLister corelisters.PodLister
	// podIndexer finds pods by controller (controllerref.PodControllerIndex), so a sync
	// reads its own pods and the namespace's orphans instead of every pod.
	podIndexer cache.Indexer

	// rsSynced and podSynced report whether each informer has completed its first
	// list, so workers never act on a partial view of the cluster.
	rsSynced  cache.InformerSynced
	podSynced cache.InformerSynced

	// queue holds "namespace/name" keys of ReplicaSets to sync; it guarantees that one
	// key is processed by at most one worker at a time. A failed key is retried with
	// per-key exponential backoff for as long as it fails: a ReplicaSet is never given
	// up on.
	queue *queueworker.Queue[string]

	// caches waits for the informers and reports which ones hang; nil (in tests) still
	// waits but reports nothing.
	caches *controllers.CacheSyncTracker
	// syncs records the syncs in progress for the stuck-sync check; nil (in tests)
	// records nothing.
	syncs *controllers.InFlightSyncs
	// fence parks the keys whose writes it refused until it reopens (queueworker).
	fence controllers.WriteFence
	// now is the clock for availability (minReadySeconds) and conditions; tests
	// replace it.
	now func() time.Time
}

// NewController builds the controller and registers its handlers and indexes on the
// given informers, which must not have been started yet. burstReplicas caps the pods
// created or deleted per sync (BurstReplicas in production); features are the gates
// from --feature-gates.
func NewController(ctx context.Context, rsInformer appsinformers.ReplicaSetInformer, podInformer coreinformers.PodInformer,
	client kubernetes.Interface, recorder record.EventRecorder, burstReplicas int, features controllers.Features) (*Controller, error) {
	logger := klog.FromContext(ctx)
	registerMetrics()

	c := &Controller{
		client:        client,
		burstReplicas: burstReplicas,
		expectations:  expectations.New(),
		features:      features,
		rsLister:      rsInformer.Lister(),
		podLister:     podInformer.Lister(),
		rsSynced:      rsInformer.Informer().HasSynced,
		podSynced:     podInformer.Informer().HasSynced,
		now:           time.Now,
	}
	c.queue = queueworker.NewQueue("replicaset", Name, c.syncReplicaSet, queueworker.Retry{Quiet: isStaleCache})
	podControl := &podcontrol.Real{Client: client, Recorder: recorder}
	if features.Enabled(StaleControllerConsistencyReplicaSet) {
		c.consistency = newConsistencyGuard(map[schema.GroupResource]resourceVersionReader{
			podsResource:        podInformer.Informer().GetStore(),
			replicaSetsResource: rsInformer.Informer().GetStore(),
		})
		podControl.OnWrite = c.podWritten
	}
	c.podControl = podControl

	if err := controllers.AddIndexerOnce(rsInformer.Informer(), controllerUIDIndex, indexByControllerUID); err != nil {
		return nil, fmt.Errorf("adding the replicaset controller-UID index: %w", err)
	}
	c.rsIndexer = rsInformer.Informer().GetIndexer()
	if err := controllerref.AddPodControllerIndexer(podInformer.Informer()); err != nil {
		return nil, fmt.Errorf("adding the pod controller index: %w", err)
	}
	c.podIndexer = podInformer.Informer().GetIndexer()

	if _, err := rsInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.addReplicaSet(logger, obj) },
		UpdateFunc: func(old, cur any) { c.updateReplicaSet(logger, old, cur) },
		DeleteFunc: func(obj any) { c.deleteReplicaSet(logger, obj) },
	}); err != nil {
		return nil, fmt.Errorf("registering replicaset handlers: %w", err)
	}
	// Every pod change wakes the owner, status changes included: the owner lists only
	// from the cache, and its status counts ready and available pods.
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.addPod(logger, obj) },
		UpdateFunc: func(old, cur any) { c.updatePod(logger, old, cur) },
		DeleteFunc: func(obj any) { c.deletePod(logger, obj) },
	}); err != nil {
		return nil, fmt.Errorf("registering pod handlers: %w", err)
	}
	return c, nil
}

// indexByControllerUID is the controllerUIDIndex function.
func indexByControllerUID(obj any) ([]string, error) {
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		return nil, nil
	}
	ref := metav1.GetControllerOfNoCopy(rs)
	if ref == nil {
		return nil, nil
	}
	return []string{string(ref.UID)}, nil
}

// podWritten records the resourceVersion of a pod this controller created or patched
// against its owning ReplicaSet, so the next sync of that ReplicaSet waits until the
// pod informer has seen the write.
func (c *Controller) podWritten(pod *v1.Pod, ref *metav1.OwnerReference) {
	if ref == nil {
		return
	}
	c.consistency.WroteAt(types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name}, ref.UID, podsResource, pod.ResourceVersion)
}

// Run waits for the caches, runs workers and blocks until ctx is cancelled; it
// returns only after every worker has finished its current key.
func (c *Controller) Run(ctx context.Context, workers int) {
	queueworker.Run(ctx, queueworker.Spec{
		Controller: Name,
		Workers:    workers,
		Caches:     c.caches,
		Informers: []controllers.InformerSync{
			{Name: "replicasets", Synced: c.rsSynced},
			{Name: "pods", Synced: c.podSynced},
		},
		Syncs:  c.syncs,
		Fence:  c.fence,
		Queues: []queueworker.Loop{c.queue},
	})
}

// isStaleCache reports the error of a sync held back until the informers caught up
// with our own writes: expected right after them, so it is retried quietly, and the
// backoff gives the informer time.
func isStaleCache(err error) bool {
	var stale *staleCacheError
	return errors.As(err, &stale)
}

// enqueue adds the ReplicaSet's key to the queue.
func (c *Controller) enqueue(rs *appsv1.ReplicaSet) {
	c.queue.Add(cacheKey(rs))
}

// cacheKey is the queue and expectations key of a ReplicaSet, "namespace/name".
func cacheKey(rs *appsv1.ReplicaSet) string {
	return rs.Namespace + "/" + rs.Name
}

// podKey is the expectations key of a pod, "namespace/name".
func podKey(pod *v1.Pod) string {
	return pod.Namespace + "/" + pod.Name
}

func (c *Controller) addReplicaSet(logger klog.Logger, obj any) {
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		return
	}
	logger.V(4).Info("Adding ReplicaSet", "replicaSet", klog.KObj(rs))
	c.enqueue(rs)
}

// updateReplicaSet enqueues the ReplicaSet on every update, our own status writes
// included. Syncing only on spec changes would be cheaper, but a ReplicaSet whose pod
// creations failed must get another chance on resync, and a sync with outstanding
// expectations costs only cache reads.
func (c *Controller) updateReplicaSet(logger klog.Logger, old, cur any) {
	oldRS, ok1 := old.(*appsv1.ReplicaSet)
	curRS, ok2 := cur.(*appsv1.ReplicaSet)
	if !ok1 || !ok2 {
		return
	}
	// A ReplicaSet deleted and recreated under the same name between two watch events
	// arrives as an update; forget the old one's expectations as if we saw the delete.
	if curRS.UID != oldRS.UID {
		c.deleteReplicaSet(logger, cache.DeletedFinalStateUnknown{Key: cacheKey(oldRS), Obj: oldRS})
	}
	if oldRS.Spec.Replicas != nil && curRS.Spec.Replicas != nil && *oldRS.Spec.Replicas != *curRS.Spec.Replicas {
		logger.V(4).Info("ReplicaSet desired pod count changed", "replicaSet", klog.KObj(curRS),
			"oldReplicas", *oldRS.Spec.Replicas, "newReplicas", *curRS.Spec.Replicas)
	}
	c.enqueue(curRS)
}

func (c *Controller) deleteReplicaSet(logger klog.Logger, obj any) {
	rs, ok := queueworker.DeletedObject[*appsv1.ReplicaSet](obj)
	if !ok {
		return
	}
	key := cacheKey(rs)
	logger.V(4).Info("Deleting ReplicaSet", "replicaSet", klog.KObj(rs))
	// A ReplicaSet recreated under the same name must start without the old one's
	// expectations or pending writes.
	c.consistency.Clear(types.NamespacedName{Namespace: rs.Namespace, Name: rs.Name}, rs.UID)
	c.expectations.Delete(logger, key)
	c.queue.Add(key)
}

// addPod wakes the pod's owner and counts the pod as an observed creation, or, for an
// orphan, wakes every ReplicaSet that might adopt it.
func (c *Controller) addPod(logger klog.Logger, obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	if pod.DeletionTimestamp != nil {
		// After a restart of the controller a pod may first appear already being
		// deleted; it must count as a deletion, never as a creation.
		c.deletePod(logger, pod)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		rs := c.resolveControllerRef(pod.Namespace, ref)
		if rs == nil {
			return
		}
		logger.V(4).Info("Pod created", "pod", klog.KObj(pod), "replicaSet", klog.KObj(rs))
		c.expectations.CreationObserved(logger, cacheKey(rs))
		c.enqueue(rs)
		return
	}
	// An orphan: no controller is waiting for its creation, but any matching
	// ReplicaSet may want to adopt it.
	rss := c.replicaSetsSelecting(logger, pod)
	if len(rss) == 0 {
		return
	}
	logger.V(4).Info("Orphan pod created", "pod", klog.KObj(pod))
	for _, rs := range rss {
		c.enqueue(rs)
	}
}

// updatePod wakes the ReplicaSets a pod change matters to: its owner, its previous
// owner if the controllerRef changed, and for an orphan every ReplicaSet that might
// adopt it now.
func (c *Controller) updatePod(logger klog.Logger, old, cur any) {
	oldPod, ok1 := old.(*v1.Pod)
	curPod, ok2 := cur.(*v1.Pod)
	if !ok1 || !ok2 {
		return
	}
	if curPod.ResourceVersion == oldPod.ResourceVersion {
		// A periodic resync replays every pod; two versions of a pod always differ
		// in resourceVersion.
		return
	}

	labelsChanged := !reflect.DeepEqual(curPod.Labels, oldPod.Labels)
	if curPod.DeletionTimestamp != nil {
		// A graceful delete first sets deletionTimestamp and removes the pod only
		// when the kubelet is done. The ReplicaSet should replace the pod now, not
		// after the grace period, so the update counts as the delete. (Expectations
		// count each pod key once, so the later delete event is harmless.)
		c.deletePod(logger, curPod)
		if labelsChanged {
			// The pod may have belonged to another ReplicaSet under its old labels.
			c.deletePod(logger, oldPod)
		}
		return
	}

	curRef := metav1.GetControllerOfNoCopy(curPod)
	oldRef := metav1.GetControllerOfNoCopy(oldPod)
	refChanged := !reflect.DeepEqual(curRef, oldRef)
	if refChanged && oldRef != nil {
		// The old owner lost a pod it may have counted.
		if rs := c.resolveControllerRef(oldPod.Namespace, oldRef); rs != nil {
			c.enqueue(rs)
		}
	}

	if curRef != nil {
		rs := c.resolveControllerRef(curPod.Namespace, curRef)
		if rs == nil {
			return
		}
		logger.V(4).Info("Pod updated", "pod", klog.KObj(curPod), "replicaSet", klog.KObj(rs))
		c.enqueue(rs)
		// Nothing will tell us when a newly ready pod has been ready for
		// minReadySeconds, so look again then to count it as available. The sync
		// itself also requeues for the earliest such pod, which covers pods whose
		// readiness changed while this key was already queued.
		if !podstate.IsReady(oldPod) && podstate.IsReady(curPod) && rs.Spec.MinReadySeconds > 0 {
			logger.V(2).Info("Pod will be enqueued after a while for availability check",
				"duration", rs.Spec.MinReadySeconds, "pod", klog.KObj(curPod), "replicaSet", klog.KObj(rs))
			c.queue.AddAfter(cacheKey(rs), time.Duration(rs.Spec.MinReadySeconds)*time.Second)
		}
		return
	}

	// An orphan whose labels or controllerRef changed may now match some ReplicaSet.
	if labelsChanged || refChanged {
		rss := c.replicaSetsSelecting(logger, curPod)
		if len(rss) == 0 {
			return
		}
		logger.V(4).Info("Orphan pod updated", "pod", klog.KObj(curPod))
		for _, rs := range rss {
			c.enqueue(rs)
		}
	}
}

// deletePod counts the deletion of a pod against its owner's expectations and wakes the
// owner. obj is a *v1.Pod or a tombstone (cache.DeletedFinalStateUnknown) whose pod may
// be stale: if its labels changed before the missed delete, a new owner only learns of
// it on resync. Orphans concern no one.
func (c *Controller) deletePod(logger klog.Logger, obj any) {
	pod, ok := queueworker.DeletedObject[*v1.Pod](obj)
	if !ok {
		return
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil {
		return
	}
	rs := c.resolveControllerRef(pod.Namespace, ref)
	if rs == nil {
		return
	}
	key := cacheKey(rs)
	logger.V(4).Info("Pod deleted", "pod", klog.KObj(pod), "deletionTimestamp", pod.DeletionTimestamp, "replicaSet", klog.KObj(rs))
	c.expectations.DeletionObserved(logger, key, podKey(pod))
	c.queue.Add(key)
}

// resolveControllerRef returns the ReplicaSet a controllerRef points to, or nil if it
// is not a ReplicaSet, is not in the cache, or is a different ReplicaSet of the same
// name (the UID differs).
func (c *Controller) resolveControllerRef(namespace string, ref *metav1.OwnerReference) *appsv1.ReplicaSet {
	// Look up by name, then compare UIDs: the cache is not indexed by UID. Other kinds
	// are not ours, whatever their name.
	if ref.Kind != controllerKind.Kind {
		return nil
	}
	rs, err := c.rsLister.ReplicaSets(namespace).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		return nil
	}
	return rs
}

// replicaSetsSelecting returns the ReplicaSets in the pod's namespace whose (non-empty)
// selector matches the pod's labels.
func (c *Controller) replicaSetsSelecting(logger klog.Logger, pod *v1.Pod) []*appsv1.ReplicaSet {
	rss, err := c.rsLister.GetPodReplicaSets(pod)
	if err != nil {
		// The lister reports "no ReplicaSets" as an error too.
		return nil
	}
	if len(rss) > 1 {
		// The controllerRef makes this harmless (only one can adopt the pod), but it
		// is almost certainly a user error worth seeing.
		logger.Info("More than one ReplicaSet selects a pod; check for overlapping selectors",
			"pod", klog.KObj(pod), "labels", pod.Labels, "replicaSets", klog.KObjSlice(rss))
	}
	return rss
}

// replicaSetsWithSameController returns the ReplicaSets controlled by the same object
// (typically the Deployment) as rs, rs included; none if rs has no controller.
func (c *Controller) replicaSetsWithSameController(logger klog.Logger, rs *appsv1.ReplicaSet) ([]*appsv1.ReplicaSet, error) {
	ref := metav1.GetControllerOfNoCopy(rs)
	if ref == nil {
		return nil, nil
	}
	objs, err := c.rsIndexer.ByIndex(controllerUIDIndex, string(ref.UID))
	if err != nil {
		return nil, fmt.Errorf("listing ReplicaSets controlled by %s: %w", ref.UID, err)
	}
	related := make([]*appsv1.ReplicaSet, 0, len(objs))
	for _, obj := range objs {
		if other, ok := obj.(*appsv1.ReplicaSet); ok {
			related = append(related, other)
		}
	}
	logger.V(4).Info("Found related ReplicaSets", "replicaSet", klog.KObj(rs), "relatedReplicaSets", klog.KObjSlice(related))
	return related, nil
}
