package deployment

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/controllers/deployment/rollout"
	"github.com/mini-kcm/mini-kcm/controllers/queueworker"
)

// syncDeployment reconciles one Deployment. It is never called concurrently for the
// same key.
func (c *Controller) syncDeployment(ctx context.Context, key string) error {
	logger := klog.FromContext(ctx)
	namespace, name, ok := queueworker.SplitKey(ctx, "Deployment", key)
	if !ok {
		return nil
	}
	start := time.Now()
	logger.V(4).Info("Started syncing deployment", "deployment", klog.KRef(namespace, name))
	defer func() {
		logger.V(4).Info("Finished syncing deployment", "deployment", klog.KRef(namespace, name), "duration", time.Since(start))
	}()

	cached, err := c.dLister.Deployments(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		logger.V(2).Info("Deployment has been deleted", "deployment", klog.KRef(namespace, name))
		return nil
	}
	if err != nil {
		return fmt.Errorf("getting deployment %s from the cache: %w", key, err)
	}
	// Everything below changes d; the cache's copy must stay untouched.
	d := cached.DeepCopy()
	logger = klog.LoggerWithValues(logger, "deployment", klog.KObj(d))
	ctx = klog.NewContext(ctx, logger)
	logger.V(2).Info("Syncing deployment", "generation", d.Generation, "paused", d.Spec.Paused)

	if selectsEverything(d.Spec.Selector) {
		// apps/v1 validation forbids this; an object that slips through must not claim
		// every ReplicaSet in the namespace.
		c.recorder.Eventf(d, corev1.EventTypeWarning, "SelectingAll", "This deployment is selecting all pods. A non-empty selector is required.")
		if d.Status.ObservedGeneration < d.Generation {
			d.Status.ObservedGeneration = d.Generation
			// Like upstream, a failure here is not retried: the event already tells
			// the user what to fix, and fixing it triggers a new sync.
			if err := c.updateStatus(ctx, d); err != nil {
				logger.V(2).Info("Could not record the observed generation", "err", err)
			}
		}
		return nil
	}
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return fmt.Errorf("deployment %s has an invalid label selector: %w", key, err)
	}

	rsList, err := c.replicaSetsForDeployment(ctx, d, selector)
	if err != nil {
		return err
	}

	if d.DeletionTimestamp != nil {
		return c.syncStatusOnly(ctx, d, rsList)
	}

	// Record pause and resume in the Progressing condition first, so that a Deployment
	// resumed after longer than its deadline is not reported as stuck right away.
	if err := c.checkPausedConditions(ctx, d); err != nil {
		return err
	}

	if d.Spec.Paused {
		return c.sync(ctx, d, rsList)
	}

	// A rollback rewrites the template; nothing else may happen until the request
	// annotation is cleared, or the ReplicaSets would be resized for a template that
	// is about to change.
	if rollbackTo(d) != nil {
		return c.rollback(ctx, d, rsList)
	}

	scalingEvent, err := c.isScalingEvent(ctx, d, rsList)
	if err != nil {
		return err
	}
	if scalingEvent {
		return c.sync(ctx, d, rsList)
	}

	switch d.Spec.Strategy.Type {
	case appsv1.RecreateDeploymentStrategyType:
		podMap, err := c.podsByReplicaSet(rsList)
		if err != nil {
			return err
		}
		return c.rolloutRecreate(ctx, d, rsList, podMap)
	case appsv1.RollingUpdateDeploymentStrategyType:
		return c.rolloutRolling(ctx, d, rsList)
	}
	return fmt.Errorf("deployment %s has an unsupported strategy type %q", key, d.Spec.Strategy.Type)
}

// selectsEverything reports whether a selector is missing or empty. Upstream only
// checks for an empty one; a missing one (impossible through the API) is treated the
// same way rather than crashing the worker.
func selectsEverything(selector *metav1.LabelSelector) bool {
	return selector == nil || (len(selector.MatchLabels) == 0 && len(selector.MatchExpressions) == 0)
}

// syncStatusOnly only refreshes the status; it is all a Deployment being deleted gets.
func (c *Controller) syncStatusOnly(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) error {
	newRS, oldRSs, err := c.getAllReplicaSetsAndSyncRevision(ctx, d, rsList, false)
	if err != nil {
		return err
	}
	return c.syncDeploymentStatus(ctx, allReplicaSets(newRS, oldRSs), newRS, d)
}

