// Package deployment is the Deployment controller: it rolls a Deployment's pod template
// out through ReplicaSets, one ReplicaSet per template revision, following the
// Deployment's strategy (RollingUpdate or Recreate), and reports progress in the
// Deployment's status and conditions. It behaves like kube-controller-manager v1.37.2's
// deployment controller: same ReplicaSet names, labels and annotations, same rollout
// arithmetic, same conditions and events.
//
// The controller only ever touches ReplicaSets through the apiserver. Pods are created
// and deleted by the ReplicaSet controller; this controller reads pods only to know when
// a Recreate rollout may start its new pods.
package deployment

import (
	"context"
	"fmt"
	"reflect"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/controllers/controllerref"
	"github.com/mini-kcm/mini-kcm/controllers/queueworker"
)

const (
	// Name is the controller's canonical name; it is also the event source component,
	// the client's user agent suffix and the metrics label.
	Name = "deployment-controller"

	// maxRetries is how often a failing key is retried before it is dropped. With the
	// default per-item backoff (5ms doubling) the last retry comes about 82s after the
	// first failure; a dropped Deployment is synced again on its next event.
	maxRetries = 15
)

// controllerKind is the kind written into the controllerRef of our ReplicaSets.
var controllerKind = appsv1.SchemeGroupVersion.WithKind("Deployment")

// Controller reconciles Deployments with their ReplicaSets.
type Controller struct {
	// client writes ReplicaSets (create, scale, adopt, delete) and Deployment status.
	client kubernetes.Interface
	// recorder emits the controller's events (ScalingReplicaSet, rollback results, ...).
	recorder record.EventRecorder

	// dLister reads Deployments from the shared informer's cache.
	dLister appslisters.DeploymentLister
	// rsLister reads ReplicaSets from the shared informer's cache.
	rsLister appslisters.ReplicaSetLister
	// podIndexer finds pods by their controller (ReplicaSet) without a full list; only
	// Recreate rollouts need pods.
	podIndexer cache.Indexer

	// dSynced, rsSynced and podSynced report whether each informer has completed its
	// first list, so workers never act on a partial view of the cluster.
	dSynced   cache.InformerSynced
	rsSynced  cache.InformerSynced
	podSynced cache.InformerSynced

	// queue holds "namespace/name" keys of Deployments to sync; it guarantees that one
	// key is processed by at most one worker at a time.
	// A failed key is retried with backoff up to maxRetries times, then dropped.
	queue *queueworker.Queue[string]

	// features are the feature gates this controller honours.
	features controllers.Features

	// caches waits for the informers and reports which ones hang; nil (in tests) still
	// waits but reports nothing.
	caches *controllers.CacheSyncTracker
	// syncs records the syncs in progress for the stuck-sync check; nil (in tests)
	// records nothing.
	syncs *controllers.InFlightSyncs
	// fence parks the keys whose writes it refused until it reopens (queueworker).
	fence controllers.WriteFence
	// now is the clock for condition timestamps and progress deadlines; tests replace it.
	now func() time.Time
}

