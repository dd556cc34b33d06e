package replicaset

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// podDeletionCostAnnotation lets a user say which pods of a ReplicaSet to delete first
// on scale-down (lower cost first); the PodDeletionCost gate is on by default.
const podDeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

// A ReplicaSet with some broken pods is scaled down: the pods that are not ready go
// first, even if a user gave them a high deletion cost, and among the ready pods those
// with the lowest cost go next (no annotation counts as cost 0).
//
// This is upstream's ActivePodsWithRanks.Less (pkg/controller/controller_utils.go),
// which compares, in order: scheduled, phase, readiness, deletion cost, co-location
// rank, ready time, restarts, age. All pods here are scheduled and Running, and a
// standalone ReplicaSet ranks every pod 0, so readiness and then cost decide.
func TestScaleDownDeletesNotReadyPodsFirstThenTheLowestDeletionCost(t *testing.T) {
	e := startEnv(t)
	rs := e.createReplicaSet(newReplicaSet("web", 6))
	e.waitForStatus("web", settled(6))
	pods := podNames(e.activePodsOf(rs))

	notReady := pods[:2]
	costs := map[string]string{pods[2]: "10", pods[3]: "-5", pods[5]: "20"} // pods[4]: no annotation
	keep := []string{pods[2], pods[5]}
	for _, name := range notReady {
		e.updatePod(name, func(pod *v1.Pod) { metav1.SetMetaDataAnnotation(&pod.ObjectMeta, podDeletionCostAnnotation, "1000") })
		e.updatePodStatus(name, func(pod *v1.Pod) {
			for i := range pod.Status.Conditions {
				if c := &pod.Status.Conditions[i]; c.Type == v1.PodReady || c.Type == v1.ContainersReady {
					c.Status, c.LastTransitionTime = v1.ConditionFalse, metav1.Now()
				}
			}
		})
	}
	for name, cost := range costs {
		e.updatePod(name, func(pod *v1.Pod) { metav1.SetMetaDataAnnotation(&pod.ObjectMeta, podDeletionCostAnnotation, cost) })
	}
	e.waitForStatus("web", counts{Replicas: 6, FullyLabeled: 6, Ready: 4, Available: 4, Terminating: 0})

	e.scale("web", 2)
	e.waitForStatus("web", settled(2))
	if got := podNames(e.activePodsOf(rs)); !reflect.DeepEqual(got, keep) {
		t.Errorf("after scaling 6 -> 2 the pods %v remain, want %v (costs 10 and 20); not ready: %v, costs: %v",
			got, keep, notReady, costs)
	}
	deleted := sets.List(sets.New(pods...).Delete(keep...))
	e.waitForEvents("web", v1.EventTypeNormal, "SuccessfulDelete", prefixed("Deleted pod: ", deleted))
}