// sync handles scaling events and paused Deployments: it resizes the ReplicaSets
// proportionally without advancing the rollout, cleans up old ReplicaSets of a paused
// Deployment, and refreshes the status. It never creates a ReplicaSet.
func (c *Controller) sync(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) error {
	newRS, oldRSs, err := c.getAllReplicaSetsAndSyncRevision(ctx, d, rsList, false)
	if err != nil {
		return err
	}
	if err := c.scale(ctx, d, newRS, oldRSs); err != nil {
		return err
	}
	if d.Spec.Paused && rollbackTo(d) == nil {
		if err := c.cleanupDeployment(ctx, oldRSs, d); err != nil {
			return err
		}
	}
	return c.syncDeploymentStatus(ctx, allReplicaSets(newRS, oldRSs), newRS, d)
}

// checkPausedConditions sets Progressing=Unknown when a Deployment with a deadline is
// paused (DeploymentPaused) or resumed (DeploymentResumed). The Unknown status stops
// the deadline clock; a reported timeout is never overwritten.
func (c *Controller) checkPausedConditions(ctx context.Context, d *appsv1.Deployment) error {
	if !rollout.HasProgressDeadline(d) {
		return nil
	}
	cond := rollout.GetCondition(d.Status, appsv1.DeploymentProgressing)
	if cond != nil && cond.Reason == rollout.ReasonProgressDeadlineExceeded {
		return nil
	}
	pausedCondExists := cond != nil && cond.Reason == rollout.ReasonDeploymentPaused
	switch {
	case d.Spec.Paused && !pausedCondExists:
		rollout.SetCondition(&d.Status, rollout.NewCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown,
			rollout.ReasonDeploymentPaused, "Deployment is paused", c.now()))
	case !d.Spec.Paused && pausedCondExists:
		rollout.SetCondition(&d.Status, rollout.NewCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown,
			rollout.ReasonDeploymentResumed, "Deployment is resumed", c.now()))
	default:
		return nil
	}
	return c.updateStatus(ctx, d)
}

// getAllReplicaSetsAndSyncRevision splits the claimed ReplicaSets into the new one (nil
// if it does not exist and create is false) and the old ones, oldest first, and brings
// the revision of the new ReplicaSet and of the Deployment up to date.
func (c *Controller) getAllReplicaSetsAndSyncRevision(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet, create bool) (*appsv1.ReplicaSet, []*appsv1.ReplicaSet, error) {
	oldRSs := rollout.FindOldReplicaSets(d, rsList)
	newRS, err := c.getNewReplicaSet(ctx, d, rsList, oldRSs, create)
	if err != nil {
		return nil, nil, err
	}
	return newRS, oldRSs, nil
}

