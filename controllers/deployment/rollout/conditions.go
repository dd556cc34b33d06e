package rollout

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition reasons and event reasons, spelled exactly as upstream: kubectl rollout
// status and many CD tools match on them.
const (
	// ReasonReplicaSetUpdated (Progressing=True): the rollout made progress.
	ReasonReplicaSetUpdated = "ReplicaSetUpdated"
	// ReasonReplicaSetCreateError (Progressing=False, and a Warning event): the new
	// ReplicaSet could not be created.
	ReasonReplicaSetCreateError = "ReplicaSetCreateError"
	// ReasonNewReplicaSetCreated (Progressing=True): the new ReplicaSet was created.
	ReasonNewReplicaSetCreated = "NewReplicaSetCreated"
	// ReasonFoundNewReplicaSet (Progressing=True): a Deployment without a Progressing
	// condition already had its new ReplicaSet.
	ReasonFoundNewReplicaSet = "FoundNewReplicaSet"
	// ReasonNewReplicaSetAvailable (Progressing=True): the rollout is complete.
	ReasonNewReplicaSetAvailable = "NewReplicaSetAvailable"
	// ReasonProgressDeadlineExceeded (Progressing=False): no progress within
	// progressDeadlineSeconds.
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	// ReasonDeploymentPaused (Progressing=Unknown): paused, so progress is not judged.
	ReasonDeploymentPaused = "DeploymentPaused"
	// ReasonDeploymentResumed (Progressing=Unknown): resumed; the deadline restarts now
	// rather than counting the time spent paused.
	ReasonDeploymentResumed = "DeploymentResumed"
	// ReasonMinimumReplicasAvailable (Available=True).
	ReasonMinimumReplicasAvailable = "MinimumReplicasAvailable"
	// ReasonMinimumReplicasUnavailable (Available=False).
	ReasonMinimumReplicasUnavailable = "MinimumReplicasUnavailable"

	// ReasonRollbackRevisionNotFound is the Warning event when the rollback target is missing.
	ReasonRollbackRevisionNotFound = "DeploymentRollbackRevisionNotFound"
	// ReasonRollbackTemplateUnchanged is the Warning event when the target template is the current one.
	ReasonRollbackTemplateUnchanged = "DeploymentRollbackTemplateUnchanged"
	// ReasonRollbackDone is the Normal event of a performed rollback.
	ReasonRollbackDone = "DeploymentRollback"
)

// NewCondition returns a condition whose update and transition times are now.
func NewCondition(condType appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason, message string, now time.Time) appsv1.DeploymentCondition {
	t := metav1.NewTime(now)
	return appsv1.DeploymentCondition{
		Type:               condType,
		Status:             status,
		LastUpdateTime:     t,
		LastTransitionTime: t,
		Reason:             reason,
		Message:            message,
	}
}

// GetCondition returns a copy of the condition of the given type, or nil.
func GetCondition(status appsv1.DeploymentStatus, condType appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range status.Conditions {
		if status.Conditions[i].Type == condType {
			c := status.Conditions[i]
			return &c
		}
	}
	return nil
}

// SetCondition puts the condition into the status. A condition with the same status and
// reason as the current one is not written at all, so its message and times stay; one
// with the same status but a new reason keeps the current lastTransitionTime. The
// condition moves to the end of the list, as upstream does.
func SetCondition(status *appsv1.DeploymentStatus, condition appsv1.DeploymentCondition) {
	current := GetCondition(*status, condition.Type)
	if current != nil && current.Status == condition.Status && current.Reason == condition.Reason {
		return
	}
	if current != nil && current.Status == condition.Status {
		condition.LastTransitionTime = current.LastTransitionTime
	}
	status.Conditions = append(filterOutCondition(status.Conditions, condition.Type), condition)
}

// RemoveCondition removes the condition of the given type.
func RemoveCondition(status *appsv1.DeploymentStatus, condType appsv1.DeploymentConditionType) {
	status.Conditions = filterOutCondition(status.Conditions, condType)
}

func filterOutCondition(conditions []appsv1.DeploymentCondition, condType appsv1.DeploymentConditionType) []appsv1.DeploymentCondition {
	var kept []appsv1.DeploymentCondition
	for _, c := range conditions {
		if c.Type != condType {
			kept = append(kept, c)
		}
	}
	return kept
}

// ReplicaSetToDeploymentCondition turns a ReplicaSet's condition (ReplicaFailure) into
// the Deployment condition that surfaces it; the transition time doubles as update time.
func ReplicaSetToDeploymentCondition(cond appsv1.ReplicaSetCondition) appsv1.DeploymentCondition {
	return appsv1.DeploymentCondition{
		Type:               appsv1.DeploymentConditionType(cond.Type),
		Status:             cond.Status,
		LastTransitionTime: cond.LastTransitionTime,
		LastUpdateTime:     cond.LastTransitionTime,
		Reason:             cond.Reason,
		Message:            cond.Message,
	}
}

// DeploymentComplete reports whether every desired replica is updated and available, no
// old pod remains, and the status describes the current generation.
func DeploymentComplete(d *appsv1.Deployment, newStatus *appsv1.DeploymentStatus) bool {
	desired := DesiredReplicas(d)
	return newStatus.UpdatedReplicas == desired &&
		newStatus.Replicas == desired &&
		newStatus.AvailableReplicas == desired &&
		newStatus.ObservedGeneration >= d.Generation
}

// DeploymentProgressing reports whether newStatus shows progress over the stored status:
// more updated, ready or available pods, or fewer old pods.
func DeploymentProgressing(d *appsv1.Deployment, newStatus *appsv1.DeploymentStatus) bool {
	oldStatus := d.Status
	oldStatusOldReplicas := oldStatus.Replicas - oldStatus.UpdatedReplicas
	newStatusOldReplicas := newStatus.Replicas - newStatus.UpdatedReplicas
	return newStatus.UpdatedReplicas > oldStatus.UpdatedReplicas ||
		newStatusOldReplicas < oldStatusOldReplicas ||
		newStatus.ReadyReplicas > oldStatus.ReadyReplicas ||
		newStatus.AvailableReplicas > oldStatus.AvailableReplicas
}

// DeploymentTimedOut reports whether the last recorded progress (the Progressing
// condition's lastUpdateTime) is older than progressDeadlineSeconds at now, or the
// deadline was already reported exceeded. A completed rollout never times out: its
// condition may be old simply because nothing has happened since.
func DeploymentTimedOut(d *appsv1.Deployment, newStatus *appsv1.DeploymentStatus, now time.Time) bool {
	if !HasProgressDeadline(d) {
		return false
	}
	condition := GetCondition(*newStatus, appsv1.DeploymentProgressing)
	if condition == nil {
		return false
	}
	switch condition.Reason {
	case ReasonNewReplicaSetAvailable:
		return false
	case ReasonProgressDeadlineExceeded:
		return true
	}
	deadline := time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second
	return condition.LastUpdateTime.Add(deadline).Before(now)
}
