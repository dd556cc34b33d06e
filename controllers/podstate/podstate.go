// Package podstate answers the questions every workload controller asks about a pod:
// does it still count (active), is it on its way out (terminating), is it ready, and has
// it been ready long enough to be available. The answers follow upstream's
// pkg/controller and pkg/api/v1/pod helpers exactly, so that replica counts agree with
// kube-controller-manager on the same inputs.
package podstate

import (
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IsTerminal reports whether the pod reached a phase it can never leave (Succeeded or
// Failed): its containers are stopped for good.
func IsTerminal(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}

// IsActive reports whether the pod still counts towards its owner's replicas: it is not
// terminal and nobody asked to delete it.
func IsActive(pod *v1.Pod) bool {
	return !IsTerminal(pod) && pod.DeletionTimestamp == nil
}

// IsTerminating reports whether the pod was asked to go away but may still be running:
// it has a deletionTimestamp and has not reached a terminal phase.
func IsTerminating(pod *v1.Pod) bool {
	return !IsTerminal(pod) && pod.DeletionTimestamp != nil
}

// ReadyCondition returns the pod's Ready condition, or nil if the kubelet has not
// reported one. The result shares memory with the pod's conditions (which usually sit
// in an informer cache), so callers must not modify it.
func ReadyCondition(status v1.PodStatus) *v1.PodCondition {
	for i := range status.Conditions {
		if status.Conditions[i].Type == v1.PodReady {
			return &status.Conditions[i]
		}
	}
	return nil
}

// IsReady reports whether the pod's Ready condition is True.
func IsReady(pod *v1.Pod) bool {
	c := ReadyCondition(pod.Status)
	return c != nil && c.Status == v1.ConditionTrue
}

// IsAvailable reports whether the pod has been ready for at least minReadySeconds at
// now. With minReadySeconds 0 a ready pod is available at once; otherwise a Ready
// condition without lastTransitionTime never becomes available, as upstream.
func IsAvailable(pod *v1.Pod, minReadySeconds int32, now metav1.Time) bool {
	if !IsReady(pod) {
		return false
	}
	if minReadySeconds == 0 {
		return true
	}
	c := ReadyCondition(pod.Status)
	if c.LastTransitionTime.IsZero() {
		return false
	}
	return !c.LastTransitionTime.Add(time.Duration(minReadySeconds) * time.Second).After(now.Time)
}

// ReadyTime returns when the pod last became ready, or the zero time if it is not ready
// (or the kubelet did not record the transition).
func ReadyTime(pod *v1.Pod) metav1.Time {
	if c := ReadyCondition(pod.Status); c != nil && c.Status == v1.ConditionTrue {
		return c.LastTransitionTime
	}
	return metav1.Time{}
}

// untilAvailable returns how long after now the ready pod becomes available, or false if
// it is not ready, minReadySeconds is 0, the transition time is unknown, or it already is.
func untilAvailable(pod *v1.Pod, minReadySeconds int32, now time.Time) (time.Duration, bool) {
	if minReadySeconds <= 0 || !IsReady(pod) {
		return 0, false
	}
	c := ReadyCondition(pod.Status)
	if c.LastTransitionTime.IsZero() {
		return 0, false
	}
	wait := c.LastTransitionTime.Add(time.Duration(minReadySeconds) * time.Second).Sub(now)
	return wait, wait > 0
}

// NextAvailabilityCheck returns how long to wait before the next ready pod becomes
// available, or false if no pod is waiting for minReadySeconds to pass.
//
// The pod is chosen as of evaluatedAt, the instant the owner's status was computed, so
// that a pod counted as "not yet available" in that status is never missed. The wait is
// then measured from now (time has passed since evaluatedAt); if that pod has become
// available in the meantime the result is 0, an immediate recheck.
func NextAvailabilityCheck(pods []*v1.Pod, minReadySeconds int32, evaluatedAt, now time.Time) (time.Duration, bool) {
	var first *v1.Pod
	var soonest time.Duration
	for _, pod := range pods {
		if wait, ok := untilAvailable(pod, minReadySeconds, evaluatedAt); ok && (first == nil || wait < soonest) {
			first, soonest = pod, wait
		}
	}
	if first == nil {
		return 0, false
	}
	if wait, ok := untilAvailable(first, minReadySeconds, now); ok {
		return wait, true
	}
	return 0, true
}