// NewController builds the controller and registers its event handlers on the given
// informers. The informers must not have been started yet if they are shared, so the
// pod index is in place before the first pod arrives. features are the gates from
// --feature-gates.
func NewController(ctx context.Context, dInformer appsinformers.DeploymentInformer, rsInformer appsinformers.ReplicaSetInformer,
	podInformer coreinformers.PodInformer, client kubernetes.Interface, recorder record.EventRecorder, features controllers.Features) (*Controller, error) {
	logger := klog.FromContext(ctx)
	c := &Controller{
		client:    client,
		recorder:  recorder,
		features:  features,
		dLister:   dInformer.Lister(),
		rsLister:  rsInformer.Lister(),
		dSynced:   dInformer.Informer().HasSynced,
		rsSynced:  rsInformer.Informer().HasSynced,
		podSynced: podInformer.Informer().HasSynced,
		now:       time.Now,
	}
	c.queue = queueworker.NewQueue("deployment", Name, c.syncDeployment, queueworker.Retry{
		MaxRetries: maxRetries,
		Permanent:  isNamespaceTerminating,
	})

	if err := controllerref.AddPodControllerIndexer(podInformer.Informer()); err != nil {
		return nil, fmt.Errorf("adding the pod controller index: %w", err)
	}
	c.podIndexer = podInformer.Informer().GetIndexer()

	if _, err := dInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.addDeployment(logger, obj) },
		UpdateFunc: func(_, cur any) { c.addDeployment(logger, cur) },
		DeleteFunc: func(obj any) { c.deleteDeployment(logger, obj) },
	}); err != nil {
		return nil, fmt.Errorf("registering deployment handlers: %w", err)
	}
	if _, err := rsInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.addReplicaSet(logger, obj) },
		UpdateFunc: func(old, cur any) { c.updateReplicaSet(logger, old, cur) },
		DeleteFunc: func(obj any) { c.deleteReplicaSet(logger, obj) },
	}); err != nil {
		return nil, fmt.Errorf("registering replicaset handlers: %w", err)
	}
	// Only pod deletions matter: they are what a Recreate rollout waits for. Every
	// other pod change reaches us through the owning ReplicaSet's status.
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) { c.deletePod(logger, obj) },
	}); err != nil {
		return nil, fmt.Errorf("registering pod handlers: %w", err)
	}
	return c, nil
}

// Run waits for the caches, runs workers and blocks until ctx is cancelled; it
// returns only after every worker has finished its current key.
func (c *Controller) Run(ctx context.Context, workers int) {
	queueworker.Run(ctx, queueworker.Spec{
		Controller: Name,
		Workers:    workers,
		Caches:     c.caches,
		Informers: []controllers.InformerSync{
			{Name: "deployments", Synced: c.dSynced},
			{Name: "replicasets", Synced: c.rsSynced},
			{Name: "pods", Synced: c.podSynced},
		},
		Syncs:  c.syncs,
		Fence:  c.fence,
		Queues: []queueworker.Loop{c.queue},
	})
}

// isNamespaceTerminating reports the error of a create in a terminating namespace,
// which refuses every create: retrying cannot help, so the key is forgotten.
func isNamespaceTerminating(err error) bool {
	return apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}

func (c *Controller) addDeployment(logger klog.Logger, obj any) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok {
		return
	}
	logger.V(4).Info("Deployment changed", "deployment", klog.KObj(d))
	c.enqueue(d)
}

func (c *Controller) deleteDeployment(logger klog.Logger, obj any) {
	d, ok := queueworker.DeletedObject[*appsv1.Deployment](obj)
	if !ok {
		return
	}
	logger.V(4).Info("Deployment deleted", "deployment", klog.KObj(d))
	// The sync finds nothing in the cache and stops; enqueueing keeps the queue's
	// per-key state from outliving the object.
	c.enqueue(d)
}

// addReplicaSet wakes the Deployment that controls a new ReplicaSet or, for an orphan,
// every Deployment that might adopt it.
func (c *Controller) addReplicaSet(logger klog.Logger, obj any) {
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		return
	}
	if rs.DeletionTimestamp != nil {
		// After a restart a ReplicaSet may first show up already being deleted.
		c.deleteReplicaSet(logger, rs)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(rs); ref != nil {
		if d := c.resolveControllerRef(rs.Namespace, ref); d != nil {
			logger.V(4).Info("ReplicaSet added", "replicaSet", klog.KObj(rs), "deployment", klog.KObj(d))
			c.enqueue(d)
		}
		return
	}
	for _, d := range c.deploymentsForReplicaSet(logger, rs) {
		logger.V(4).Info("Orphan ReplicaSet added", "replicaSet", klog.KObj(rs), "deployment", klog.KObj(d))
		c.enqueue(d)
	}
}