// getNewReplicaSet returns the ReplicaSet for the Deployment's current template, after
// making its annotations, revision and minReadySeconds current, and records its
// revision on the Deployment. If there is none and create is set, it creates it.
//
// The revision of the new ReplicaSet is one above the highest old revision, and is never
// lowered: old ReplicaSets may have been deleted since it was set.
func (c *Controller) getNewReplicaSet(ctx context.Context, d *appsv1.Deployment, rsList, oldRSs []*appsv1.ReplicaSet, create bool) (*appsv1.ReplicaSet, error) {
	logger := klog.FromContext(ctx)
	newRevision := strconv.FormatInt(rollout.MaxRevision(oldRSs)+1, 10)

	if existing := rollout.FindNewReplicaSet(d, rsList); existing != nil {
		rsCopy := existing.DeepCopy()
		annotationsUpdated, err := rollout.SetNewReplicaSetAnnotations(d, rsCopy, newRevision, true, rollout.MaxRevisionHistoryLength)
		if err != nil {
			logger.Info("Not updating the revision of the new replica set", "replicaSet", klog.KObj(rsCopy), "err", err)
		}
		if annotationsUpdated || rsCopy.Spec.MinReadySeconds != d.Spec.MinReadySeconds {
			rsCopy.Spec.MinReadySeconds = d.Spec.MinReadySeconds
			// The Deployment's revision follows on the next sync, which this update
			// triggers; writing both now could record a revision the ReplicaSet never got.
			updated, err := c.client.AppsV1().ReplicaSets(rsCopy.Namespace).Update(ctx, rsCopy, metav1.UpdateOptions{})
			if err != nil {
				return nil, fmt.Errorf("updating annotations of replica set %s: %w", klog.KObj(rsCopy), err)
			}
			return updated, nil
		}

		needsUpdate := rollout.SetDeploymentRevision(d, rsCopy.Annotations[rollout.RevisionAnnotation])
		// A Deployment that never had a Progressing condition (say, a deadline was just
		// set) starts measuring progress from the moment its new ReplicaSet is seen.
		if rollout.HasProgressDeadline(d) && rollout.GetCondition(d.Status, appsv1.DeploymentProgressing) == nil {
			msg := fmt.Sprintf("Found new replica set %q", rsCopy.Name)
			rollout.SetCondition(&d.Status, rollout.NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, rollout.ReasonFoundNewReplicaSet, msg, c.now()))
			needsUpdate = true
		}
		if needsUpdate {
			if err := c.updateStatus(ctx, d); err != nil {
				return nil, err
			}
		}
		return rsCopy, nil
	}

	if !create {
		return nil, nil
	}

	newRS, err := c.newReplicaSetFor(d, oldRSs, newRevision)
	if err != nil {
		return nil, err
	}
	newReplicas := rollout.SpecReplicas(newRS)

	// The name is deterministic, so AlreadyExists means either that our cache is behind
	// (the ReplicaSet is ours, with our template) or that a different template hashed
	// to the same name; the collision count then changes the next hash.
	alreadyExists := false
	created, err := c.client.AppsV1().ReplicaSets(d.Namespace).Create(ctx, newRS, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		alreadyExists = true
		rs, getErr := c.rsLister.ReplicaSets(newRS.Namespace).Get(newRS.Name)
		if getErr != nil {
			return nil, fmt.Errorf("getting existing replica set %s: %w", klog.KObj(newRS), getErr)
		}
		if ref := metav1.GetControllerOfNoCopy(rs); ref != nil && ref.UID == d.UID && rollout.EqualIgnoreHash(&d.Spec.Template, &rs.Spec.Template) {
			created = rs
			break
		}
		previous := int32(0)
		if d.Status.CollisionCount != nil {
			previous = *d.Status.CollisionCount
		}
		d.Status.CollisionCount = new(previous + 1)
		if statusErr := c.updateStatus(ctx, d); statusErr == nil {
			logger.V(2).Info("Found a hash collision for deployment - bumping collisionCount to resolve it",
				"oldCollisionCount", previous, "newCollisionCount", previous+1)
		}
		return nil, fmt.Errorf("replica set %s exists with a different template (hash collision): %w", klog.KObj(newRS), err)
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return nil, err
	case err != nil:
		msg := fmt.Sprintf("Failed to create new replica set %q: %v", newRS.Name, err)
		if rollout.HasProgressDeadline(d) {
			rollout.SetCondition(&d.Status, rollout.NewCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, rollout.ReasonReplicaSetCreateError, msg, c.now()))
			// The create error is what matters; a failed status write only loses the
			// condition until the retry.
			if statusErr := c.updateStatus(ctx, d); statusErr != nil {
				logger.V(2).Info("Could not record the replica set create error", "err", statusErr)
			}
		}
		c.recorder.Eventf(d, corev1.EventTypeWarning, rollout.ReasonReplicaSetCreateError, "%s", msg)
		return nil, fmt.Errorf("creating replica set %s: %w", klog.KObj(newRS), err)
	}

	if !alreadyExists && newReplicas > 0 {
		c.recorder.Eventf(d, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled up replica set %s from 0 to %d", created.Name, newReplicas)
	}
	needsUpdate := rollout.SetDeploymentRevision(d, newRevision)
	if !alreadyExists && rollout.HasProgressDeadline(d) {
		msg := fmt.Sprintf("Created new replica set %q", created.Name)
		rollout.SetCondition(&d.Status, rollout.NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, rollout.ReasonNewReplicaSetCreated, msg, c.now()))
		needsUpdate = true
	}
	if needsUpdate {
		if err := c.updateStatus(ctx, d); err != nil {
			return nil, err
		}
	}
	return created, nil
}

