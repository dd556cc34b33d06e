package replicaset

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/controllers/controllerref"
	"github.com/mini-kcm/mini-kcm/controllers/podranking"
	"github.com/mini-kcm/mini-kcm/controllers/podstate"
	"github.com/mini-kcm/mini-kcm/controllers/queueworker"
)

// slowStartInitialBatchSize is the size of the first batch of pod creations; each
// following batch doubles. A ReplicaSet that cannot create pods (quota, admission)
// thus fails after one request per sync, not after hundreds, which also spares the
// apiserver and the user hundreds of identical FailedCreate events.
const slowStartInitialBatchSize = 1

// syncReplicaSet brings the ReplicaSet with the given key to its desired pod count,
// if its expectations are satisfied, and always updates its status. It is never called
// concurrently for the same key (the queue guarantees it).
func (c *Controller) syncReplicaSet(ctx context.Context, key string) error {
	logger := klog.FromContext(ctx)
	start := c.now()
	defer func() {
		logger.V(4).Info("Finished syncing ReplicaSet", "key", key, "duration", c.now().Sub(start))
	}()

	namespace, name, ok := queueworker.SplitKey(ctx, "ReplicaSet", key)
	if !ok {
		return nil
	}
	nn := types.NamespacedName{Namespace: namespace, Name: name}
	if err := c.consistency.EnsureReady(nn); err != nil {
		return err
	}

	rs, err := c.rsLister.ReplicaSets(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		logger.V(4).Info("ReplicaSet has been deleted", "key", key)
		c.consistency.Clear(nn, "")
		c.expectations.Delete(logger, key)
		return nil
	}
	if err != nil {
		return err
	}
	logger = klog.LoggerWithValues(logger, "replicaSet", klog.KObj(rs))
	ctx = klog.NewContext(ctx, logger)
	logger.V(2).Info("Syncing ReplicaSet")

	needsManage := c.expectations.Satisfied(logger, key)
	selector, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil {
		// The apiserver validates selectors, so this cannot heal by retrying.
		logger.Error(err, "Invalid selector; not syncing ReplicaSet")
		return nil
	}
	if rs.Spec.Replicas == nil {
		// The apiserver defaults spec.replicas; a nil here means a corrupt object.
		logger.Error(nil, "ReplicaSet has no spec.replicas; not syncing")
		return nil
	}

	// Our own pods and the namespace's orphans (which we may adopt), from the cache:
	// they must not be modified.
	pods, err := controllerref.PodsControlledBy(c.podIndexer, rs, controllerKind.Kind, true)
	if err != nil {
		return err
	}
	activePods, err := c.claimPods(ctx, rs, selector, filterPods(pods, podstate.IsActive))
	if err != nil {
		return fmt.Errorf("claiming pods for ReplicaSet %s: %w", key, err)
	}
	// Terminating pods are only counted, never adopted or released: they are ours if
	// they still say so and still match.
	var terminatingPods []*v1.Pod
	if c.features.Enabled(controllers.DeploymentReplicaSetTerminatingReplicas) {
		terminatingPods = filterPods(pods, func(pod *v1.Pod) bool {
			return podstate.IsTerminating(pod) && metav1.IsControlledBy(pod, rs) && selector.Matches(labels.Set(pod.Labels))
		})
	}

	var manageErr error
	if needsManage && rs.DeletionTimestamp == nil {
		manageErr = c.manageReplicas(ctx, activePods, rs)
	}

	rs = rs.DeepCopy()
	// One instant for the status and for the next availability check, so that a pod
	// counted as not yet available is the one the requeue waits for.
	now := c.now()
	newStatus := calculateStatus(rs, activePods, terminatingPods, c.features.Enabled(controllers.DeploymentReplicaSetTerminatingReplicas), manageErr, now)
	updatedRS, err := c.updateStatus(ctx, rs, newStatus)
	if err != nil {
		// The requeue retries both the status and, if it failed too, the pods.
		return fmt.Errorf("updating status of ReplicaSet %s: %w", key, err)
	}
	c.consistency.WroteAt(nn, rs.UID, replicaSetsResource, updatedRS.ResourceVersion)
	if manageErr != nil {
		return fmt.Errorf("managing pods of ReplicaSet %s: %w", key, manageErr)
	}

	// Requeue for the moment the next ready pod becomes available: no event will
	// announce it. minReadySeconds is the fallback should no pod qualify.
	if updatedRS.Spec.MinReadySeconds > 0 && updatedRS.Status.ReadyReplicas != updatedRS.Status.AvailableReplicas {
		after := time.Duration(updatedRS.Spec.MinReadySeconds) * time.Second
		if next, ok := podstate.NextAvailabilityCheck(activePods, updatedRS.Spec.MinReadySeconds, now, c.now()); ok {
			after = next
		}
		logger.V(4).Info("Requeuing ReplicaSet for availability check", "after", after)
		c.queue.AddAfter(key, after)
	}
	return nil
}