// updateReplicaSet wakes the old and the new controller when the controllerRef changed,
// the controller when one is set, and otherwise the Deployments that might adopt the
// orphan, if its labels or ownership changed.
func (c *Controller) updateReplicaSet(logger klog.Logger, old, cur any) {
	oldRS, ok1 := old.(*appsv1.ReplicaSet)
	curRS, ok2 := cur.(*appsv1.ReplicaSet)
	if !ok1 || !ok2 || curRS.ResourceVersion == oldRS.ResourceVersion {
		// Resyncs replay unchanged objects; two versions always differ in resourceVersion.
		return
	}
	curRef := metav1.GetControllerOfNoCopy(curRS)
	oldRef := metav1.GetControllerOfNoCopy(oldRS)
	refChanged := !reflect.DeepEqual(curRef, oldRef)
	if refChanged && oldRef != nil {
		if d := c.resolveControllerRef(oldRS.Namespace, oldRef); d != nil {
			c.enqueue(d)
		}
	}
	if curRef != nil {
		if d := c.resolveControllerRef(curRS.Namespace, curRef); d != nil {
			logger.V(4).Info("ReplicaSet updated", "replicaSet", klog.KObj(curRS), "deployment", klog.KObj(d))
			c.enqueue(d)
		}
		return
	}
	if refChanged || !reflect.DeepEqual(curRS.Labels, oldRS.Labels) {
		for _, d := range c.deploymentsForReplicaSet(logger, curRS) {
			logger.V(4).Info("Orphan ReplicaSet updated", "replicaSet", klog.KObj(curRS), "deployment", klog.KObj(d))
			c.enqueue(d)
		}
	}
}

// deleteReplicaSet wakes the Deployment that controlled the ReplicaSet; nobody cares
// about deleted orphans.
func (c *Controller) deleteReplicaSet(logger klog.Logger, obj any) {
	rs, ok := queueworker.DeletedObject[*appsv1.ReplicaSet](obj)
	if !ok {
		return
	}
	ref := metav1.GetControllerOfNoCopy(rs)
	if ref == nil {
		return
	}
	if d := c.resolveControllerRef(rs.Namespace, ref); d != nil {
		logger.V(4).Info("ReplicaSet deleted", "replicaSet", klog.KObj(rs), "deployment", klog.KObj(d))
		c.enqueue(d)
	}
}

// deletePod wakes a Recreate Deployment whose old pods are going away, because it may
// start the new pods only once they are all gone. RollingUpdate Deployments follow
// their ReplicaSets' status instead.
func (c *Controller) deletePod(logger klog.Logger, obj any) {
	pod, ok := queueworker.DeletedObject[*corev1.Pod](obj)
	if !ok {
		return
	}
	d := c.deploymentForPod(logger, pod)
	if d == nil || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		return
	}
	logger.V(4).Info("Pod deleted", "pod", klog.KObj(pod), "deployment", klog.KObj(d))
	c.enqueue(d)
}

// deploymentForPod follows the pod's controllerRef to a ReplicaSet and that one's to a
// Deployment, checking UIDs at each step.
func (c *Controller) deploymentForPod(logger klog.Logger, pod *corev1.Pod) *appsv1.Deployment {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return nil
	}
	rs, err := c.rsLister.ReplicaSets(pod.Namespace).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		logger.V(4).Info("Cannot get the ReplicaSet of a pod", "pod", klog.KObj(pod), "replicaSet", ref.Name, "err", err)
		return nil
	}
	rsRef := metav1.GetControllerOfNoCopy(rs)
	if rsRef == nil {
		return nil
	}
	return c.resolveControllerRef(rs.Namespace, rsRef)
}

