package endpoints

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	t0 = time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 = t0.Add(time.Second)
	t2 = t1.Add(time.Second)
	t3 = t2.Add(time.Second)
	t4 = t3.Add(time.Second)
	t5 = t4.Add(time.Second)
)

func serviceCreatedAt(created time.Time) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "svc", CreationTimestamp: metav1.NewTime(created)}}
}

func podReadyAt(name string, ready time.Time) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Status: v1.PodStatus{Conditions: []v1.PodCondition{
			{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(ready)},
		}},
	}
}

// step is one sync: the Service and pods it sees and the trigger time it must report
// (zero for none).
type step struct {
	service *v1.Service
	pods    []*v1.Pod
	want    time.Time
	// forgetFirst deletes the Service's state before the step, as a Service deletion does.
	forgetFirst bool
}

func TestTriggerTime(t *testing.T) {
	service := serviceCreatedAt(t0)
	tests := []struct {
		name  string
		steps []step
	}{
		{"a new Service without pods reports its creation", []step{
			{service: serviceCreatedAt(t2), want: t2},
		}},
		{"a new Service reports its creation even if pods changed later", []step{
			{service: serviceCreatedAt(t3), pods: []*v1.Pod{podReadyAt("pod1", t0), podReadyAt("pod2", t1), podReadyAt("pod3", t5)}, want: t3},
		}},
		{"added pods report the earliest readiness", []step{
			{service: service, want: t0},
			{service: service, pods: []*v1.Pod{podReadyAt("pod1", t2), podReadyAt("pod2", t1)}, want: t1},
		}},
		{"updated pods report the earliest changed readiness", []step{
			{service: service, pods: []*v1.Pod{podReadyAt("pod1", t1), podReadyAt("pod2", t2), podReadyAt("pod3", t3)}, want: t0},
			{service: service, pods: []*v1.Pod{podReadyAt("pod1", t5), podReadyAt("pod2", t4), podReadyAt("pod3", t3)}, want: t4},
		}},
		{"nothing changed reports nothing", []step{
			{service: service, pods: []*v1.Pod{podReadyAt("pod1", t1), podReadyAt("pod2", t2)}, want: t0},
			{service: service, pods: []*v1.Pod{podReadyAt("pod1", t1), podReadyAt("pod2", t2)}},
		}},
		{"a pod deleted and added again reports its readiness", []step{
			{service: service, pods: []*v1.Pod{podReadyAt("pod1", t1), podReadyAt("pod2", t2)}, want: t0},
			{service: service, pods: []*v1.Pod{podReadyAt("pod1", t1)}},
			{service: service, pods: []*v1.Pod{podReadyAt("pod1", t1), podReadyAt("pod2", t4)}, want: t4},
		}},
		{"a Service deleted and created again reports its new creation", []step{
			{service: service, pods: []*v1.Pod{podReadyAt("pod1", t1), podReadyAt("pod2", t2)}, want: t0},
			{service: serviceCreatedAt(t3), pods: []*v1.Pod{podReadyAt("pod1", t1), podReadyAt("pod2", t2)}, want: t3, forgetFirst: true},
		}},
		{"a Service spec change alone reports nothing", []step{
			{service: service, pods: []*v1.Pod{podReadyAt("pod1", t1)}, want: t0},
			{service: func() *v1.Service { s := service.DeepCopy(); s.Spec.Ports = []v1.ServicePort{{Port: 80}}; return s }(),
				pods: []*v1.Pod{podReadyAt("pod1", t1)}},
		}},
		{"pods without a Ready condition report nothing", []step{
			{service: service, want: t0},
			{service: service, pods: []*v1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "pod1"}}}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tracker := newTriggerTimeTracker()
			for i, s := range tc.steps {
				if s.forgetFirst {
					tracker.forget(s.service.Namespace, s.service.Name)
				}
				if got := tracker.observe(s.service, s.pods); !got.Equal(s.want) {
					t.Errorf("step %d: trigger time %v, want %v", i, got, s.want)
				}
			}
		})
	}
}
