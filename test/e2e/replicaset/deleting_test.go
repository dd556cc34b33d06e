package replicaset

import (
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A ReplicaSet is deleted but a finalizer keeps it (as the garbage collector's
// foregroundDeletion would while it removes the pods). From then on the controller
// only reports status: it replaces no pod, adopts no orphan, and does not even release
// a pod whose labels stopped matching, so that the garbage collector still finds it
// (upstream's syncReplicaSet skips manageReplicas when deletionTimestamp is set, and
// ClaimObject neither adopts nor releases for an owner being deleted).
func TestAReplicaSetBeingDeletedNeitherAdoptsNorCreatesNorReleases(t *testing.T) {
	e := startEnv(t)
	rs := newReplicaSet("web", 2)
	rs.Finalizers = []string{holdFinalizer}
	rs = e.createReplicaSet(rs)
	e.waitForStatus("web", settled(2))
	pods := podNames(e.activePodsOf(rs))

	deletedAt := time.Now()
	if err := e.client.AppsV1().ReplicaSets(e.ns).Delete(e.ctx(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rs = e.getReplicaSet("web")
	if rs.DeletionTimestamp == nil || !reflect.DeepEqual(rs.Finalizers, []string{holdFinalizer}) {
		t.Fatalf("ReplicaSet after delete: deletionTimestamp %v, finalizers %v; want it kept by %s only",
			rs.DeletionTimestamp, rs.Finalizers, holdFinalizer)
	}

	orphan := e.createPod(newPod("orphan", templateLabels("web")))
	e.updatePod(pods[0], func(pod *v1.Pod) { pod.Labels = map[string]string{"app": "web-debug"} })
	// The status write of a sync comes after its claim and manage steps, so once the
	// status shows the relabeled pod gone, a sync that could have adopted the orphan
	// (created earlier) and created a replacement has run.
	e.waitForStatus("web", settled(1))
	e.deletePod(pods[1])
	e.waitForStatus("web", settled(0))
	// Later syncs (from the ReplicaSet's own status update) would not change that, but
	// they get a moment to prove it.
	time.Sleep(2 * time.Second)

	if writes := e.controllerRequests(deletedAt, podWrites("")); len(writes) != 0 {
		t.Errorf("the controller wrote pods after the ReplicaSet's deletion: %v", verbs(writes))
	}
	if refs := e.getPod(orphan.Name).OwnerReferences; len(refs) != 0 {
		t.Errorf("the orphan was adopted: %+v", refs)
	}
	if refs := e.getPod(pods[0]).OwnerReferences; !reflect.DeepEqual(refs, []metav1.OwnerReference{controllerRefTo(rs)}) {
		t.Errorf("the relabeled pod has ownerReferences %+v, want its controllerRef kept %+v", refs, controllerRefTo(rs))
	}
	want := []string{orphan.Name, pods[0]}
	sort.Strings(want)
	if got := podNames(e.pods()); !reflect.DeepEqual(got, want) {
		t.Errorf("pods %v, want only the orphan and the relabeled pod %v", got, want)
	}
	e.waitFor(func() error {
		if created := e.eventMessages("web", v1.EventTypeNormal, "SuccessfulCreate"); len(created) != 2 {
			return fmt.Errorf("SuccessfulCreate events %q, want only the 2 from before the deletion", created)
		}
		return nil
	})
}
