package deployment

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mini-kcm/mini-kcm/controllers/deployment/rollout"
)

// progressDeployment is a Recreate Deployment with the given deadline, size and stored
// status counts.
func progressDeployment(deadline *int32, replicas, statusReplicas, updated, available int32, conditions ...appsv1.DeploymentCondition) *appsv1.Deployment {
	d := newRecreateDeployment("progress", replicas)
	d.Spec.ProgressDeadlineSeconds = deadline
	d.Status = appsv1.DeploymentStatus{Replicas: statusReplicas, UpdatedReplicas: updated, AvailableReplicas: available, Conditions: conditions, ObservedGeneration: 1}
	return d
}

func rsWithAvailable(name string, spec, status, available int32) *appsv1.ReplicaSet {
	rs := sizedRS(name, spec, 0, spec, spec)
	rs.Status = appsv1.ReplicaSetStatus{Replicas: status, AvailableReplicas: available}
	return rs
}

func TestRequeueStuckDeployment(t *testing.T) {
	lastUpdate := testNow.Add(-10 * time.Minute)
	stuck := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, LastUpdateTime: metav1.NewTime(lastUpdate)}
	failed := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: rollout.ReasonProgressDeadlineExceeded}
	deadline := new(int32(60))
	status := func(replicas, updated, available int32) appsv1.DeploymentStatus {
		return appsv1.DeploymentStatus{Replicas: replicas, UpdatedReplicas: updated, AvailableReplicas: available, ObservedGeneration: 1}
	}
	tests := []struct {
		name        string
		d           *appsv1.Deployment
		status      appsv1.DeploymentStatus
		now         time.Time
		want        time.Duration
		wantQueued  bool
		wantDelayed bool
	}{
		{name: "no deadline", d: progressDeployment(nil, 4, 3, 3, 2), status: status(3, 3, 2), want: -1},
		{name: "infinite deadline", d: progressDeployment(&infinite, 4, 3, 3, 2), status: status(3, 3, 2), want: -1},
		{name: "no progressing condition", d: progressDeployment(deadline, 4, 3, 3, 2), status: status(3, 3, 2), want: -1},
		{name: "complete", d: progressDeployment(deadline, 3, 3, 3, 3, stuck), status: status(3, 3, 3), want: -1},
		{name: "already timed out", d: progressDeployment(deadline, 3, 3, 3, 0, failed), status: status(3, 3, 0), want: -1},
		{name: "30s left", d: progressDeployment(deadline, 3, 3, 3, 1, stuck), status: status(3, 3, 1), now: lastUpdate.Add(30 * time.Second), want: 30 * time.Second, wantDelayed: true},
		{name: "1s left", d: progressDeployment(deadline, 3, 3, 3, 1, stuck), status: status(3, 3, 1), now: lastUpdate.Add(59 * time.Second), want: time.Second, wantDelayed: true},
		{name: "less than a second left", d: progressDeployment(deadline, 3, 3, 3, 1, stuck), status: status(3, 3, 1), now: lastUpdate.Add(59*time.Second + 1), want: 0, wantQueued: true},
		{name: "at the deadline", d: progressDeployment(deadline, 3, 3, 3, 1, stuck), status: status(3, 3, 1), now: lastUpdate.Add(60 * time.Second), want: 0, wantQueued: true},
		{name: "a minute past the deadline", d: progressDeployment(deadline, 3, 3, 3, 1, stuck), status: status(3, 3, 1), now: lastUpdate.Add(120 * time.Second), want: 0, wantQueued: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			if !tc.now.IsZero() {
				f.c.now = func() time.Time { return tc.now }
			}
			if got := f.c.requeueStuckDeployment(f.ctx, tc.d, tc.status); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			// A rate-limited add with no prior failures waits 5ms; AddAfter waits for
			// the deadline plus a second. Neither is visible in Len() at once.
			if tc.wantQueued {
				time.Sleep(20 * time.Millisecond)
				if f.c.queue.Len() != 1 {
					t.Errorf("want the key queued for a check now")
				}
			}
			if !tc.wantQueued && f.c.queue.Len() != 0 {
				t.Errorf("unexpected queued key")
			}
		})
	}
}

