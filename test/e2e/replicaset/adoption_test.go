package replicaset

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A ReplicaSet is created over pods that already run: the controller adopts the
// matching orphans instead of creating pods, upgrades a plain reference to itself into
// a controllerRef, and leaves alone pods that another controller owns or that do not
// match. When one more orphan shows up, it is adopted too and the surplus deleted.
//
// The cases follow upstream's TestAdoption, TestGeneralPodAdoption and
// TestExtraPodsAdoptionAndDeletion (test/integration/replicaset).
func TestReplicaSetAdoptsMatchingOrphansAndLeavesOtherControllersPodsAlone(t *testing.T) {
	e := newEnv(t)
	// Everything exists before the controller first looks, as after an upgrade or
	// when a user re-creates a ReplicaSet deleted with --cascade=orphan.
	rs := e.createReplicaSet(newReplicaSet("web", 3))
	selectorOnly := map[string]string{"app": "web"}
	otherController := metav1.OwnerReference{
		APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "6b0a3ba6-0f7c-4b37-a9e3-6e7c1d3f0a11",
		Controller: new(true),
	}
	plainRefToRS := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID}

	orphanA := e.createPod(newPod("orphan-a", selectorOnly))
	orphanB := e.createPod(newPod("orphan-b", selectorOnly))
	referencing := newPod("referencing", templateLabels("web"))
	referencing.OwnerReferences = []metav1.OwnerReference{plainRefToRS}
	e.createPod(referencing)
	// Upstream's ClaimObject ignores a pod whose controller is someone else, even if
	// it also refers to the ReplicaSet.
	foreign := newPod("foreign", templateLabels("web"))
	foreign.OwnerReferences = []metav1.OwnerReference{otherController, plainRefToRS}
	foreign = e.createPod(foreign)
	unrelated := e.createPod(newPod("unrelated", map[string]string{"app": "api"}))

	start := time.Now()
	e.startController()

	// The two orphans carry only the selector's labels, so only the referencing pod
	// counts as fully labeled.
	e.waitForStatus("web", counts{Replicas: 3, FullyLabeled: 1, Ready: 3, Available: 3, Terminating: 0})
	for _, name := range []string{orphanA.Name, orphanB.Name, referencing.Name} {
		if pod := e.getPod(name); !reflect.DeepEqual(pod.OwnerReferences, []metav1.OwnerReference{controllerRefTo(rs)}) {
			t.Errorf("pod %s has ownerReferences %+v, want only the controllerRef %+v", name, pod.OwnerReferences, controllerRefTo(rs))
		}
	}
	if creates := e.controllerRequests(start, func(ev *auditEvent) bool {
		return ev.ObjectRef.Resource == "pods" && ev.Verb == "create"
	}); len(creates) != 0 {
		t.Errorf("the controller created pods although 3 matching pods existed: %v", verbs(creates))
	}

	t.Log("one more matching orphan appears")
	e.createPod(newPod("orphan-c", selectorOnly))
	// Adopted, then one of the four deleted; which one depends on readiness time and
	// age buckets (ActivePodsWithRanks), so the test only counts.
	e.waitForStatus("web", counts{Replicas: 3, FullyLabeled: 1, Ready: 3, Available: 3, Terminating: 0})
	e.waitFor(func() error {
		if deleted := e.eventMessages("web", v1.EventTypeNormal, "SuccessfulDelete"); len(deleted) != 1 {
			return fmt.Errorf("SuccessfulDelete events %q, want one", deleted)
		}
		return nil
	})
	if active := e.activePodsOf(rs); len(active) != 3 {
		t.Errorf("the ReplicaSet controls %v, want 3 pods", podNames(active))
	}
	if adopted := e.controllerRequests(start, podWrites("orphan-c")); len(adopted) == 0 || adopted[0].Verb != "patch" {
		t.Errorf("requests for orphan-c: %v, want an adoption patch first", verbs(adopted))
	}

	// The foreign and the unrelated pod were never written by the controller.
	for _, pod := range []*v1.Pod{foreign, unrelated} {
		if writes := e.controllerRequests(start, podWrites(pod.Name)); len(writes) != 0 {
			t.Errorf("the controller wrote pod %s: %v", pod.Name, verbs(writes))
		}
		if got := e.getPod(pod.Name); !reflect.DeepEqual(got.OwnerReferences, pod.OwnerReferences) {
			t.Errorf("pod %s has ownerReferences %+v, want them unchanged %+v", pod.Name, got.OwnerReferences, pod.OwnerReferences)
		}
	}
	if creates := e.controllerRequests(start, func(ev *auditEvent) bool {
		return ev.ObjectRef.Resource == "pods" && ev.Verb == "create"
	}); len(creates) != 0 {
		t.Errorf("the controller created pods: %v", verbs(creates))
	}
}

