package replicaset

import (
	"context"
	"reflect"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/controllers/podcontrol"
	"github.com/mini-kcm/mini-kcm/controllers/podstate"
)

// statusUpdateRetries is how many times a conflicting status write is retried on a
// freshly read ReplicaSet within one sync; after that the key is requeued with backoff.
const statusUpdateRetries = 1

// calculateStatus returns rs's status as seen now: the counts of the active pods rs
// owns, the terminating ones if countTerminating (the
// DeploymentReplicaSetTerminatingReplicas gate), and the ReplicaFailure condition that
// reports manageErr. rs is not modified.
func calculateStatus(rs *appsv1.ReplicaSet, activePods, terminatingPods []*v1.Pod, countTerminating bool, manageErr error, now time.Time) appsv1.ReplicaSetStatus {
	status := *rs.Status.DeepCopy()

	// A pod is fully labeled if it carries every template label. The template labels
	// include the selector, so only active (selected) pods can qualify, but a pod
	// adopted with fewer labels than the template does not.
	templateLabels := labels.Set(rs.Spec.Template.Labels).AsSelectorPreValidated()
	var fullyLabeled, ready, available int32
	for _, pod := range activePods {
		if templateLabels.Matches(labels.Set(pod.Labels)) {
			fullyLabeled++
		}
		if podstate.IsReady(pod) {
			ready++
			if podstate.IsAvailable(pod, rs.Spec.MinReadySeconds, metav1.NewTime(now)) {
				available++
			}
		}
	}

	// The condition reports the first failure and stays until a sync succeeds; a
	// failure that persists does not rewrite it (and its lastTransitionTime).
	failure := getCondition(rs.Status, appsv1.ReplicaSetReplicaFailure)
	switch {
	case manageErr != nil && failure == nil:
		reason := ""
		if diff := len(activePods) - int(*rs.Spec.Replicas); diff < 0 {
			reason = podcontrol.FailedCreateReason
		} else if diff > 0 {
			reason = podcontrol.FailedDeleteReason
		}
		setCondition(&status, newCondition(appsv1.ReplicaSetReplicaFailure, v1.ConditionTrue, reason, manageErr.Error(), now))
	case manageErr == nil && failure != nil:
		removeCondition(&status, appsv1.ReplicaSetReplicaFailure)
	}

	status.Replicas = int32(len(activePods))
	status.FullyLabeledReplicas = fullyLabeled
	status.ReadyReplicas = ready
	status.AvailableReplicas = available
	// With the gate off the field is cleared, as upstream does: a count written before
	// the gate was turned off would never be updated again.
	status.TerminatingReplicas = nil
	if countTerminating {
		status.TerminatingReplicas = new(int32(len(terminatingPods)))
	}
	return status
}

// updateStatus writes newStatus to rs (a copy the caller owns) with observedGeneration
// set, and returns the written ReplicaSet. It writes nothing, and returns rs, if the
// status would not change and the generation was already observed: most syncs are
// triggered by pod events that leave the counts alone. A conflicting write is retried
// once on a freshly read ReplicaSet.
func (c *Controller) updateStatus(ctx context.Context, rs *appsv1.ReplicaSet, newStatus appsv1.ReplicaSetStatus) (*appsv1.ReplicaSet, error) {
	if statusUnchanged(rs.Status, newStatus) && rs.Generation == rs.Status.ObservedGeneration {
		return rs, nil
	}
	logger := klog.FromContext(ctx)
	client := c.client.AppsV1().ReplicaSets(rs.Namespace)
	// Record the generation this status was computed for, once: a retry on a newer
	// object must not claim to have seen a spec this sync did not act on.
	newStatus.ObservedGeneration = rs.Generation
	for attempt := 0; ; attempt++ {
		logger.V(4).Info("Updating ReplicaSet status",
			"replicas", counts(rs.Status.Replicas, newStatus.Replicas, *rs.Spec.Replicas),
			"fullyLabeledReplicas", counts(rs.Status.FullyLabeledReplicas, newStatus.FullyLabeledReplicas, -1),
			"readyReplicas", counts(rs.Status.ReadyReplicas, newStatus.ReadyReplicas, -1),
			"availableReplicas", counts(rs.Status.AvailableReplicas, newStatus.AvailableReplicas, -1),
			"terminatingReplicas", []any{optional(rs.Status.TerminatingReplicas), optional(newStatus.TerminatingReplicas)},
			"observedGeneration", []int64{rs.Status.ObservedGeneration, newStatus.ObservedGeneration})
		rs.Status = newStatus
		updated, err := client.UpdateStatus(ctx, rs, metav1.UpdateOptions{})
		if err == nil {
			return updated, nil
		}
		if attempt >= statusUpdateRetries {
			return nil, err
		}
		// Retry on the latest version. If even the read fails, the counts in rs can no
		// longer be trusted, and the read error says more than the write error.
		fresh, getErr := client.Get(ctx, rs.Name, metav1.GetOptions{})
		if getErr != nil {
			return nil, getErr
		}
		rs = fresh
	}
}

