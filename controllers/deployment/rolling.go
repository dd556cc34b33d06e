package deployment

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/controllers/deployment/rollout"
)

// rolloutRolling advances a RollingUpdate rollout by one step: grow the new ReplicaSet
// within maxSurge, or else shrink old ones within maxUnavailable. Each sync takes at
// most one of the two steps and then records the status; the ReplicaSet updates that
// follow trigger the next step.
func (c *Controller) rolloutRolling(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) error {
	newRS, oldRSs, err := c.getAllReplicaSetsAndSyncRevision(ctx, d, rsList, true)
	if err != nil {
		return err
	}
	allRSs := allReplicaSets(newRS, oldRSs)

	scaledUp, err := c.reconcileNewReplicaSet(ctx, allRSs, newRS, d)
	if err != nil {
		return err
	}
	if scaledUp {
		return c.syncRolloutStatus(ctx, allRSs, newRS, d)
	}

	scaledDown, err := c.reconcileOldReplicaSets(ctx, allRSs, rollout.FilterActive(oldRSs), newRS, d)
	if err != nil {
		return err
	}
	if scaledDown {
		return c.syncRolloutStatus(ctx, allRSs, newRS, d)
	}

	// Cleanup waits until the stored status says the rollout finished, so that a
	// rollback target is never deleted mid-rollout.
	if rollout.DeploymentComplete(d, &d.Status) {
		if err := c.cleanupDeployment(ctx, oldRSs, d); err != nil {
			return err
		}
	}
	return c.syncRolloutStatus(ctx, allRSs, newRS, d)
}

// reconcileNewReplicaSet shrinks the new ReplicaSet to spec.replicas if it is larger,
// or grows it as far as maxSurge allows. It reports whether the size changed.
func (c *Controller) reconcileNewReplicaSet(ctx context.Context, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) (bool, error) {
	desired := rollout.DesiredReplicas(d)
	current := rollout.SpecReplicas(newRS)
	if current == desired {
		return false, nil
	}
	if current > desired {
		scaled, _, err := c.scaleReplicaSet(ctx, newRS, desired, d, false)
		return scaled, err
	}
	newReplicas, err := rollout.NewRSNewReplicas(d, allRSs, newRS)
	if err != nil {
		return false, fmt.Errorf("sizing new replica set %s: %w", klog.KObj(newRS), err)
	}
	scaled, _, err := c.scaleReplicaSet(ctx, newRS, newReplicas, d, false)
	return scaled, err
}

// reconcileOldReplicaSets shrinks old ReplicaSets as far as maxUnavailable allows and
// reports whether any shrank.
//
// The budget is all pods minus the minimum available minus the new ReplicaSet's
// unavailable pods: pods that are not yet (or never will be) available must not let the
// old, working pods go. Unhealthy old pods are removed first, since removing them costs
// no availability; only then are available old pods traded for available new ones.
//
// Example: 10 replicas, maxSurge 3, maxUnavailable 2, and new pods that crash-loop. The
// new ReplicaSet grows to 3, the old one shrinks to 8, the new one grows to 5, and then
// 13 - 8 - 5 = 0 stops any further shrinking until the new pods become available or the
// user rolls back.
func (c *Controller) reconcileOldReplicaSets(ctx context.Context, allRSs, oldRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) (bool, error) {
	logger := klog.FromContext(ctx)
	if rollout.SumSpecReplicas(oldRSs) == 0 {
		return false, nil
	}
	minAvailable := rollout.DesiredReplicas(d) - rollout.MaxUnavailable(d)
	newRSUnavailable := rollout.SpecReplicas(newRS) - newRS.Status.AvailableReplicas
	maxScaledDown := rollout.SumSpecReplicas(allRSs) - minAvailable - newRSUnavailable
	if maxScaledDown <= 0 {
		return false, nil
	}

	// Like upstream, a failed scale-down here is not an error of the sync: the step is
	// simply not taken, and the ReplicaSet event or the next resync retries it.
	oldRSs, cleanedUp, err := c.cleanupUnhealthyReplicas(ctx, oldRSs, d, maxScaledDown)
	if err != nil {
		logger.V(2).Info("Could not scale down unhealthy old replicas", "err", err)
		return false, nil
	}
	logger.V(4).Info("Cleaned up unhealthy replicas from old replica sets", "count", cleanedUp)

	scaledDown, err := c.scaleDownOldReplicaSetsForRollingUpdate(ctx, allReplicaSets(newRS, oldRSs), oldRSs, d)
	if err != nil {
		logger.V(2).Info("Could not scale down old replica sets", "err", err)
		return false, nil
	}
	logger.V(4).Info("Scaled down old replica sets", "count", scaledDown)
	return cleanedUp+scaledDown > 0, nil
}

// cleanupUnhealthyReplicas shrinks old ReplicaSets, oldest first, by their unavailable
// pods, up to maxCleanupCount in total. The ReplicaSet controller deletes not-ready pods
// first, so this takes away exactly the pods that serve nothing. It returns the old
// ReplicaSets (oldest first, with the updated ones replaced) and how many pods went.
func (c *Controller) cleanupUnhealthyReplicas(ctx context.Context, oldRSs []*appsv1.ReplicaSet, d *appsv1.Deployment, maxCleanupCount int32) ([]*appsv1.ReplicaSet, int32, error) {
	oldRSs = rollout.SortedByCreation(oldRSs)
	total := int32(0)
	for i, rs := range oldRSs {
		if total >= maxCleanupCount {
			break
		}
		replicas := rollout.SpecReplicas(rs)
		if replicas == 0 || replicas == rs.Status.AvailableReplicas {
			continue
		}
		count := min(maxCleanupCount-total, replicas-rs.Status.AvailableReplicas)
		if count < 0 {
			// More available pods than desired: the ReplicaSet is itself scaling down,
			// and there is nothing unhealthy to remove.
			return nil, total, fmt.Errorf("invalid request to scale down unhealthy replicas of %s from %d to %d", klog.KObj(rs), replicas, replicas-count)
		}
		_, updated, err := c.scaleReplicaSet(ctx, rs, replicas-count, d, false)
		if err != nil {
			return nil, total, err
		}
		total += count
		oldRSs[i] = updated
	}
	return oldRSs, total, nil
}

// scaleDownOldReplicaSetsForRollingUpdate shrinks old ReplicaSets, oldest first, by as
// many pods as are available above the minimum. It returns how many pods went.
func (c *Controller) scaleDownOldReplicaSetsForRollingUpdate(ctx context.Context, allRSs, oldRSs []*appsv1.ReplicaSet, d *appsv1.Deployment) (int32, error) {
	minAvailable := rollout.DesiredReplicas(d) - rollout.MaxUnavailable(d)
	available := rollout.SumAvailableReplicas(allRSs)
	if available <= minAvailable {
		return 0, nil
	}
	klog.FromContext(ctx).V(4).Info("Found available pods in deployment, scaling down old replica sets", "availableReplicas", available)

	budget := available - minAvailable
	total := int32(0)
	for _, rs := range rollout.SortedByCreation(oldRSs) {
		if total >= budget {
			break
		}
		replicas := rollout.SpecReplicas(rs)
		if replicas == 0 {
			continue
		}
		count := min(replicas, budget-total)
		if _, _, err := c.scaleReplicaSet(ctx, rs, replicas-count, d, false); err != nil {
			return total, err
		}
		total += count
	}
	return total, nil
}