// A user relabels a pod to take it out of service for debugging: the controller
// releases it (the pod keeps running, without an ownerReference) and creates a
// replacement. When the labels are put back, the pod is adopted again, and the
// ReplicaSet, now one pod over, deletes one. This is upstream's
// TestPodOrphaningAndAdoptionWhenLabelsChange.
func TestReplicaSetReleasesAPodWhoseLabelsStopMatchingAndAdoptsItBack(t *testing.T) {
	e := startEnv(t)
	rs := e.createReplicaSet(newReplicaSet("web", 2))
	e.waitForStatus("web", settled(2))
	before := e.activePodsOf(rs)
	debugged := before[0].Name

	t.Logf("relabel pod %s so that the selector no longer matches", debugged)
	released := time.Now()
	e.updatePod(debugged, func(pod *v1.Pod) { pod.Labels = map[string]string{"app": "web-debug"} })
	e.waitFor(func() error {
		if refs := e.getPod(debugged).OwnerReferences; len(refs) != 0 {
			return fmt.Errorf("pod %s still has ownerReferences %+v", debugged, refs)
		}
		return nil
	})
	// The status alone cannot say when the replacement exists: until the sync that
	// released the pod writes it, the ReplicaSet still shows the 2 pods of before.
	e.waitFor(func() error {
		if active := e.activePodsOf(rs); len(active) != 2 || active[0].Name == debugged || active[1].Name == debugged {
			return fmt.Errorf("after the release the ReplicaSet controls %v, want 2 pods without %s", podNames(active), debugged)
		}
		return nil
	})
	e.waitForStatus("web", settled(2))
	if pod := e.getPod(debugged); !isActive(pod) || !isReady(pod) {
		t.Errorf("the released pod %s was disturbed: phase %s, ready %v, deleting %v",
			debugged, pod.Status.Phase, isReady(pod), pod.DeletionTimestamp != nil)
	}

	t.Logf("put the labels of pod %s back", debugged)
	readopted := time.Now()
	e.updatePod(debugged, func(pod *v1.Pod) { pod.Labels = templateLabels("web") })
	e.waitFor(func() error {
		if patches := e.controllerRequests(readopted, podWrites(debugged)); len(patches) == 0 || patches[0].Verb != "patch" {
			return fmt.Errorf("requests for %s since its labels were restored: %v, want an adoption patch", debugged, verbs(patches))
		}
		return nil
	})
	// Three pods now match; one of them goes, and two remain, all controlled.
	e.waitForStatus("web", settled(2))
	e.waitFor(func() error { return onlyControlledActivePods(e, rs, 2) })
	if patches := e.controllerRequests(released, podWrites(debugged)); len(patches) < 2 {
		t.Errorf("requests for %s: %v, want a release patch and an adoption patch", debugged, verbs(patches))
	}
}

// onlyControlledActivePods checks that the namespace holds exactly n active pods and
// that rs controls each of them.
func onlyControlledActivePods(e *env, rs *appsv1.ReplicaSet, n int) error {
	var active []v1.Pod
	for _, pod := range e.pods() {
		if !isActive(&pod) {
			continue
		}
		if !metav1.IsControlledBy(&pod, rs) {
			return fmt.Errorf("active pod %s is not controlled by %s: %+v", pod.Name, rs.Name, pod.OwnerReferences)
		}
		active = append(active, pod)
	}
	if len(active) != n {
		return fmt.Errorf("%d active pods %v, want %d", len(active), podNames(active), n)
	}
	return nil
}

// Two ReplicaSets select the same pods (a user error, but a common one): each keeps
// its own pods and ignores the other's, so together they run 1 + 2 pods. This is
// upstream's TestOverlappingRSs; the controllerRef decides, not the selector.
func TestOverlappingReplicaSetsEachKeepTheirOwnPods(t *testing.T) {
	e := startEnv(t)
	first := newReplicaSet("first", 1)
	second := newReplicaSet("second", 2)
	for _, rs := range []*appsv1.ReplicaSet{first, second} {
		rs.Spec.Selector.MatchLabels = map[string]string{"app": "shared"}
		rs.Spec.Template.Labels = map[string]string{"app": "shared"}
	}
	first = e.createReplicaSet(first)
	e.waitForStatus("first", settled(1))
	start := time.Now()
	second = e.createReplicaSet(second)
	e.waitForStatus("second", settled(2))
	e.waitForStatus("first", settled(1))

	if pods := e.pods(); len(pods) != 3 {
		t.Errorf("%d pods %v, want 1 + 2", len(pods), podNames(pods))
	}
	firstPods := e.activePodsOf(first)
	if len(firstPods) != 1 || len(e.activePodsOf(second)) != 2 {
		t.Errorf("first controls %v, second %v; want 1 and 2 pods", podNames(firstPods), podNames(e.activePodsOf(second)))
	}
	for _, pod := range firstPods {
		if writes := e.controllerRequests(start, podWrites(pod.Name)); len(writes) != 0 {
			t.Errorf("the controller wrote pod %s of the first ReplicaSet while syncing the second: %v", pod.Name, verbs(writes))
		}
	}
}