// statusUnchanged compares everything calculateStatus sets.
func statusUnchanged(old, cur appsv1.ReplicaSetStatus) bool {
	return old.Replicas == cur.Replicas &&
		old.FullyLabeledReplicas == cur.FullyLabeledReplicas &&
		old.ReadyReplicas == cur.ReadyReplicas &&
		old.AvailableReplicas == cur.AvailableReplicas &&
		equalOptional(old.TerminatingReplicas, cur.TerminatingReplicas) &&
		reflect.DeepEqual(old.Conditions, cur.Conditions)
}

func equalOptional(a, b *int32) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// optional renders an optional count for logs: nil stays visible as "nil".
func optional(v *int32) any {
	if v == nil {
		return "nil"
	}
	return *v
}

// counts renders "old->new" transitions (and the desired count, if not negative) for logs.
func counts(old, cur, want int32) []int32 {
	if want < 0 {
		return []int32{old, cur}
	}
	return []int32{old, cur, want}
}

// newCondition returns a condition that transitioned at now.
func newCondition(condType appsv1.ReplicaSetConditionType, status v1.ConditionStatus, reason, message string, now time.Time) appsv1.ReplicaSetCondition {
	return appsv1.ReplicaSetCondition{
		Type:               condType,
		Status:             status,
		LastTransitionTime: metav1.NewTime(now),
		Reason:             reason,
		Message:            message,
	}
}

// getCondition returns a copy of the condition of the given type, or nil.
func getCondition(status appsv1.ReplicaSetStatus, condType appsv1.ReplicaSetConditionType) *appsv1.ReplicaSetCondition {
	for _, c := range status.Conditions {
		if c.Type == condType {
			return &c
		}
	}
	return nil
}

// setCondition adds or replaces the condition of cond's type, unless one with the
// same status and reason exists: then nothing changes, not even the message, so that
// lastTransitionTime keeps meaning "since when".
func setCondition(status *appsv1.ReplicaSetStatus, cond appsv1.ReplicaSetCondition) {
	if current := getCondition(*status, cond.Type); current != nil && current.Status == cond.Status && current.Reason == cond.Reason {
		return
	}
	status.Conditions = append(withoutCondition(status.Conditions, cond.Type), cond)
}

// removeCondition removes the condition of the given type.
func removeCondition(status *appsv1.ReplicaSetStatus, condType appsv1.ReplicaSetConditionType) {
	status.Conditions = withoutCondition(status.Conditions, condType)
}

// withoutCondition returns a new slice of the conditions not of the given type (nil if
// none remain, which keeps a status with no conditions comparable to one never set).
func withoutCondition(conditions []appsv1.ReplicaSetCondition, condType appsv1.ReplicaSetConditionType) []appsv1.ReplicaSetCondition {
	var kept []appsv1.ReplicaSetCondition
	for _, c := range conditions {
		if c.Type != condType {
			kept = append(kept, c)
		}
	}
	return kept
}
