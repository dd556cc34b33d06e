package replicaset

import (
	"errors"
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCalculateStatusCounts(t *testing.T) {
	rs := newReplicaSet("web", 3)
	rs.Spec.MinReadySeconds = 60
	readyLong := newPod("ready-long", rs, true)
	readyNow := newPod("ready-now", rs, true)
	readyNow.Status.Conditions[0].LastTransitionTime = metav1.NewTime(testNow)
	pending := notReady(newPod("pending", rs, true))
	partlyLabeled := newPod("partly-labeled", rs, true)
	partlyLabeled.Labels = map[string]string{"app": "web"}
	extraLabels := newPod("extra-labels", rs, true)
	extraLabels.Labels["extra"] = "yes"

	tests := []struct {
		name        string
		active      []*v1.Pod
		terminating []*v1.Pod
		want        appsv1.ReplicaSetStatus
	}{
		{"no pods", nil, nil, appsv1.ReplicaSetStatus{TerminatingReplicas: new(int32(0))}},
		{
			"ready for longer than minReadySeconds is available",
			[]*v1.Pod{readyLong}, nil,
			appsv1.ReplicaSetStatus{Replicas: 1, FullyLabeledReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, TerminatingReplicas: new(int32(0))},
		},
		{
			"just ready is not yet available",
			[]*v1.Pod{readyNow}, nil,
			appsv1.ReplicaSetStatus{Replicas: 1, FullyLabeledReplicas: 1, ReadyReplicas: 1, TerminatingReplicas: new(int32(0))},
		},
		{
			"not ready counts as a replica only",
			[]*v1.Pod{pending}, nil,
			appsv1.ReplicaSetStatus{Replicas: 1, FullyLabeledReplicas: 1, TerminatingReplicas: new(int32(0))},
		},
		{
			"fully labeled needs every template label, extra labels are fine",
			[]*v1.Pod{partlyLabeled, extraLabels}, nil,
			appsv1.ReplicaSetStatus{Replicas: 2, FullyLabeledReplicas: 1, ReadyReplicas: 2, AvailableReplicas: 2, TerminatingReplicas: new(int32(0))},
		},
		{
			"terminating pods are counted apart",
			[]*v1.Pod{readyLong}, []*v1.Pod{deleting(newPod("t1", rs, true)), deleting(newPod("t2", rs, true))},
			appsv1.ReplicaSetStatus{Replicas: 1, FullyLabeledReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, TerminatingReplicas: new(int32(2))},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := rs.DeepCopy()
			in.Status = appsv1.ReplicaSetStatus{}
			got := calculateStatus(in, tt.active, tt.terminating, true, nil, testNow)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("status\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestCalculateStatusReplicaFailureCondition(t *testing.T) {
	rs := newReplicaSet("web", 2)
	failing := newReplicaSet("web", 10)
	existing := appsv1.ReplicaSetCondition{
		Type: appsv1.ReplicaSetReplicaFailure, Status: v1.ConditionTrue, Reason: "FailedCreate",
		Message: "first failure", LastTransitionTime: metav1.NewTime(testNow.Add(-time.Hour)),
	}
	failing.Status.Conditions = []appsv1.ReplicaSetCondition{existing}
	errManage := errors.New("fake manageReplicasErr")
	failure := func(reason string) []appsv1.ReplicaSetCondition {
		return []appsv1.ReplicaSetCondition{{
			Type: appsv1.ReplicaSetReplicaFailure, Status: v1.ConditionTrue, Reason: reason,
			Message: "fake manageReplicasErr", LastTransitionTime: metav1.NewTime(testNow),
		}}
	}
	tests := []struct {
		name      string
		rs        *appsv1.ReplicaSet
		active    int
		manageErr error
		want      []appsv1.ReplicaSetCondition
	}{
		{"failed while scaling up", rs, 1, errManage, failure("FailedCreate")},
		{"failed while scaling down", rs, 3, errManage, failure("FailedDelete")},
		{"failed at the right size has no reason", rs, 2, errManage, failure("")},
		{"success removes the condition", failing, 1, nil, nil},
		{"a persisting failure keeps the first condition", failing, 1, errManage, []appsv1.ReplicaSetCondition{existing}},
		{"success without a condition adds none", rs, 1, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.rs.DeepCopy()
			got := calculateStatus(tt.rs, newPods("pod", tt.active, tt.rs), nil, true, tt.manageErr, testNow)
			if !reflect.DeepEqual(got.Conditions, tt.want) {
				t.Errorf("conditions\n got %+v\nwant %+v", got.Conditions, tt.want)
			}
			if !reflect.DeepEqual(before, tt.rs) {
				t.Error("calculateStatus modified the ReplicaSet")
			}
		})
	}
}

func TestConditionHelpers(t *testing.T) {
	condition := func(condType appsv1.ReplicaSetConditionType, status v1.ConditionStatus, reason string) appsv1.ReplicaSetCondition {
		return appsv1.ReplicaSetCondition{Type: condType, Status: status, Reason: reason}
	}
	const other appsv1.ReplicaSetConditionType = "Other"
	failure := condition(appsv1.ReplicaSetReplicaFailure, v1.ConditionTrue, "FailedCreate")

	t.Run("get", func(t *testing.T) {
		status := appsv1.ReplicaSetStatus{Conditions: []appsv1.ReplicaSetCondition{failure}}
		if got := getCondition(status, appsv1.ReplicaSetReplicaFailure); got == nil || *got != failure {
			t.Errorf("getCondition = %v", got)
		}
		if got := getCondition(status, other); got != nil {
			t.Errorf("getCondition of a missing type = %v", got)
		}
	})

	tests := []struct {
		name string
		have []appsv1.ReplicaSetCondition
		set  appsv1.ReplicaSetCondition
		want []appsv1.ReplicaSetCondition
	}{
		{"add to empty", nil, failure, []appsv1.ReplicaSetCondition{failure}},
		{"add beside another type", []appsv1.ReplicaSetCondition{condition(other, v1.ConditionTrue, "")}, failure,
			[]appsv1.ReplicaSetCondition{condition(other, v1.ConditionTrue, ""), failure}},
		{"same status and reason keeps the old one",
			[]appsv1.ReplicaSetCondition{{Type: appsv1.ReplicaSetReplicaFailure, Status: v1.ConditionTrue, Reason: "FailedCreate", Message: "old"}},
			appsv1.ReplicaSetCondition{Type: appsv1.ReplicaSetReplicaFailure, Status: v1.ConditionTrue, Reason: "FailedCreate", Message: "new"},
			[]appsv1.ReplicaSetCondition{{Type: appsv1.ReplicaSetReplicaFailure, Status: v1.ConditionTrue, Reason: "FailedCreate", Message: "old"}}},
		{"new reason replaces", []appsv1.ReplicaSetCondition{failure}, condition(appsv1.ReplicaSetReplicaFailure, v1.ConditionTrue, "FailedDelete"),
			[]appsv1.ReplicaSetCondition{condition(appsv1.ReplicaSetReplicaFailure, v1.ConditionTrue, "FailedDelete")}},
		{"new status replaces", []appsv1.ReplicaSetCondition{failure}, condition(appsv1.ReplicaSetReplicaFailure, v1.ConditionFalse, "FailedCreate"),
			[]appsv1.ReplicaSetCondition{condition(appsv1.ReplicaSetReplicaFailure, v1.ConditionFalse, "FailedCreate")}},
	}
	for _, tt := range tests {
		t.Run("set: "+tt.name, func(t *testing.T) {
			status := appsv1.ReplicaSetStatus{Conditions: tt.have}
			setCondition(&status, tt.set)
			if !reflect.DeepEqual(status.Conditions, tt.want) {
				t.Errorf("conditions %+v, want %+v", status.Conditions, tt.want)
			}
		})
	}

	t.Run("remove", func(t *testing.T) {
		status := appsv1.ReplicaSetStatus{Conditions: []appsv1.ReplicaSetCondition{condition(other, v1.ConditionTrue, ""), failure}}
		removeCondition(&status, appsv1.ReplicaSetReplicaFailure)
		if !reflect.DeepEqual(status.Conditions, []appsv1.ReplicaSetCondition{condition(other, v1.ConditionTrue, "")}) {
			t.Errorf("conditions %+v", status.Conditions)
		}
		removeCondition(&status, other)
		if status.Conditions != nil {
			t.Errorf("removing the last condition left %+v", status.Conditions)
		}
	})
}

func TestStatusUnchangedComparesEveryCalculatedField(t *testing.T) {
	base := appsv1.ReplicaSetStatus{
		Replicas: 3, FullyLabeledReplicas: 3, ReadyReplicas: 2, AvailableReplicas: 1, TerminatingReplicas: new(int32(1)),
	}
	changes := map[string]func(*appsv1.ReplicaSetStatus){
		"replicas":             func(s *appsv1.ReplicaSetStatus) { s.Replicas++ },
		"fullyLabeledReplicas": func(s *appsv1.ReplicaSetStatus) { s.FullyLabeledReplicas-- },
		"readyReplicas":        func(s *appsv1.ReplicaSetStatus) { s.ReadyReplicas++ },
		"availableReplicas":    func(s *appsv1.ReplicaSetStatus) { s.AvailableReplicas++ },
		"terminatingReplicas":  func(s *appsv1.ReplicaSetStatus) { s.TerminatingReplicas = new(int32(2)) },
		"terminatingReplicas unset": func(s *appsv1.ReplicaSetStatus) {
			s.TerminatingReplicas = nil
		},
		"conditions": func(s *appsv1.ReplicaSetStatus) {
			s.Conditions = []appsv1.ReplicaSetCondition{{Type: appsv1.ReplicaSetReplicaFailure}}
		},
	}
	if !statusUnchanged(base, *base.DeepCopy()) {
		t.Fatal("equal statuses compare as changed")
	}
	for field, change := range changes {
		changed := base.DeepCopy()
		change(changed)
		if statusUnchanged(base, *changed) {
			t.Errorf("a change of %s went unnoticed", field)
		}
	}
}
