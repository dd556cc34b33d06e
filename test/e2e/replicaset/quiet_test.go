package replicaset

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A ReplicaSet whose pods are all running: changes that do not affect its status (a
// new annotation on the ReplicaSet or on a pod) make the controller sync, and it
// writes nothing, because upstream's updateReplicaSetStatus skips the write when the
// status and observedGeneration would not change. The audit log shows every status
// write the controller made.
func TestASteadyReplicaSetGetsNoStatusWrites(t *testing.T) {
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
	syncsBefore := e.syncCount()

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
	e.waitFor(func() error {
		if syncs := e.syncCount(); syncs < syncsBefore+3 {
			return fmt.Errorf("%v syncs since the quiet period began, want at least 3", syncs-syncsBefore)
		}
		return nil
	})
	time.Sleep(time.Second)

	if writes := statusWrites(quietSince); len(writes) != 0 {
		t.Errorf("the controller wrote the status of a steady ReplicaSet %d times: %v", len(writes), verbs(writes))
	}
	if got := e.waitForStatus("web", settled(3)); got.Status.ObservedGeneration != 1 {
		t.Errorf("observedGeneration = %d, want 1 (annotations do not change the generation)", got.Status.ObservedGeneration)
	}
}

// syncCount returns how many ReplicaSet syncs the controller has finished.
func (e *env) syncCount() float64 {
	e.t.Helper()
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
	return total
}