func TestSyncRolloutStatusJudgesProgress(t *testing.T) {
	deadline := new(int32(60))
	conditionAt := func(status corev1.ConditionStatus, reason string, at time.Time) appsv1.DeploymentCondition {
		return rollout.NewCondition(appsv1.DeploymentProgressing, status, reason, "", at)
	}
	recent := testNow.Add(-30 * time.Second)
	long := testNow.Add(-time.Hour)
	tests := []struct {
		name           string
		d              *appsv1.Deployment
		oldRSs         []*appsv1.ReplicaSet
		newRS          *appsv1.ReplicaSet
		wantStatus     corev1.ConditionStatus // "" means no Progressing condition
		wantReason     string
		wantUpdate     time.Time
		wantTransition time.Time
		wantMessage    string
	}{
		{
			name:   "no deadline removes the condition",
			d:      progressDeployment(nil, 3, 2, 2, 2, conditionAt(corev1.ConditionTrue, rollout.ReasonReplicaSetUpdated, long)),
			oldRSs: []*appsv1.ReplicaSet{rsWithAvailable("bar", 0, 1, 1)}, newRS: rsWithAvailable("foo", 3, 2, 2),
		},
		{
			name:       "a finished rollout is not judged again",
			d:          progressDeployment(deadline, 3, 3, 3, 3, conditionAt(corev1.ConditionTrue, rollout.ReasonNewReplicaSetAvailable, long)),
			oldRSs:     []*appsv1.ReplicaSet{rsWithAvailable("bar", 3, 3, 3)},
			wantStatus: corev1.ConditionTrue, wantReason: rollout.ReasonNewReplicaSetAvailable, wantUpdate: long, wantTransition: long,
		},
		{
			name:   "progress keeps the transition time of Progressing=True",
			d:      progressDeployment(deadline, 3, 2, 2, 2, conditionAt(corev1.ConditionTrue, rollout.ReasonReplicaSetUpdated, long)),
			oldRSs: []*appsv1.ReplicaSet{rsWithAvailable("bar", 0, 1, 1)}, newRS: rsWithAvailable("foo", 3, 2, 2),
			wantStatus: corev1.ConditionTrue, wantReason: rollout.ReasonReplicaSetUpdated, wantUpdate: testNow, wantTransition: long,
			wantMessage: `ReplicaSet "foo" is progressing.`,
		},
		{
			name:   "progress after a timeout resets everything",
			d:      progressDeployment(deadline, 3, 2, 2, 2, conditionAt(corev1.ConditionFalse, rollout.ReasonProgressDeadlineExceeded, long)),
			oldRSs: []*appsv1.ReplicaSet{rsWithAvailable("bar", 0, 1, 1)}, newRS: rsWithAvailable("foo", 3, 2, 2),
			wantStatus: corev1.ConditionTrue, wantReason: rollout.ReasonReplicaSetUpdated, wantUpdate: testNow, wantTransition: testNow,
		},
		{
			name:   "progress creates the condition",
			d:      progressDeployment(deadline, 3, 2, 2, 2),
			oldRSs: []*appsv1.ReplicaSet{rsWithAvailable("bar", 0, 1, 1)}, newRS: rsWithAvailable("foo", 3, 2, 2),
			wantStatus: corev1.ConditionTrue, wantReason: rollout.ReasonReplicaSetUpdated, wantUpdate: testNow, wantTransition: testNow,
		},
		{
			name:       "completion keeps the transition time of Progressing=True",
			d:          progressDeployment(deadline, 3, 3, 3, 3, conditionAt(corev1.ConditionTrue, rollout.ReasonReplicaSetUpdated, long)),
			newRS:      rsWithAvailable("foo", 3, 3, 3),
			wantStatus: corev1.ConditionTrue, wantReason: rollout.ReasonNewReplicaSetAvailable, wantUpdate: testNow, wantTransition: long,
			wantMessage: `ReplicaSet "foo" has successfully progressed.`,
		},
		{
			name:       "completion after a timeout resets everything",
			d:          progressDeployment(deadline, 3, 3, 3, 3, conditionAt(corev1.ConditionFalse, rollout.ReasonProgressDeadlineExceeded, long)),
			newRS:      rsWithAvailable("foo", 3, 3, 3),
			wantStatus: corev1.ConditionTrue, wantReason: rollout.ReasonNewReplicaSetAvailable, wantUpdate: testNow, wantTransition: testNow,
		},
		{
			name:       "completion without a new replica set names the deployment",
			d:          progressDeployment(deadline, 0, 3, 3, 3, conditionAt(corev1.ConditionTrue, rollout.ReasonReplicaSetUpdated, long)),
			oldRSs:     []*appsv1.ReplicaSet{rsWithAvailable("foo", 0, 0, 0)},
			wantStatus: corev1.ConditionTrue, wantReason: rollout.ReasonNewReplicaSetAvailable,
			wantMessage: `Deployment "progress" has successfully progressed.`,
		},
		{
			name:       "no progress past the deadline times out",
			d:          progressDeployment(deadline, 3, 2, 2, 2, conditionAt(corev1.ConditionTrue, rollout.ReasonReplicaSetUpdated, long)),
			newRS:      rsWithAvailable("foo", 3, 2, 2),
			wantStatus: corev1.ConditionFalse, wantReason: rollout.ReasonProgressDeadlineExceeded, wantUpdate: testNow, wantTransition: testNow,
			wantMessage: `ReplicaSet "foo" has timed out progressing.`,
		},
		{
			name:       "no progress within the deadline changes nothing",
			d:          progressDeployment(deadline, 3, 2, 2, 2, conditionAt(corev1.ConditionTrue, rollout.ReasonReplicaSetUpdated, recent)),
			newRS:      rsWithAvailable("foo", 3, 2, 2),
			wantStatus: corev1.ConditionTrue, wantReason: rollout.ReasonReplicaSetUpdated, wantUpdate: recent, wantTransition: recent,
		},
		{
			name:       "an existing timeout is kept",
			d:          progressDeployment(deadline, 3, 2, 2, 2, conditionAt(corev1.ConditionFalse, rollout.ReasonProgressDeadlineExceeded, long)),
			newRS:      rsWithAvailable("foo", 3, 2, 2),
			wantStatus: corev1.ConditionFalse, wantReason: rollout.ReasonProgressDeadlineExceeded, wantUpdate: long, wantTransition: long,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.d)
			if err := f.c.syncRolloutStatus(f.ctx, allReplicaSets(tc.newRS, tc.oldRSs), tc.newRS, tc.d); err != nil {
				t.Fatal(err)
			}
			cond := rollout.GetCondition(tc.d.Status, appsv1.DeploymentProgressing)
			if tc.wantStatus == "" {
				if cond != nil {
					t.Fatalf("want no Progressing condition, got %+v", cond)
				}
				return
			}
			if cond == nil {
				t.Fatal("Progressing condition missing")
			}
			if cond.Status != tc.wantStatus || cond.Reason != tc.wantReason {
				t.Errorf("got %s/%s, want %s/%s", cond.Status, cond.Reason, tc.wantStatus, tc.wantReason)
			}
			if !tc.wantUpdate.IsZero() && !cond.LastUpdateTime.Time.Equal(tc.wantUpdate) {
				t.Errorf("lastUpdateTime = %v, want %v", cond.LastUpdateTime, tc.wantUpdate)
			}
			if !tc.wantTransition.IsZero() && !cond.LastTransitionTime.Time.Equal(tc.wantTransition) {
				t.Errorf("lastTransitionTime = %v, want %v", cond.LastTransitionTime, tc.wantTransition)
			}
			if tc.wantMessage != "" && cond.Message != tc.wantMessage {
				t.Errorf("message = %q, want %q", cond.Message, tc.wantMessage)
			}
		})
	}
}

