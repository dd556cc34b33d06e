package endpoints

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mini-kcm/mini-kcm/controllers/podstate"
)

// triggerTimeTracker computes the endpoints.kubernetes.io/last-change-trigger-time
// annotation: the time of the earliest change, since the previous sync of a Service, that
// this sync publishes. kube-proxy and SLO tooling read it to measure how long a change
// takes to reach the data path.
//
// A change is a pod's Ready condition moving to a later lastTransitionTime, or the
// Service's creationTimestamp moving (the Service was recreated). The first sync of a
// Service reports its creationTimestamp. If one object changes twice between two syncs
// only the last change is seen; upstream accepts that approximation and so do we.
type triggerTimeTracker struct {
	mu sync.Mutex
	// services holds, per Service, what the previous sync saw.
	services map[types.NamespacedName]triggerTimeState
}

// triggerTimeState is what one sync of a Service saw.
type triggerTimeState struct {
	// serviceTime is the Service's creationTimestamp.
	serviceTime time.Time
	// podTimes maps pod name to its Ready condition's lastTransitionTime.
	podTimes map[string]time.Time
}

func newTriggerTimeTracker() *triggerTimeTracker {
	return &triggerTimeTracker{services: map[types.NamespacedName]triggerTimeState{}}
}

// observe records the state of service and its selected pods and returns the trigger
// time to publish; the zero time means there is none and the annotation is removed.
// Calls for the same Service must not run concurrently; the workqueue guarantees it.
func (t *triggerTimeTracker) observe(service *v1.Service, pods []*v1.Pod) time.Time {
	key := types.NamespacedName{Namespace: service.Namespace, Name: service.Name}
	t.mu.Lock()
	previous, known := t.services[key]
	t.mu.Unlock()

	var earliest time.Time
	current := triggerTimeState{serviceTime: service.CreationTimestamp.Time, podTimes: map[string]time.Time{}}
	for _, pod := range pods {
		ready := podstate.ReadyCondition(pod.Status)
		if ready == nil || ready.LastTransitionTime.IsZero() {
			continue
		}
		podTime := ready.LastTransitionTime.Time
		current.podTimes[pod.Name] = podTime
		if podTime.After(previous.podTimes[pod.Name]) {
			earliest = earlier(earliest, podTime)
		}
	}
	if current.serviceTime.After(previous.serviceTime) {
		earliest = earlier(earliest, current.serviceTime)
	}

	t.mu.Lock()
	t.services[key] = current
	t.mu.Unlock()

	if !known {
		return service.CreationTimestamp.Time
	}
	return earliest
}

// forget drops the state of a deleted Service, so that a Service recreated under the same
// name starts over.
func (t *triggerTimeTracker) forget(namespace, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.services, types.NamespacedName{Namespace: namespace, Name: name})
}

// earlier returns the earlier of a and b, where a zero a means "none yet".
func earlier(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}
