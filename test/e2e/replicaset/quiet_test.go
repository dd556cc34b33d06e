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

// A ReplicaSet whose pods are all running: changes that do not affect its status (a
// new annotation on the ReplicaSet or on a pod) make the controller sync, and it
// writes nothing, because upstream's updateReplicaSetStatus skips the write when the
// status and observedGeneration would not change. A template change only moves
// observedGeneration, with one write, and leaves the pods alone. The audit log shows
// every write the controller made.
func TestASteadyReplicaSetGetsNoStatusWritesAndATemplateChangeExactlyOne(t *testing.T) {
	e := startEnv(t)
	rs := e.createReplicaSet(newReplicaSet("web", 3))
	e.waitForStatus("web", settled(3))
	pods := podNames(e.activePodsOf(rs))

	statusWrites := func(since time.Time) []auditEvent {
		return e.controllerRequests(since, func(ev *auditEvent) bool {
			return ev.Resource() == "replicasets/status" && ev.ObjectRef.Name == "web" && ev.Verb != "get"
		})
	}
	// The filter finds the writes that brought the status here, so that finding none
	// later means something.
	e.waitFor(func() error {
		if writes := statusWrites(time.Time{}); len(writes) == 0 {
			return fmt.Errorf("no status writes by the controller in the audit log")
		}
		return nil
	})
	syncsBefore, counted := e.syncCount()

	quietSince := time.Now()
	for i := range 3 {
		e.updateReplicaSet("web", func(rs *appsv1.ReplicaSet) {
			metav1.SetMetaDataAnnotation(&rs.ObjectMeta, "example.com/touched", fmt.Sprint(i))
		})
		e.updatePod(pods[i], func(pod *v1.Pod) {
			metav1.SetMetaDataAnnotation(&pod.ObjectMeta, "example.com/touched", fmt.Sprint(i))
		})
		time.Sleep(time.Second)
	}
	// The changes above woke the controller (a change arriving while the previous one
	// is still queued shares its sync).
	if counted {
		e.waitFor(func() error {
			if syncs, _ := e.syncCount(); syncs < syncsBefore+3 {
				return fmt.Errorf("%v syncs since the quiet period began, want at least 3", syncs-syncsBefore)
			}
			return nil
		})
	}
	time.Sleep(time.Second)

	if writes := statusWrites(quietSince); len(writes) != 0 {
		t.Errorf("the controller wrote the status of a steady ReplicaSet %d times: %v", len(writes), verbs(writes))
	}
	if got := e.waitForStatus("web", settled(3)); got.Status.ObservedGeneration != 1 {
		t.Errorf("observedGeneration = %d, want 1 (annotations do not change the generation)", got.Status.ObservedGeneration)
	}

	t.Log("change the pod template: a new generation, acknowledged by exactly one status write")
	templateChanged := time.Now()
	generation := e.updateReplicaSet("web", func(rs *appsv1.ReplicaSet) {
		rs.Spec.Template.Annotations = map[string]string{"example.com/config": "v2"}
	}).Generation
	if got := e.waitForStatus("web", settled(3)); got.Status.ObservedGeneration != generation {
		t.Fatalf("observedGeneration = %d, want %d", got.Status.ObservedGeneration, generation)
	}
	// The write of observedGeneration wakes the controller once more; that sync
	// finds nothing to change.
	time.Sleep(2 * time.Second)
	if writes := statusWrites(templateChanged); len(writes) != 1 {
		t.Errorf("the controller wrote the status %d times for a template change, want once: %v", len(writes), verbs(writes))
	}
	// A ReplicaSet never updates the pods it has: the template is for new pods only.
	if got := podNames(e.activePodsOf(rs)); !reflect.DeepEqual(got, pods) {
		t.Errorf("pods %v after a template change, want them unchanged %v", got, pods)
	}
	if writes := e.controllerRequests(templateChanged, podWrites("")); len(writes) != 0 {
		t.Errorf("the controller wrote pods after a template change: %v", verbs(writes))
	}
}

// syncCount returns how many ReplicaSet syncs the controller has finished, from
// mini-kcm's metrics; false when the suite runs against upstream, which has no such
// metric (and serves none here).
func (e *env) syncCount() (float64, bool) {
	e.t.Helper()
	if e.controller == nil {
		e.t.Log("no sync count from kube-controller-manager; the quiet period is checked without it")
		return 0, false
	}
	m, err := e.controller.Metrics()
	if err != nil {
		e.t.Fatal(err)
	}
	var total float64
	for _, s := range m["mini_kcm_controller_sync_total"] {
		if s.Labels["controller"] == controllerName {
			total += s.Value
		}
	}
	return total, true
}
