package replicaset

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/retry"
)

// A user scales a ReplicaSet up and down by editing spec.replicas and through the
// /scale subresource (as kubectl scale and the HorizontalPodAutoscaler do); the
// controller creates and deletes exactly the difference, reports every generation it
// acted on, and records an event per pod.
func TestReplicaSetScalesUpAndDownThroughSpecAndScaleSubresource(t *testing.T) {
	e := startEnv(t)
	rs := e.createReplicaSet(newReplicaSet("web", 2))
	e.waitForStatus("web", settled(2))
	original := podNames(e.activePodsOf(rs))

	t.Log("scale up to 5 by editing spec.replicas")
	generation := e.scale("web", 5)
	if got := e.waitForStatus("web", settled(5)); got.Status.ObservedGeneration != generation {
		t.Fatalf("observedGeneration = %d, want %d", got.Status.ObservedGeneration, generation)
	}
	afterUp := sets.New(podNames(e.activePodsOf(rs))...)
	if !afterUp.HasAll(original...) {
		t.Fatalf("scaling up replaced pods: before %v, after %v", original, sets.List(afterUp))
	}

	t.Log("scale down to 1 by editing spec.replicas")
	e.scale("web", 1)
	e.waitForStatus("web", settled(1))
	afterDown := sets.New(podNames(e.activePodsOf(rs))...)
	deleted := sets.List(afterUp.Difference(afterDown))
	if afterDown.Len() != 1 || len(deleted) != 4 {
		t.Fatalf("after scaling down from %v: %v remain, want 1 of them", sets.List(afterUp), sets.List(afterDown))
	}
	e.waitForEvents("web", v1.EventTypeNormal, "SuccessfulDelete", prefixed("Deleted pod: ", deleted))

	t.Log("scale up to 3 through the scale subresource")
	previous := e.getReplicaSet("web").Generation
	e.updateScale("web", 3)
	got := e.getReplicaSet("web")
	if *got.Spec.Replicas != 3 || got.Generation != previous+1 {
		t.Fatalf("after UpdateScale(3): spec.replicas %d at generation %d, want 3 at generation %d",
			*got.Spec.Replicas, got.Generation, previous+1)
	}
	if got := e.waitForStatus("web", settled(3)); got.Status.ObservedGeneration != previous+1 {
		t.Fatalf("observedGeneration = %d, want %d", got.Status.ObservedGeneration, previous+1)
	}
	e.waitForScaleStatus("web", 3)

	t.Log("scale down to 0 through the scale subresource")
	e.updateScale("web", 0)
	e.waitForStatus("web", settled(0))
	e.waitForScaleStatus("web", 0)
	if pods := e.pods(); len(pods) != 0 {
		t.Fatalf("%d pods %v remain after scaling to 0", len(pods), podNames(pods))
	}

	// Every pod ever created and deleted has its event: 2+3+2 creations, 4+3 deletions.
	if got := e.eventMessages("web", v1.EventTypeNormal, "SuccessfulCreate"); len(got) != 7 {
		t.Errorf("%d SuccessfulCreate events, want 7: %q", len(got), got)
	}
	if got := e.eventMessages("web", v1.EventTypeNormal, "SuccessfulDelete"); len(got) != 7 {
		t.Errorf("%d SuccessfulDelete events, want 7: %q", len(got), got)
	}
}

// updateScale sets spec.replicas through the /scale subresource.
func (e *env) updateScale(name string, replicas int32) {
	e.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		scale, err := e.client.AppsV1().ReplicaSets(e.ns).GetScale(e.ctx(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		scale.Spec.Replicas = replicas
		_, err = e.client.AppsV1().ReplicaSets(e.ns).UpdateScale(e.ctx(), name, scale, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.t.Fatalf("scaling ReplicaSet %s to %d through /scale: %v", name, replicas, err)
	}
}

// waitForScaleStatus waits until the /scale subresource reports replicas pods and the
// ReplicaSet's selector, which is what an autoscaler reads.
func (e *env) waitForScaleStatus(name string, replicas int32) {
	e.t.Helper()
	e.waitFor(func() error {
		scale, err := e.client.AppsV1().ReplicaSets(e.ns).GetScale(e.ctx(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if scale.Spec.Replicas != replicas || scale.Status.Replicas != replicas || scale.Status.Selector != "app="+name {
			return fmt.Errorf("scale of %s: spec %d, status %d, selector %q; want %d, %d, %q",
				name, scale.Spec.Replicas, scale.Status.Replicas, scale.Status.Selector, replicas, replicas, "app="+name)
		}
		return nil
	})
}
