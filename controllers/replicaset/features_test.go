package replicaset

import (
	"context"
	"errors"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/controllers/podcontrol"
)

// Each test turns one gate off and checks that the controller then does what upstream's
// does with that gate off, next to what it does with every gate on.

func TestScaleDownHonoursPodDeletionCostOnlyWithItsGate(t *testing.T) {
	tests := []struct {
		name        string
		features    controllers.Features
		wantDeleted string
	}{
		{"PodDeletionCost on: the cheap pod goes first", allFeatures, "cheap-old"},
		{"PodDeletionCost off: the annotation is ignored and the pod ready for less time goes",
			featuresWithout(PodDeletionCost), "young"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := newReplicaSet("web", 1)
			cheapOld := newPod("cheap-old", rs, true)
			cheapOld.Annotations = map[string]string{"controller.kubernetes.io/pod-deletion-cost": "-100"}
			young := newPod("young", rs, true)
			young.CreationTimestamp = metav1.NewTime(testNow.Add(-time.Second))
			young.Status.Conditions[0].LastTransitionTime = metav1.NewTime(testNow.Add(-time.Second))
			cheapOld.Spec.NodeName, young.Spec.NodeName = "node-a", "node-b"
			f := newFixtureWithFeatures(t, tt.features, BurstReplicas, rs, cheapOld, young)

			if err := f.sync(rs); err != nil {
				t.Fatal(err)
			}
			if got := f.podControl.DeletedPods; len(got) != 1 || got[0] != tt.wantDeleted {
				t.Errorf("deleted %v, want [%s]", got, tt.wantDeleted)
			}
		})
	}
}

func TestTerminatingReplicasAreReportedOnlyWithTheirGate(t *testing.T) {
	tests := []struct {
		name     string
		features controllers.Features
		want     *int32
	}{
		{"DeploymentReplicaSetTerminatingReplicas on: counted", allFeatures, new(int32(1))},
		// The earlier count is cleared rather than left to go stale, as upstream does.
		{"DeploymentReplicaSetTerminatingReplicas off: cleared",
			featuresWithout(controllers.DeploymentReplicaSetTerminatingReplicas), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := withStatus(newReplicaSet("web", 2), 2)
			rs.Status.TerminatingReplicas = new(int32(3))
			f := newFixtureWithFeatures(t, tt.features, BurstReplicas, rs,
				newPod("running-0", rs, true), newPod("running-1", rs, true), deleting(newPod("terminating", rs, true)))

			if err := f.sync(rs); err != nil {
				t.Fatal(err)
			}
			// Terminating pods are never active, gate or not: nothing to create.
			f.expectPodWrites(0, 0, 0)
			if got := f.lastStatus().TerminatingReplicas; optional(got) != optional(tt.want) {
				t.Errorf("status.terminatingReplicas = %v, want %v", optional(got), optional(tt.want))
			}
		})
	}
}

func TestSyncWaitsForItsOwnWritesOnlyWithStaleControllerConsistencyReplicaSet(t *testing.T) {
	tests := []struct {
		name      string
		features  controllers.Features
		wantStale bool
	}{
		{"StaleControllerConsistencyReplicaSet on: the next sync waits for the cache", allFeatures, true},
		{"StaleControllerConsistencyReplicaSet off: the next sync runs on the stale cache",
			featuresWithout(StaleControllerConsistencyReplicaSet), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := newReplicaSet("web", 1) // status.replicas 0: the sync writes status
			rs.ResourceVersion = "10"
			f := newFixtureWithFeatures(t, tt.features, BurstReplicas, rs, newPod("pod-0", rs, true))
			// The apiserver stores the status at resourceVersion 12; the cache stays at 10.
			f.client.PrependReactor("update", "replicasets", func(a clienttesting.Action) (bool, runtime.Object, error) {
				written := a.(clienttesting.UpdateAction).GetObject().(*appsv1.ReplicaSet).DeepCopy()
				written.ResourceVersion = "12"
				return true, written, nil
			})
			if err := f.sync(rs); err != nil {
				t.Fatal(err)
			}

			err := f.sync(rs)
			var stale *staleCacheError
			if got := errors.As(err, &stale); got != tt.wantStale {
				t.Errorf("second sync = %v, want a stale cache error: %v", err, tt.wantStale)
			}
		})
	}
}

func TestPodWritesAreNotTrackedWithStaleControllerConsistencyReplicaSetOff(t *testing.T) {
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := NewController(context.Background(), factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(),
		client, record.NewFakeRecorder(10), BurstReplicas, controllers.Features{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.queue.ShutDown()
	if c.consistency != nil {
		t.Error("the consistency guard exists with its gate off")
	}
	if real, ok := c.podControl.(*podcontrol.Real); !ok || real.OnWrite != nil {
		t.Errorf("pod control %#v, want one that reports no writes (upstream passes no callback)", c.podControl)
	}
}