func TestSyncRolloutStatusCopiesReplicaFailure(t *testing.T) {
	failure := func(msg string) appsv1.ReplicaSetCondition {
		return appsv1.ReplicaSetCondition{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: msg, LastTransitionTime: metav1.NewTime(testNow)}
	}
	tests := []struct {
		name        string
		newFailure  string
		oldFailures []string
		existing    bool
		want        string // "" means no ReplicaFailure condition
	}{
		{"new replica set's failure wins", "new quota", []string{"old quota"}, false, "new quota"},
		{"else the oldest old replica set's failure", "", []string{"", "second", "third"}, false, "second"},
		{"removed once no replica set fails", "", nil, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newDeployment("foo", 3, intstr.FromInt32(1), intstr.FromInt32(0))
			if tc.existing {
				d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate"}}
			}
			newRS := rsWithAvailable("new", 3, 0, 0)
			if tc.newFailure != "" {
				newRS.Status.Conditions = []appsv1.ReplicaSetCondition{failure(tc.newFailure)}
			}
			var oldRSs []*appsv1.ReplicaSet
			for i, msg := range tc.oldFailures {
				rs := rsWithAvailable("old"+string(rune('a'+i)), 1, 1, 1)
				if msg != "" {
					rs.Status.Conditions = []appsv1.ReplicaSetCondition{failure(msg)}
				}
				oldRSs = append(oldRSs, rs)
			}
			f := newFixture(t, d)
			if err := f.c.syncRolloutStatus(f.ctx, allReplicaSets(newRS, oldRSs), newRS, d); err != nil {
				t.Fatal(err)
			}
			cond := rollout.GetCondition(d.Status, appsv1.DeploymentReplicaFailure)
			switch {
			case tc.want == "" && cond != nil:
				t.Errorf("want no ReplicaFailure, got %+v", cond)
			case tc.want != "" && (cond == nil || cond.Message != tc.want || !cond.LastUpdateTime.Time.Equal(testNow)):
				t.Errorf("ReplicaFailure = %+v, want message %q", cond, tc.want)
			}
		})
	}
}

func TestSyncRolloutStatusWithoutChangeSchedulesDeadlineCheck(t *testing.T) {
	d := newDeployment("foo", 3, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Spec.ProgressDeadlineSeconds = new(int32(600))
	newRS := rsWithAvailable("new", 3, 3, 1)
	newRS.Status.ReadyReplicas = 1
	f := newFixture(t, d)
	// Compute the status once, store it, and sync again: nothing changes.
	if err := f.c.syncRolloutStatus(f.ctx, []*appsv1.ReplicaSet{newRS}, newRS, d); err != nil {
		t.Fatal(err)
	}
	f.client.ClearActions()
	if err := f.c.syncRolloutStatus(f.ctx, []*appsv1.ReplicaSet{newRS}, newRS, d); err != nil {
		t.Fatal(err)
	}
	if w := f.writes(); len(w) != 0 {
		t.Errorf("an unchanged status must not be written: %v", w)
	}
	// The key comes back after the deadline (10 minutes and a second): not now.
	if f.c.queue.Len() != 0 {
		t.Error("the deadline check must be delayed")
	}
}