// resolveControllerRef returns the Deployment a controllerRef points to, or nil if the
// reference is of another kind or the Deployment under that name has another UID
// (the one referenced was deleted and a new one took its name).
func (c *Controller) resolveControllerRef(namespace string, ref *metav1.OwnerReference) *appsv1.Deployment {
	if ref.Kind != controllerKind.Kind {
		return nil
	}
	d, err := c.dLister.Deployments(namespace).Get(ref.Name)
	if err != nil || d.UID != ref.UID {
		return nil
	}
	return d
}

// deploymentsForReplicaSet returns the Deployments whose selector matches an orphan
// ReplicaSet's labels. More than one is a user error (overlapping selectors); each gets
// a chance, and the controllerRef makes sure only one wins.
func (c *Controller) deploymentsForReplicaSet(logger klog.Logger, rs *appsv1.ReplicaSet) []*appsv1.Deployment {
	if len(rs.Labels) == 0 {
		return nil
	}
	all, err := c.dLister.Deployments(rs.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	var matching []*appsv1.Deployment
	for _, d := range all {
		selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		// A nil or empty selector must match nothing here, never everything.
		if err != nil || selector.Empty() || !selector.Matches(labels.Set(rs.Labels)) {
			continue
		}
		matching = append(matching, d)
	}
	if len(matching) > 1 {
		logger.V(4).Info("User error: more than one deployment selects a replica set",
			"replicaSet", klog.KObj(rs), "labels", rs.Labels, "deployment", klog.KObj(matching[0]))
	}
	return matching
}

func (c *Controller) enqueue(d *appsv1.Deployment) {
	c.queue.Add(cache.ObjectName{Namespace: d.Namespace, Name: d.Name}.String())
}

func (c *Controller) enqueueRateLimited(d *appsv1.Deployment) {
	c.queue.AddRateLimited(cache.ObjectName{Namespace: d.Namespace, Name: d.Name}.String())
}

func (c *Controller) enqueueAfter(d *appsv1.Deployment, after time.Duration) {
	c.queue.AddAfter(cache.ObjectName{Namespace: d.Namespace, Name: d.Name}.String(), after)
}

// replicaSetsForDeployment lists the namespace's ReplicaSets and claims the ones this
// Deployment owns: adopting matching orphans and releasing owned ones that stopped
// matching. All ReplicaSets are listed, not just matching ones, so that owned ones
// whose labels changed can be released.
func (c *Controller) replicaSetsForDeployment(ctx context.Context, d *appsv1.Deployment, selector labels.Selector) ([]*appsv1.ReplicaSet, error) {
	rsList, err := c.rsLister.ReplicaSets(d.Namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing replica sets: %w", err)
	}
	// Before the first adoption, re-read the Deployment from the apiserver: if it is
	// being deleted, adopting now would leave orphans the garbage collector has
	// already passed over (kubernetes#42639).
	canAdopt := controllerref.RecheckDeletionTimestamp(controllerref.LiveOwner(d, func(ctx context.Context) (*appsv1.Deployment, error) {
		return c.client.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
	}))
	patch := func(ctx context.Context, rs *appsv1.ReplicaSet, patch []byte) error {
		_, err := c.client.AppsV1().ReplicaSets(rs.Namespace).Patch(ctx, rs.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		return err
	}
	claimed, err := controllerref.NewManager(d, controllerKind, selector, canAdopt, patch).Claim(ctx, rsList)
	if err != nil {
		return nil, fmt.Errorf("claiming replica sets: %w", err)
	}
	return claimed, nil
}

// podsByReplicaSet returns, per ReplicaSet UID, the pods that ReplicaSet controls. The
// pointers are into the cache and must not be modified.
func (c *Controller) podsByReplicaSet(rsList []*appsv1.ReplicaSet) (map[types.UID][]*corev1.Pod, error) {
	podMap := make(map[types.UID][]*corev1.Pod, len(rsList))
	for _, rs := range rsList {
		pods, err := controllerref.PodsControlledBy(c.podIndexer, rs, "ReplicaSet", false)
		if err != nil {
			return nil, err
		}
		podMap[rs.UID] = pods
	}
	return podMap, nil
}
