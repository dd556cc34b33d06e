package deployment

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mini-kcm/mini-kcm/controllers/deployment/rollout"
)

// rolloutRecreate takes every old ReplicaSet to 0, waits until no old pod is left, and
// only then creates (or grows) the new ReplicaSet at full size. Old and new pods never
// run side by side, which is the point of the strategy.
func (c *Controller) rolloutRecreate(ctx context.Context, d *appsv1.Deployment, rsList []*appsv1.ReplicaSet, podMap map[types.UID][]*corev1.Pod) error {
	// The new ReplicaSet is not created yet, so that nothing scales up before the old
	// pods are gone.
	newRS, oldRSs, err := c.getAllReplicaSetsAndSyncRevision(ctx, d, rsList, false)
	if err != nil {
		return err
	}
	allRSs := allReplicaSets(newRS, oldRSs)

	scaledDown, err := c.scaleDownOldReplicaSetsForRecreate(ctx, rollout.FilterActive(oldRSs), d)
	if err != nil {
		return err
	}
	if scaledDown {
		return c.syncRolloutStatus(ctx, allRSs, newRS, d)
	}

	// Pod deletions wake Recreate Deployments, so waiting here costs no latency.
	if oldPodsRunning(newRS, oldRSs, podMap) {
		return c.syncRolloutStatus(ctx, allRSs, newRS, d)
	}

	if newRS == nil {
		newRS, oldRSs, err = c.getAllReplicaSetsAndSyncRevision(ctx, d, rsList, true)
		if err != nil {
			return err
		}
		allRSs = allReplicaSets(newRS, oldRSs)
	}

	if _, _, err := c.scaleReplicaSet(ctx, newRS, rollout.DesiredReplicas(d), d, false); err != nil {
		return err
	}

	if rollout.DeploymentComplete(d, &d.Status) {
		if err := c.cleanupDeployment(ctx, oldRSs, d); err != nil {
			return err
		}
	}
	return c.syncRolloutStatus(ctx, allRSs, newRS, d)
}

// scaleDownOldReplicaSetsForRecreate takes every active old ReplicaSet to 0 and reports
// whether any changed.
func (c *Controller) scaleDownOldReplicaSetsForRecreate(ctx context.Context, oldRSs []*appsv1.ReplicaSet, d *appsv1.Deployment) (bool, error) {
	scaled := false
	for _, rs := range oldRSs {
		if rollout.SpecReplicas(rs) == 0 {
			continue
		}
		changed, _, err := c.scaleReplicaSet(ctx, rs, 0, d, false)
		if err != nil {
			return false, err
		}
		scaled = scaled || changed
	}
	return scaled, nil
}

// oldPodsRunning reports whether an old ReplicaSet still counts pods, or still controls
// a pod that has not finished. Terminating pods and pods in phase Unknown count: they may
// still be running on their node.
func oldPodsRunning(newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet, podMap map[types.UID][]*corev1.Pod) bool {
	if rollout.SumStatusReplicas(oldRSs) > 0 {
		return true
	}
	for rsUID, pods := range podMap {
		if newRS != nil && newRS.UID == rsUID {
			continue
		}
		for _, pod := range pods {
			if pod.Status.Phase != corev1.PodFailed && pod.Status.Phase != corev1.PodSucceeded {
				return true
			}
		}
	}
	return false
}
