package podstate

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func podWith(phase v1.PodPhase, deleting bool, ready v1.ConditionStatus, readySince time.Time) *v1.Pod {
	pod := &v1.Pod{Status: v1.PodStatus{Phase: phase}}
	if deleting {
		pod.DeletionTimestamp = &metav1.Time{Time: now}
	}
	if ready != "" {
		pod.Status.Conditions = []v1.PodCondition{
			{Type: v1.PodScheduled, Status: v1.ConditionTrue},
			{Type: v1.PodReady, Status: ready, LastTransitionTime: metav1.Time{Time: readySince}},
		}
	}
	return pod
}

func TestActiveAndTerminatingFollowPhaseAndDeletionTimestamp(t *testing.T) {
	tests := []struct {
		name            string
		phase           v1.PodPhase
		deleting        bool
		wantActive      bool
		wantTerminating bool
	}{
		{"pending pod is active", v1.PodPending, false, true, false},
		{"running pod is active", v1.PodRunning, false, true, false},
		{"unknown phase pod is active", v1.PodUnknown, false, true, false},
		{"pod without a phase is active", "", false, true, false},
		{"succeeded pod is neither", v1.PodSucceeded, false, false, false},
		{"failed pod is neither", v1.PodFailed, false, false, false},
		{"running pod being deleted is terminating", v1.PodRunning, true, false, true},
		{"pending pod being deleted is terminating", v1.PodPending, true, false, true},
		{"failed pod being deleted is not terminating", v1.PodFailed, true, false, false},
		{"succeeded pod being deleted is not terminating", v1.PodSucceeded, true, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := podWith(tt.phase, tt.deleting, "", time.Time{})
			if got := IsActive(pod); got != tt.wantActive {
				t.Errorf("IsActive = %v, want %v", got, tt.wantActive)
			}
			if got := IsTerminating(pod); got != tt.wantTerminating {
				t.Errorf("IsTerminating = %v, want %v", got, tt.wantTerminating)
			}
		})
	}
}

func TestAvailabilityWaitsForMinReadySeconds(t *testing.T) {
	tests := []struct {
		name            string
		ready           v1.ConditionStatus
		readySince      time.Time
		minReadySeconds int32
		wantReady       bool
		wantAvailable   bool
	}{
		{"no ready condition", "", time.Time{}, 0, false, false},
		{"ready false", v1.ConditionFalse, now.Add(-time.Hour), 0, false, false},
		{"ready unknown", v1.ConditionUnknown, now.Add(-time.Hour), 0, false, false},
		{"ready with no minReadySeconds", v1.ConditionTrue, now, 0, true, true},
		{"ready without transition time and no minReadySeconds", v1.ConditionTrue, time.Time{}, 0, true, true},
		{"ready without transition time never becomes available", v1.ConditionTrue, time.Time{}, 5, true, false},
		{"ready for less than minReadySeconds", v1.ConditionTrue, now.Add(-4 * time.Second), 5, true, false},
		{"ready for exactly minReadySeconds", v1.ConditionTrue, now.Add(-5 * time.Second), 5, true, true},
		{"ready for longer than minReadySeconds", v1.ConditionTrue, now.Add(-time.Minute), 5, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := podWith(v1.PodRunning, false, tt.ready, tt.readySince)
			if got := IsReady(pod); got != tt.wantReady {
				t.Errorf("IsReady = %v, want %v", got, tt.wantReady)
			}
			if got := IsAvailable(pod, tt.minReadySeconds, metav1.Time{Time: now}); got != tt.wantAvailable {
				t.Errorf("IsAvailable = %v, want %v", got, tt.wantAvailable)
			}
		})
	}
}

func TestReadyConditionFindsTheReadyConditionAmongOthers(t *testing.T) {
	pod := podWith(v1.PodRunning, false, v1.ConditionTrue, now)
	c := ReadyCondition(pod.Status)
	if c == nil || c.Type != v1.PodReady || c.Status != v1.ConditionTrue {
		t.Fatalf("ReadyCondition = %+v, want the Ready=True condition", c)
	}
	if ReadyCondition(v1.PodStatus{}) != nil {
		t.Error("ReadyCondition of an empty status should be nil")
	}
}

func TestNextAvailabilityCheckPicksTheEarliestPod(t *testing.T) {
	tests := []struct {
		name        string
		pods        []*v1.Pod
		evaluatedAt time.Time
		now         time.Time
		wantWait    time.Duration
		wantOK      bool
	}{
		{
			name:   "no pods",
			wantOK: false,
		},
		{
			name: "only not-ready and already-available pods",
			pods: []*v1.Pod{
				podWith(v1.PodRunning, false, v1.ConditionFalse, now),
				podWith(v1.PodRunning, false, v1.ConditionTrue, now.Add(-time.Hour)),
				podWith(v1.PodRunning, false, v1.ConditionTrue, time.Time{}),
			},
			evaluatedAt: now, now: now,
			wantOK: false,
		},
		{
			name: "earliest of two waiting pods",
			pods: []*v1.Pod{
				podWith(v1.PodRunning, false, v1.ConditionTrue, now.Add(-2*time.Second)),
				podWith(v1.PodRunning, false, v1.ConditionTrue, now.Add(-7*time.Second)),
			},
			evaluatedAt: now, now: now,
			wantWait: 3 * time.Second, wantOK: true,
		},
		{
			name: "wait is measured from now, not from the evaluation",
			pods: []*v1.Pod{
				podWith(v1.PodRunning, false, v1.ConditionTrue, now.Add(-7*time.Second)),
			},
			evaluatedAt: now, now: now.Add(time.Second),
			wantWait: 2 * time.Second, wantOK: true,
		},
		{
			name: "pod became available since the evaluation means check at once",
			pods: []*v1.Pod{
				podWith(v1.PodRunning, false, v1.ConditionTrue, now.Add(-7*time.Second)),
			},
			evaluatedAt: now, now: now.Add(time.Minute),
			wantWait: 0, wantOK: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wait, ok := NextAvailabilityCheck(tt.pods, 10, tt.evaluatedAt, tt.now)
			if ok != tt.wantOK || wait != tt.wantWait {
				t.Errorf("NextAvailabilityCheck = (%v, %v), want (%v, %v)", wait, ok, tt.wantWait, tt.wantOK)
			}
		})
	}
}
