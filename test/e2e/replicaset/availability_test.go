package replicaset

import (
	"testing"
	"time"
)

// A ReplicaSet with minReadySeconds: its pods are ready at once but count as available
// only once they have stayed ready that long. Nothing announces that moment (no pod
// changes), so the controller must come back by itself: upstream's syncReplicaSet
// requeues the ReplicaSet for the earliest moment a ready pod becomes available.
func TestMinReadySecondsMakesReadyPodsAvailableOnlyAfterThatLong(t *testing.T) {
	const minReadySeconds = 8
	e := startEnv(t)
	rs := newReplicaSet("web", 2)
	rs.Spec.MinReadySeconds = minReadySeconds
	rs = e.createReplicaSet(rs)

	e.waitForStatus("web", counts{Replicas: 2, FullyLabeled: 2, Ready: 2, Available: 0, Terminating: 0})
	readyPods := e.activePodsOf(rs)
	versions := map[string]string{}
	for _, pod := range readyPods {
		versions[pod.Name] = pod.ResourceVersion
	}

	got := e.waitForStatus("web", settled(2))
	observed := time.Now()
	for _, pod := range readyPods {
		// Availability is judged by the Ready condition's lastTransitionTime, so the
		// controller may count a pod only once that time plus minReadySeconds passed.
		readySince := readyCondition(&pod).LastTransitionTime.Time
		if availableAt := readySince.Add(minReadySeconds * time.Second); observed.Before(availableAt) {
			t.Errorf("pod %s ready since %v counted available before %v", pod.Name, readySince, availableAt)
		}
	}
	// No pod changed while the controller waited: it woke up by itself.
	for _, pod := range e.activePodsOf(rs) {
		if versions[pod.Name] != pod.ResourceVersion {
			t.Errorf("pod %s changed (resourceVersion %s -> %s); the test wants the controller to act without a pod event",
				pod.Name, versions[pod.Name], pod.ResourceVersion)
		}
	}
	if got.Generation != 1 {
		t.Errorf("the ReplicaSet's spec changed (generation %d)", got.Generation)
	}
	if len(got.Status.Conditions) != 0 {
		t.Errorf("conditions = %+v, want none", got.Status.Conditions)
	}
}
