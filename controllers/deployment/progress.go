package deployment

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/controllers/deployment/rollout"
)

// syncRolloutStatus writes the status at the end of a rollout step, judging progress in
// the Progressing condition: complete, progressing (which restarts the deadline), or
// past the deadline. If nothing changed, it schedules a recheck for the moment the
// deadline would pass, because no event would otherwise arrive to notice a stuck
// rollout.
func (c *Controller) syncRolloutStatus(ctx context.Context, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet, d *appsv1.Deployment) error {
	newStatus := c.calculateStatus(allRSs, newRS, d)

	if !rollout.HasProgressDeadline(d) {
		rollout.RemoveCondition(&newStatus, appsv1.DeploymentProgressing)
	}

	// A finished rollout that stays finished needs no new judgement; in particular a
	// resync long after completion must not be read as a timeout.
	currentCond := rollout.GetCondition(d.Status, appsv1.DeploymentProgressing)
	isCompleteDeployment := newStatus.Replicas == newStatus.UpdatedReplicas &&
		currentCond != nil && currentCond.Reason == rollout.ReasonNewReplicaSetAvailable
	if rollout.HasProgressDeadline(d) && !isCompleteDeployment {
		now := c.now()
		switch {
		case rollout.DeploymentComplete(d, &newStatus):
			msg := fmt.Sprintf("Deployment %q has successfully progressed.", d.Name)
			if newRS != nil {
				msg = fmt.Sprintf("ReplicaSet %q has successfully progressed.", newRS.Name)
			}
			rollout.SetCondition(&newStatus, rollout.NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, rollout.ReasonNewReplicaSetAvailable, msg, now))

		case rollout.DeploymentProgressing(d, &newStatus):
			msg := fmt.Sprintf("Deployment %q is progressing.", d.Name)
			if newRS != nil {
				msg = fmt.Sprintf("ReplicaSet %q is progressing.", newRS.Name)
			}
			// Unlike other conditions, Progressing is rewritten even when status and
			// reason are unchanged: lastUpdateTime is the deadline's starting point and
			// must move with every sign of progress.
			condition := rollout.NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, rollout.ReasonReplicaSetUpdated, msg, now)
			if currentCond != nil {
				if currentCond.Status == corev1.ConditionTrue {
					condition.LastTransitionTime = currentCond.LastTransitionTime
				}
				rollout.RemoveCondition(&newStatus, appsv1.DeploymentProgressing)
			}
			rollout.SetCondition(&newStatus, condition)

		case rollout.DeploymentTimedOut(d, &newStatus, now):
			msg := fmt.Sprintf("Deployment %q has timed out progressing.", d.Name)
			if newRS != nil {
				msg = fmt.Sprintf("ReplicaSet %q has timed out progressing.", newRS.Name)
			}
			rollout.SetCondition(&newStatus, rollout.NewCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, rollout.ReasonProgressDeadlineExceeded, msg, now))
		}
	}

	// Surface a ReplicaSet's failure to create or delete pods (quota, admission) on
	// the Deployment, preferring the new ReplicaSet's.
	if failure := replicaFailureCondition(allRSs, newRS); failure != nil {
		rollout.SetCondition(&newStatus, *failure)
	} else {
		rollout.RemoveCondition(&newStatus, appsv1.DeploymentReplicaFailure)
	}

	if equality.Semantic.DeepEqual(d.Status, newStatus) {
		c.requeueStuckDeployment(ctx, d, newStatus)
		return nil
	}
	d.Status = newStatus
	return c.updateStatus(ctx, d)
}

// replicaFailureCondition returns the ReplicaFailure condition of the new ReplicaSet,
// else that of the first old one (oldest first) that has one, as a Deployment
// condition; nil if none has.
func replicaFailureCondition(allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) *appsv1.DeploymentCondition {
	for _, rs := range append([]*appsv1.ReplicaSet{newRS}, allRSs...) {
		if rs == nil {
			continue
		}
		for _, cond := range rs.Status.Conditions {
			if cond.Type == appsv1.ReplicaSetReplicaFailure {
				converted := rollout.ReplicaSetToDeploymentCondition(cond)
				return &converted
			}
		}
	}
	return nil
}

// requeueStuckDeployment schedules a sync for just after the progress deadline of an
// unfinished rollout would pass, and returns the delay: -1 if no check is needed, 0 if
// the deadline is less than a second away (then the key is requeued with rate limiting,
// to stay safe from a hot loop while the condition catches up).
func (c *Controller) requeueStuckDeployment(ctx context.Context, d *appsv1.Deployment, newStatus appsv1.DeploymentStatus) time.Duration {
	logger := klog.FromContext(ctx)
	currentCond := rollout.GetCondition(d.Status, appsv1.DeploymentProgressing)
	if !rollout.HasProgressDeadline(d) || currentCond == nil {
		return -1
	}
	if rollout.DeploymentComplete(d, &newStatus) || currentCond.Reason == rollout.ReasonProgressDeadlineExceeded {
		return -1
	}
	deadline := time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second
	after := currentCond.LastUpdateTime.Add(deadline).Sub(c.now())
	if after < time.Second {
		logger.V(4).Info("Queueing up deployment for a progress check now")
		c.enqueueRateLimited(d)
		return 0
	}
	logger.V(4).Info("Queueing up deployment for a progress check", "queueAfter", after.Round(time.Second))
	// The extra second absorbs the sub-second truncation of lastUpdateTime, so the
	// check does not run a moment before the deadline and find nothing to report.
	c.enqueueAfter(d, after+time.Second)
	return after
}
