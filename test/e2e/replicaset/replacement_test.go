package replicaset

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// A pod of a ReplicaSet is deleted, another one fails; the controller replaces each
// with exactly one new pod, and at no moment are there more active pods than the
// ReplicaSet asks for. The failed pod is left for the user to inspect, as upstream
// does (TestDeletingAndFailedPods): a finished pod is not active, so it is neither
// counted nor deleted.
func TestReplicaSetReplacesADeletedOrFailedPodWithExactlyOne(t *testing.T) {
	e := startEnv(t)
	census := e.watchPods("app=web")
	rs := e.createReplicaSet(newReplicaSet("web", 4))
	e.waitForStatus("web", settled(4))
	before := e.activePodsOf(rs)

	deleted, failed := before[0].Name, before[1].Name
	t.Logf("delete pod %s and mark pod %s Failed", deleted, failed)
	e.deletePod(deleted)
	e.updatePodStatus(failed, func(pod *v1.Pod) {
		pod.Status.Phase = v1.PodFailed
		for i := range pod.Status.Conditions {
			if pod.Status.Conditions[i].Type == v1.PodReady || pod.Status.Conditions[i].Type == v1.ContainersReady {
				pod.Status.Conditions[i].Status = v1.ConditionFalse
			}
		}
	})

	e.waitForStatus("web", settled(4))
	// Give a second replacement, if the controller were to make one, time to appear:
	// the status above is written in the same sync that creates pods.
	time.Sleep(2 * time.Second)
	e.waitForStatus("web", settled(4))

	after := e.activePodsOf(rs)
	replacements := sets.New(podNames(after)...).Difference(sets.New(podNames(before)...))
	if len(after) != 4 || replacements.Len() != 2 {
		t.Fatalf("active pods went from %v to %v, want the deleted and the failed pod replaced by one new pod each",
			podNames(before), podNames(after))
	}
	if pod := e.getPod(failed); pod.Status.Phase != v1.PodFailed || pod.DeletionTimestamp != nil {
		t.Errorf("failed pod %s is %s, deleting=%v; the controller must leave finished pods alone",
			failed, pod.Status.Phase, pod.DeletionTimestamp != nil)
	}
	if deletes := e.controllerRequests(time.Time{}, func(ev *auditEvent) bool {
		return ev.ObjectRef.Resource == "pods" && ev.Verb == "delete"
	}); len(deletes) != 0 {
		t.Errorf("the controller deleted pods: %v", verbs(deletes))
	}

	// The watch saw every state: 4 original pods and 2 replacements ever existed, and
	// never more than 4 were active at once.
	if err := census.Err(); err != nil {
		t.Fatal(err)
	}
	if seen := census.Seen(); len(seen) != 6 {
		t.Errorf("%d pods existed over the test, want 4 + 2 replacements: %v", len(seen), seen)
	}
	if maxActive, at := census.MaxActive(); maxActive > 4 {
		t.Errorf("%d pods were active at once (first at %s), want at most 4", maxActive, at)
	}
	e.waitForEvents("web", v1.EventTypeNormal, "SuccessfulCreate", prefixed("Created pod: ", sets.List(
		sets.New(podNames(before)...).Union(replacements))))
}
