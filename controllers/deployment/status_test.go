package deployment

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mini-kcm/mini-kcm/controllers/deployment/rollout"
)

func TestCalculateStatusSumsReplicaSets(t *testing.T) {
	d := newDeployment("foo", 10, intstr.FromInt32(3), intstr.FromInt32(2))
	d.Generation = 4
	d.Status.CollisionCount = new(int32(2))
	oldRS := sizedRS("old", 8, 0, 10, 13)
	oldRS.Status = appsv1.ReplicaSetStatus{Replicas: 9, ReadyReplicas: 8, AvailableReplicas: 7, ObservedGeneration: 1, TerminatingReplicas: new(int32(1))}
	newRS := sizedRS("new", 5, 1, 10, 13)
	newRS.Status = appsv1.ReplicaSetStatus{Replicas: 4, ReadyReplicas: 2, AvailableReplicas: 1, ObservedGeneration: 1, TerminatingReplicas: new(int32(0))}
	f := newFixture(t)

	status := f.c.calculateStatus([]*appsv1.ReplicaSet{oldRS, newRS}, newRS, d)
	want := appsv1.DeploymentStatus{
		ObservedGeneration: 4, Replicas: 13, UpdatedReplicas: 4, ReadyReplicas: 10, AvailableReplicas: 8,
		UnavailableReplicas: 5, CollisionCount: d.Status.CollisionCount,
	}
	if status.ObservedGeneration != want.ObservedGeneration || status.Replicas != want.Replicas || status.UpdatedReplicas != want.UpdatedReplicas ||
		status.ReadyReplicas != want.ReadyReplicas || status.AvailableReplicas != want.AvailableReplicas ||
		status.UnavailableReplicas != want.UnavailableReplicas || *status.CollisionCount != 2 {
		t.Errorf("status = %+v", status)
	}
	if status.TerminatingReplicas == nil || *status.TerminatingReplicas != 1 {
		t.Errorf("terminatingReplicas = %v, want 1", status.TerminatingReplicas)
	}
	// 8 available >= 10 - 2.
	if cond := rollout.GetCondition(status, appsv1.DeploymentAvailable); cond == nil || cond.Status != corev1.ConditionTrue ||
		cond.Reason != rollout.ReasonMinimumReplicasAvailable || cond.Message != "Deployment has minimum availability." {
		t.Errorf("Available = %+v", cond)
	}
}

func TestCalculateStatusAvailability(t *testing.T) {
	tests := []struct {
		name       string
		d          *appsv1.Deployment
		available  int32
		want       corev1.ConditionStatus
		wantReason string
	}{
		{"rolling at the minimum", newDeployment("foo", 10, intstr.FromInt32(1), intstr.FromInt32(2)), 8, corev1.ConditionTrue, rollout.ReasonMinimumReplicasAvailable},
		{"rolling below the minimum", newDeployment("foo", 10, intstr.FromInt32(1), intstr.FromInt32(2)), 7, corev1.ConditionFalse, rollout.ReasonMinimumReplicasUnavailable},
		{"recreate needs every replica", newRecreateDeployment("foo", 3), 2, corev1.ConditionFalse, rollout.ReasonMinimumReplicasUnavailable},
		{"zero replicas is always available", newDeployment("foo", 0, intstr.FromInt32(1), intstr.FromInt32(2)), 0, corev1.ConditionTrue, rollout.ReasonMinimumReplicasAvailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs := sizedRS("rs", *tc.d.Spec.Replicas, 0, 0, 0)
			rs.Status.Replicas, rs.Status.AvailableReplicas = *tc.d.Spec.Replicas, tc.available
			f := newFixture(t)
			status := f.c.calculateStatus([]*appsv1.ReplicaSet{rs}, rs, tc.d)
			cond := rollout.GetCondition(status, appsv1.DeploymentAvailable)
			if cond == nil || cond.Status != tc.want || cond.Reason != tc.wantReason {
				t.Errorf("Available = %+v", cond)
			}
		})
	}
}

func TestCalculateStatusEdgeCases(t *testing.T) {
	d := newDeployment("foo", 2, intstr.FromInt32(1), intstr.FromInt32(0))
	// More available than desired while scaling down: unavailable is 0, not negative.
	rs := sizedRS("rs", 2, 0, 0, 0)
	rs.Status = appsv1.ReplicaSetStatus{Replicas: 4, AvailableReplicas: 4, ObservedGeneration: 1}
	f := newFixture(t)
	status := f.c.calculateStatus([]*appsv1.ReplicaSet{rs}, nil, d)
	if status.UnavailableReplicas != 0 || status.UpdatedReplicas != 0 {
		t.Errorf("unavailable %d updated %d, want 0 and 0", status.UnavailableReplicas, status.UpdatedReplicas)
	}
	// rs was synced by its controller but reports no terminating count: unknown.
	if status.TerminatingReplicas != nil {
		t.Errorf("terminatingReplicas = %d, want nil", *status.TerminatingReplicas)
	}
	// The cached status's conditions must not be modified through the result.
	d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "X"}}
	status = f.c.calculateStatus([]*appsv1.ReplicaSet{rs}, nil, d)
	if d.Status.Conditions[0].Reason != "X" || status.Conditions[0].Reason != rollout.ReasonMinimumReplicasAvailable {
		t.Errorf("conditions: stored %+v computed %+v", d.Status.Conditions, status.Conditions)
	}
}

func TestSyncDeploymentStatusSkipsUnchangedStatus(t *testing.T) {
	d := newDeployment("foo", 1, intstr.FromInt32(1), intstr.FromInt32(0))
	rs := sizedRS("rs", 1, 0, 1, 2)
	rs.Status = appsv1.ReplicaSetStatus{Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	f := newFixture(t, d)
	if err := f.c.syncDeploymentStatus(f.ctx, []*appsv1.ReplicaSet{rs}, rs, d); err != nil {
		t.Fatal(err)
	}
	if len(f.writes()) != 1 {
		t.Fatalf("writes = %v, want one status update", f.writes())
	}
	f.client.ClearActions()
	if err := f.c.syncDeploymentStatus(f.ctx, []*appsv1.ReplicaSet{rs}, rs, d); err != nil {
		t.Fatal(err)
	}
	if w := f.writes(); len(w) != 0 {
		t.Errorf("writes = %v, want none", w)
	}
}