// newReplicaSetFor builds (without creating) the ReplicaSet for the Deployment's
// current template: named <deployment>-<hash>, with the hash label on its labels,
// selector and template, controlled by the Deployment, sized by NewRSNewReplicas and
// annotated with the revision, the sizing and the Deployment's copyable annotations.
func (c *Controller) newReplicaSetFor(d *appsv1.Deployment, oldRSs []*appsv1.ReplicaSet, revision string) (*appsv1.ReplicaSet, error) {
	template := *d.Spec.Template.DeepCopy()
	hash := rollout.ComputeHash(&template, d.Status.CollisionCount)
	template.Labels = withLabel(d.Spec.Template.Labels, appsv1.DefaultDeploymentUniqueLabelKey, hash)

	selector := d.Spec.Selector.DeepCopy()
	selector.MatchLabels = withLabel(selector.MatchLabels, appsv1.DefaultDeploymentUniqueLabelKey, hash)

	newRS := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:            rollout.ReplicaSetName(d.Name, hash),
			Namespace:       d.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, controllerKind)},
			Labels:          template.Labels,
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas:        new(int32(0)),
			MinReadySeconds: d.Spec.MinReadySeconds,
			Selector:        selector,
			Template:        template,
		},
	}
	replicas, err := rollout.NewRSNewReplicas(d, append(slices.Clone(oldRSs), newRS), newRS)
	if err != nil {
		return nil, fmt.Errorf("sizing the new replica set of deployment %s: %w", klog.KObj(d), err)
	}
	newRS.Spec.Replicas = new(replicas)
	if _, err := rollout.SetNewReplicaSetAnnotations(d, newRS, revision, false, rollout.MaxRevisionHistoryLength); err != nil {
		return nil, fmt.Errorf("annotating the new replica set of deployment %s: %w", klog.KObj(d), err)
	}
	return newRS, nil
}

// withLabel returns a copy of labels with key=value added.
func withLabel(labels map[string]string, key, value string) map[string]string {
	out := make(map[string]string, len(labels)+1)
	maps.Copy(out, labels)
	out[key] = value
	return out
}

// scale resizes the ReplicaSets on a scaling event (spec.replicas changed) or while
// paused, without advancing the rollout. Growing only the new ReplicaSet would speed up
// a rollout that may be failing, and shrinking only old ones would do the same; so extra
// or removed replicas are spread over all active ReplicaSets in proportion to their size.
func (c *Controller) scale(ctx context.Context, d *appsv1.Deployment, newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) error {
	desired := rollout.DesiredReplicas(d)
	// With at most one active ReplicaSet, it simply takes the whole size.
	if target := rollout.FindActiveOrLatest(newRS, oldRSs); target != nil {
		if rollout.SpecReplicas(target) == desired {
			return nil
		}
		_, _, err := c.scaleReplicaSet(ctx, target, desired, d, false)
		return err
	}

	// Old ReplicaSets are visited newest first, as upstream does.
	oldNewestFirst := rollout.SortedByCreation(oldRSs)
	slices.Reverse(oldNewestFirst)

	// A saturated new ReplicaSet already runs everything (say, after adopting old
	// ReplicaSets mid-rollout): the old ones just go away.
	if rollout.IsSaturated(d, newRS) {
		for _, old := range rollout.FilterActive(oldNewestFirst) {
			if _, _, err := c.scaleReplicaSet(ctx, old, 0, d, false); err != nil {
				return err
			}
		}
		return nil
	}

	// Recreate never has several active ReplicaSets for long; it waits for the rollout.
	if !rollout.IsRollingUpdate(d) {
		return nil
	}

	active := rollout.FilterActive(append(oldNewestFirst, newRS))
	allowedSize := int32(0)
	if desired > 0 {
		allowedSize = desired + rollout.MaxSurge(d)
	}
	toAdd := allowedSize - rollout.SumSpecReplicas(active)

	// Hand out the change from the largest ReplicaSet down. Among equals, newer ones
	// grow first and older ones shrink first.
	switch {
	case toAdd > 0:
		slices.SortFunc(active, rollout.CompareBySizeNewer)
	case toAdd < 0:
		slices.SortFunc(active, rollout.CompareBySizeOlder)
	}

	added := int32(0)
	sizes := make([]int32, len(active))
	for i, rs := range active {
		sizes[i] = rollout.SpecReplicas(rs)
		if toAdd != 0 {
			proportion := rollout.ReplicaSetProportion(rs, d, toAdd, added)
			sizes[i] += proportion
			added += proportion
		}
	}
	// Rounding leaves a remainder; the largest ReplicaSet absorbs it.
	if len(active) > 0 && toAdd != 0 {
		sizes[0] = max(0, sizes[0]+toAdd-added)
	}
	// Every active ReplicaSet is written, even at an unchanged size, so that all of
	// them record the new desired and max replicas for the next scaling event.
	for i, rs := range active {
		if _, _, err := c.scaleReplicaSet(ctx, rs, sizes[i], d, true); err != nil {
			return err
		}
	}
	return nil
}

