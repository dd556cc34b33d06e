package rollout

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestSetConditionKeepsTransitionTimeWhileStatusHolds(t *testing.T) {
	t0, t1 := baseTime, baseTime.Add(time.Minute)
	tests := []struct {
		name           string
		current        *appsv1.DeploymentCondition
		set            appsv1.DeploymentCondition
		wantReason     string
		wantMessage    string
		wantTransition time.Time
		wantUpdate     time.Time
	}{
		{
			name: "added when absent", set: NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, "A", "new", t1),
			wantReason: "A", wantMessage: "new", wantTransition: t1, wantUpdate: t1,
		},
		{
			name:       "same status and reason is not rewritten",
			current:    new(NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, "A", "old", t0)),
			set:        NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, "A", "new", t1),
			wantReason: "A", wantMessage: "old", wantTransition: t0, wantUpdate: t0,
		},
		{
			name:       "same status new reason keeps transition time",
			current:    new(NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, "A", "old", t0)),
			set:        NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, "B", "new", t1),
			wantReason: "B", wantMessage: "new", wantTransition: t0, wantUpdate: t1,
		},
		{
			name:       "new status moves transition time",
			current:    new(NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, "A", "old", t0)),
			set:        NewCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, "B", "new", t1),
			wantReason: "B", wantMessage: "new", wantTransition: t1, wantUpdate: t1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status := appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{
				NewCondition(appsv1.DeploymentAvailable, corev1.ConditionTrue, "X", "", t0),
			}}
			if tc.current != nil {
				status.Conditions = append(status.Conditions, *tc.current)
			}
			SetCondition(&status, tc.set)
			got := GetCondition(status, appsv1.DeploymentProgressing)
			if got == nil {
				t.Fatal("condition missing")
			}
			if got.Reason != tc.wantReason || got.Message != tc.wantMessage ||
				!got.LastTransitionTime.Time.Equal(tc.wantTransition) || !got.LastUpdateTime.Time.Equal(tc.wantUpdate) {
				t.Errorf("got %+v", *got)
			}
			if len(status.Conditions) != 2 || GetCondition(status, appsv1.DeploymentAvailable) == nil {
				t.Errorf("other conditions must survive: %+v", status.Conditions)
			}
			RemoveCondition(&status, appsv1.DeploymentProgressing)
			if GetCondition(status, appsv1.DeploymentProgressing) != nil || len(status.Conditions) != 1 {
				t.Errorf("remove failed: %+v", status.Conditions)
			}
		})
	}
}

func TestDeploymentComplete(t *testing.T) {
	tests := []struct {
		name                                string
		replicas, updated, total, available int32
		generation, observedGeneration      int64
		want                                bool
	}{
		{"complete", 5, 5, 5, 5, 1, 1, true},
		{"not all available", 5, 5, 5, 4, 1, 1, false},
		{"old pods remain", 5, 5, 6, 5, 1, 1, false},
		{"not all updated", 5, 4, 5, 5, 1, 1, false},
		{"stale generation", 5, 5, 5, 5, 2, 1, false},
		{"scaled to zero", 0, 0, 0, 0, 1, 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := rolling(tc.replicas, intstr.FromInt32(1), intstr.FromInt32(0))
			d.Generation = tc.generation
			status := appsv1.DeploymentStatus{UpdatedReplicas: tc.updated, Replicas: tc.total, AvailableReplicas: tc.available, ObservedGeneration: tc.observedGeneration}
			if got := DeploymentComplete(d, &status); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDeploymentProgressing(t *testing.T) {
	old := appsv1.DeploymentStatus{Replicas: 10, UpdatedReplicas: 4, ReadyReplicas: 8, AvailableReplicas: 7}
	tests := []struct {
		name   string
		mutate func(*appsv1.DeploymentStatus)
		want   bool
	}{
		{"no change", func(*appsv1.DeploymentStatus) {}, false},
		{"more updated", func(s *appsv1.DeploymentStatus) { s.UpdatedReplicas = 5; s.Replicas = 11 }, true},
		{"fewer old", func(s *appsv1.DeploymentStatus) { s.Replicas = 9 }, true},
		{"more ready", func(s *appsv1.DeploymentStatus) { s.ReadyReplicas = 9 }, true},
		{"more available", func(s *appsv1.DeploymentStatus) { s.AvailableReplicas = 8 }, true},
		{"more old pods is not progress", func(s *appsv1.DeploymentStatus) { s.Replicas = 11 }, false},
		{"fewer ready is not progress", func(s *appsv1.DeploymentStatus) { s.ReadyReplicas = 7 }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := rolling(10, intstr.FromInt32(1), intstr.FromInt32(0))
			d.Status = old
			next := old
			tc.mutate(&next)
			if got := DeploymentProgressing(d, &next); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDeploymentTimedOut(t *testing.T) {
	now := baseTime.Add(time.Hour)
	tests := []struct {
		name       string
		deadline   *int32
		reason     string // "" means no condition
		lastUpdate time.Time
		want       bool
	}{
		{"no deadline", nil, ReasonReplicaSetUpdated, now.Add(-time.Hour), false},
		{"no condition", new(int32(60)), "", time.Time{}, false},
		{"within deadline", new(int32(60)), ReasonReplicaSetUpdated, now.Add(-30 * time.Second), false},
		{"exactly at deadline is not yet late", new(int32(60)), ReasonReplicaSetUpdated, now.Add(-60 * time.Second), false},
		{"past deadline", new(int32(60)), ReasonReplicaSetUpdated, now.Add(-61 * time.Second), true},
		{"complete rollouts never time out", new(int32(60)), ReasonNewReplicaSetAvailable, now.Add(-time.Hour), false},
		{"already timed out", new(int32(60)), ReasonProgressDeadlineExceeded, now, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := rolling(1, intstr.FromInt32(1), intstr.FromInt32(0))
			d.Spec.ProgressDeadlineSeconds = tc.deadline
			var status appsv1.DeploymentStatus
			if tc.reason != "" {
				c := NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, tc.reason, "", tc.lastUpdate)
				status.Conditions = []appsv1.DeploymentCondition{c}
			}
			if got := DeploymentTimedOut(d, &status, now); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReplicaSetToDeploymentConditionUsesTransitionTimeForBoth(t *testing.T) {
	ts := metav1.NewTime(baseTime)
	c := ReplicaSetToDeploymentCondition(appsv1.ReplicaSetCondition{
		Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: "quota", LastTransitionTime: ts,
	})
	if c.Type != appsv1.DeploymentReplicaFailure || c.Reason != "FailedCreate" || c.Message != "quota" || !c.LastUpdateTime.Equal(&ts) || !c.LastTransitionTime.Equal(&ts) {
		t.Errorf("got %+v", c)
	}
}