// claimPods adopts matching orphans and releases pods that stopped matching, and
// returns the pods rs now owns.
func (c *Controller) claimPods(ctx context.Context, rs *appsv1.ReplicaSet, selector labels.Selector, pods []*v1.Pod) ([]*v1.Pod, error) {
	// Before the first adoption, check live (not in the cache) that rs is not being
	// deleted: adopting pods for a deleted ReplicaSet would leave them to the garbage
	// collector, which may have already passed them by (kubernetes#42639).
	canAdopt := controllerref.RecheckDeletionTimestamp(controllerref.LiveOwner(rs, func(ctx context.Context) (*appsv1.ReplicaSet, error) {
		return c.client.AppsV1().ReplicaSets(rs.Namespace).Get(ctx, rs.Name, metav1.GetOptions{})
	}))
	patch := func(ctx context.Context, pod *v1.Pod, patch []byte) error {
		return c.podControl.PatchPod(ctx, pod.Namespace, pod.Name, patch)
	}
	return controllerref.NewManager(rs, controllerKind, selector, canAdopt, patch).Claim(ctx, pods)
}

// manageReplicas creates or deletes pods so that activePods (which it does not modify)
// reaches spec.replicas, at most burstReplicas per call. It sets expectations before
// writing, so that the informer events of its own writes are never mistaken for
// outside changes. The error is the first failed write.
func (c *Controller) manageReplicas(ctx context.Context, activePods []*v1.Pod, rs *appsv1.ReplicaSet) error {
	logger := klog.FromContext(ctx)
	key := cacheKey(rs)
	diff := len(activePods) - int(*rs.Spec.Replicas)
	switch {
	case diff < 0:
		count := min(-diff, c.burstReplicas)
		// Creations are tracked by count only: the pod names are generated by the
		// apiserver, so they are unknown until each create returns.
		c.expectations.ExpectCreations(logger, key, count)
		logger.V(2).Info("Too few replicas", "need", *rs.Spec.Replicas, "creating", count)
		ref := metav1.NewControllerRef(rs, controllerKind)
		created, err := slowStartBatch(count, slowStartInitialBatchSize, func() error {
			err := c.podControl.CreatePod(ctx, rs.Namespace, &rs.Spec.Template, rs, ref)
			if err != nil && apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause) {
				// Every create fails in a terminating namespace and nothing will change
				// that; count it as done rather than retry.
				return nil
			}
			return err
		})
		// The creations never attempted will not be observed: stop expecting them.
		// The next sync retries them, again starting slow.
		if skipped := count - created; skipped > 0 {
			logger.V(2).Info("Slow-start failure. Skipping creation of pods, decrementing expectations", "podsSkipped", skipped)
			for range skipped {
				c.expectations.CreationObserved(logger, key)
			}
		}
		return err

	case diff > 0:
		count := min(diff, c.burstReplicas)
		logger.V(2).Info("Too many replicas", "need", *rs.Spec.Replicas, "deleting", count)
		relatedPods, err := c.indirectlyRelatedPods(logger, rs)
		if err != nil {
			// Ranking without siblings only loses the co-location preference.
			logger.Error(err, "Listing pods of sibling ReplicaSets; ranking without them")
		}
		victims := podsToDelete(activePods, relatedPods, count, metav1.NewTime(c.now()), c.features.Enabled(PodDeletionCost))
		// Tracking the keys (not just a count) lets a graceful delete, seen first as an
		// update and then as a delete, count once.
		c.expectations.ExpectDeletions(logger, key, podKeys(victims))

		errs := make(chan error, len(victims))
		var wg sync.WaitGroup
		for _, pod := range victims {
			wg.Go(func() {
				err := c.podControl.DeletePod(ctx, rs.Namespace, pod.Name, rs)
				if err == nil {
					return
				}
				// The informer will not report a delete that did not happen.
				c.expectations.DeletionObserved(logger, key, podKey(pod))
				if !apierrors.IsNotFound(err) {
					logger.V(2).Info("Failed to delete pod, decremented expectations", "pod", klog.KObj(pod))
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		// The failures were reported as events already and are most likely alike:
		// return the first.
		return <-errs
	}
	return nil
}

// slowStartBatch calls fn count times: first initialBatchSize calls in parallel, then
// batches of twice the previous size as long as every call of a batch succeeds. After
// a batch with a failure it stops and returns the number of successful calls and one
// of the errors.
func slowStartBatch(count, initialBatchSize int, fn func() error) (int, error) {
	remaining, successes := count, 0
	for batch := min(remaining, initialBatchSize); batch > 0; batch = min(2*batch, remaining) {
		errs := make(chan error, batch)
		var wg sync.WaitGroup
		for range batch {
			wg.Go(func() {
				if err := fn(); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		successes += batch - len(errs)
		if len(errs) > 0 {
			return successes, <-errs
		}
		remaining -= batch
	}
	return successes, nil
}

// indirectlyRelatedPods returns the pods selected by any ReplicaSet controlled by the
// same object as rs (the ReplicaSets of one Deployment), each pod once. They rank rs's
// pods by how crowded their node is. A ReplicaSet without a controller has none.
func (c *Controller) indirectlyRelatedPods(logger klog.Logger, rs *appsv1.ReplicaSet) ([]*v1.Pod, error) {
	siblings, err := c.replicaSetsWithSameController(logger, rs)
	if err != nil {
		return nil, err
	}
	var related []*v1.Pod
	seen := sets.New[types.UID]()
	for _, sibling := range siblings {
		selector, err := metav1.LabelSelectorAsSelector(sibling.Spec.Selector)
		if err != nil {
			continue // An invalid selector selects nothing.
		}
		pods, err := c.podLister.Pods(sibling.Namespace).List(selector)
		if err != nil {
			return nil, fmt.Errorf("listing pods of ReplicaSet %s: %w", cacheKey(sibling), err)
		}
		for _, pod := range pods {
			if !seen.Has(pod.UID) {
				seen.Insert(pod.UID)
				related = append(related, pod)
			}
		}
	}
	logger.V(4).Info("Found related pods", "pods", klog.KObjSlice(related))
	return related, nil
}

// podsToDelete picks the count pods of activePods to delete first (see
// podranking.ActivePodsWithRanks; the pod-deletion-cost annotation counts only with
// podDeletionCost, the PodDeletionCost gate); count is at most len(activePods).
// activePods is not reordered.
func podsToDelete(activePods, relatedPods []*v1.Pod, count int, now metav1.Time, podDeletionCost bool) []*v1.Pod {
	candidates := append([]*v1.Pod(nil), activePods...)
	// Deleting all of them needs no choice.
	if count < len(candidates) {
		ranked := podranking.RankByColocation(candidates, relatedPods, now)
		ranked.IgnoreDeletionCost = !podDeletionCost
		sort.Sort(ranked)
		observeDeletionAgeRatio(candidates, count, now.Time)
	}
	return candidates[:count]
}

// observeDeletionAgeRatio records, for each ready pod chosen for deletion, its age
// relative to the youngest ready pod: ratios near 1 mean the ranking picked young pods.
func observeDeletionAgeRatio(sorted []*v1.Pod, count int, now time.Time) {
	var youngest time.Time
	for _, pod := range sorted {
		if podstate.IsReady(pod) && pod.CreationTimestamp.After(youngest) {
			youngest = pod.CreationTimestamp.Time
		}
	}
	youngestAge := now.Sub(youngest)
	if youngestAge <= 0 {
		return
	}
	for _, pod := range sorted[:count] {
		if podstate.IsReady(pod) {
			sortingDeletionAgeRatio.Observe(float64(now.Sub(pod.CreationTimestamp.Time)) / float64(youngestAge))
		}
	}
}

// filterPods returns the pods for which keep is true.
func filterPods(pods []*v1.Pod, keep func(*v1.Pod) bool) []*v1.Pod {
	var kept []*v1.Pod
	for _, pod := range pods {
		if keep(pod) {
			kept = append(kept, pod)
		}
	}
	return kept
}

// podKeys returns the expectations keys of pods.
func podKeys(pods []*v1.Pod) []string {
	keys := make([]string, 0, len(pods))
	for _, pod := range pods {
		keys = append(keys, podKey(pod))
	}
	return keys
}