// scaleReplicaSet sets a ReplicaSet's size and its desired/max-replicas annotations in
// one update. Without forceUpdate it does nothing if the size is already right. It
// reports whether the size changed, and returns the updated ReplicaSet.
func (c *Controller) scaleReplicaSet(ctx context.Context, rs *appsv1.ReplicaSet, newScale int32, d *appsv1.Deployment, forceUpdate bool) (bool, *appsv1.ReplicaSet, error) {
	oldScale := rollout.SpecReplicas(rs)
	if !forceUpdate && oldScale == newScale {
		return false, rs, nil
	}
	desired := rollout.DesiredReplicas(d)
	maxReplicas := desired + rollout.MaxSurge(d)
	sizeNeedsUpdate := oldScale != newScale
	if !sizeNeedsUpdate && !rollout.ReplicasAnnotationsNeedUpdate(rs, desired, maxReplicas) {
		return false, rs, nil
	}

	rsCopy := rs.DeepCopy()
	rsCopy.Spec.Replicas = new(newScale)
	rollout.SetReplicasAnnotations(rsCopy, desired, maxReplicas)
	updated, err := c.client.AppsV1().ReplicaSets(rsCopy.Namespace).Update(ctx, rsCopy, metav1.UpdateOptions{})
	if err != nil {
		return false, rs, fmt.Errorf("scaling replica set %s from %d to %d: %w", klog.KObj(rs), oldScale, newScale, err)
	}
	if !sizeNeedsUpdate {
		return false, updated, nil
	}
	direction := "down"
	if oldScale < newScale {
		direction = "up"
	}
	c.recorder.Eventf(d, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled %s replica set %s from %d to %d", direction, rsCopy.Name, oldScale, newScale)
	return true, updated, nil
}

// cleanupDeployment deletes the oldest old ReplicaSets beyond revisionHistoryLimit.
// Only ReplicaSets that are fully scaled down, whose status is current and that are not
// already being deleted go; the others are skipped, never waited for.
func (c *Controller) cleanupDeployment(ctx context.Context, oldRSs []*appsv1.ReplicaSet, d *appsv1.Deployment) error {
	if !rollout.HasRevisionHistoryLimit(d) {
		return nil
	}
	logger := klog.FromContext(ctx)
	var cleanable []*appsv1.ReplicaSet
	for _, rs := range oldRSs {
		if rs != nil && rs.DeletionTimestamp == nil {
			cleanable = append(cleanable, rs)
		}
	}
	diff := len(cleanable) - int(*d.Spec.RevisionHistoryLimit)
	if diff <= 0 {
		return nil
	}
	slices.SortFunc(cleanable, rollout.CompareByRevision)
	logger.V(4).Info("Looking to clean up old replica sets", "count", diff)
	for _, rs := range cleanable[:diff] {
		if rs.Status.Replicas != 0 || rollout.SpecReplicas(rs) != 0 || rs.Generation > rs.Status.ObservedGeneration {
			continue
		}
		logger.V(4).Info("Deleting old replica set", "replicaSet", klog.KObj(rs))
		// Stop at the first failure rather than pressing on against an apiserver that
		// may be overloaded; the next sync continues.
		err := c.client.AppsV1().ReplicaSets(rs.Namespace).Delete(ctx, rs.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting old replica set %s: %w", klog.KObj(rs), err)
		}
	}
	return nil
}

// isScalingEvent reports whether spec.replicas changed since the active ReplicaSets
// were last sized, as recorded in their desired-replicas annotation.
func (c *Controller) isScalingEvent(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) (bool, error) {
	newRS, oldRSs, err := c.getAllReplicaSetsAndSyncRevision(ctx, d, rsList, false)
	if err != nil {
		return false, err
	}
	for _, rs := range rollout.FilterActive(allReplicaSets(newRS, oldRSs)) {
		if desired, ok := rollout.DesiredReplicasFromAnnotation(rs); ok && desired != rollout.DesiredReplicas(d) {
			return true, nil
		}
	}
	return false, nil
}

// allReplicaSets returns the old ReplicaSets followed by the new one, if any, in a new
// slice.
func allReplicaSets(newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	all := slices.Clone(oldRSs)
	if newRS != nil {
		all = append(all, newRS)
	}
	return all
}

// updateStatus writes d's status. The apiserver also persists d's annotations on this
// call (the revision), without bumping the generation. d takes the new resourceVersion,
// so a later write in the same sync does not fail on a conflict with our own write.
func (c *Controller) updateStatus(ctx context.Context, d *appsv1.Deployment) error {
	updated, err := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("updating status of deployment %s: %w", klog.KObj(d), err)
	}
	if updated != nil {
		d.ResourceVersion = updated.ResourceVersion
	}
	return nil
}
