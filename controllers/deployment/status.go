package deployment

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/controllers/deployment/rollout"
)

// syncDeploymentStatus writes the status computed from the ReplicaSets if it changed.
// Scaling events and paused Deployments use it; it leaves the Progressing condition
// alone, because neither says anything about rollout progress.
func (c *Controller) syncDeploymentStatus(ctx context.Context, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) error {
	newStatus := c.calculateStatus(allRSs, newRS, d)
	if equality.Semantic.DeepEqual(d.Status, newStatus) {
		return nil
	}
	d.Status = newStatus
	return c.updateStatus(ctx, d)
}

// calculateStatus derives the Deployment's status from its ReplicaSets' statuses, keeps
// the existing conditions, and sets the Available condition. terminatingReplicas is
// summed only with the DeploymentReplicaSetTerminatingReplicas gate; off, it is unset,
// as upstream leaves it.
func (c *Controller) calculateStatus(allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) appsv1.DeploymentStatus {
	available := rollout.SumAvailableReplicas(allRSs)
	// More available than desired happens while scaling down; it is not negative
	// unavailability.
	unavailable := max(0, rollout.SumSpecReplicas(allRSs)-available)

	var updated int32
	if newRS != nil {
		updated = newRS.Status.Replicas
	}
	status := appsv1.DeploymentStatus{
		ObservedGeneration:  d.Generation,
		Replicas:            rollout.SumStatusReplicas(allRSs),
		UpdatedReplicas:     updated,
		ReadyReplicas:       rollout.SumReadyReplicas(allRSs),
		AvailableReplicas:   available,
		UnavailableReplicas: unavailable,
		CollisionCount:      d.Status.CollisionCount,
	}
	if c.features.Enabled(controllers.DeploymentReplicaSetTerminatingReplicas) {
		status.TerminatingReplicas = rollout.SumTerminatingReplicas(allRSs)
	}
	// Copy, so that setting conditions below cannot write through to d.Status.
	status.Conditions = append(status.Conditions, d.Status.Conditions...)

	if available >= rollout.DesiredReplicas(d)-rollout.MaxUnavailable(d) {
		rollout.SetCondition(&status, rollout.NewCondition(appsv1.DeploymentAvailable, corev1.ConditionTrue,
			rollout.ReasonMinimumReplicasAvailable, "Deployment has minimum availability.", c.now()))
	} else {
		rollout.SetCondition(&status, rollout.NewCondition(appsv1.DeploymentAvailable, corev1.ConditionFalse,
			rollout.ReasonMinimumReplicasUnavailable, "Deployment does not have minimum availability.", c.now()))
	}
	return status
}
