package rollout

import (
	"math"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestResolveFencepostsRoundsSurgeUpAndUnavailableDown(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	tests := []struct {
		name                       string
		maxSurge, maxUnavailable   *intstr.IntOrString
		desired                    int32
		wantSurge, wantUnavailable int32
		wantErr                    bool
	}{
		{"both zero percent of zero makes one unavailable", pct("0%"), pct("0%"), 0, 0, 1, false},
		{"39 percent of 10", pct("39%"), pct("39%"), 10, 4, 3, false},
		{"25 percent of 1 rounds surge up to 1 and unavailable down to 0", pct("25%"), pct("25%"), 1, 1, 0, false},
		{"1 percent of 10 unavailable with no surge becomes 1", pct("0%"), pct("1%"), 10, 0, 1, false},
		{"unset surge is 0", nil, pct("39%"), 10, 0, 3, false},
		{"unset unavailable is 0", pct("39%"), nil, 10, 4, 0, false},
		{"both unset makes one unavailable", nil, nil, 10, 0, 1, false},
		{"absolute values pass through", new(intstr.FromInt32(3)), new(intstr.FromInt32(2)), 10, 3, 2, false},
		{"garbage surge is an error", pct("oops"), pct("39%"), 10, 0, 0, true},
		{"garbage unavailable is an error", pct("55%"), pct("urg"), 10, 0, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			surge, unavailable, err := ResolveFenceposts(tc.maxSurge, tc.maxUnavailable, tc.desired)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if surge != tc.wantSurge || unavailable != tc.wantUnavailable {
				t.Errorf("got surge %d unavailable %d, want %d %d", surge, unavailable, tc.wantSurge, tc.wantUnavailable)
			}
		})
	}
}

func TestMaxUnavailableAndMaxSurgeFollowStrategy(t *testing.T) {
	tests := []struct {
		name           string
		d              *appsv1.Deployment
		wantMaxUnavail int32
		wantMaxSurge   int32
	}{
		{"rolling absolute", rolling(10, intstr.FromInt32(1), intstr.FromInt32(2)), 2, 1},
		{"rolling percent", rolling(10, intstr.FromString("25%"), intstr.FromString("25%")), 2, 3},
		{"capped at replicas", rolling(5, intstr.FromInt32(0), intstr.FromInt32(10)), 5, 0},
		{"zero replicas", rolling(0, intstr.FromInt32(1), intstr.FromInt32(1)), 0, 1},
		{"both zero resolves to one unavailable", rolling(10, intstr.FromInt32(0), intstr.FromInt32(0)), 1, 0},
		{"recreate has neither", recreate(10), 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := MaxUnavailable(tc.d); got != tc.wantMaxUnavail {
				t.Errorf("MaxUnavailable = %d, want %d", got, tc.wantMaxUnavail)
			}
			if got := MaxSurge(tc.d); got != tc.wantMaxSurge {
				t.Errorf("MaxSurge = %d, want %d", got, tc.wantMaxSurge)
			}
		})
	}
}

func TestFencepostsToleratesMissingRollingUpdateBlock(t *testing.T) {
	d := rolling(10, intstr.FromInt32(0), intstr.FromInt32(0))
	d.Spec.Strategy.RollingUpdate = nil
	d.Spec.Replicas = nil
	if got := MaxUnavailable(d); got != 1 {
		t.Errorf("MaxUnavailable = %d, want 1", got)
	}
	if _, err := NewRSNewReplicas(d, nil, replicaSet("new", 0, 0)); err == nil {
		t.Error("NewRSNewReplicas without maxSurge: want an error, got none")
	}
}

func TestNewRSNewReplicas(t *testing.T) {
	tests := []struct {
		name          string
		d             *appsv1.Deployment
		newRSReplicas int32
		otherReplicas int32
		want          int32
	}{
		{"no room under surge keeps the current size", rolling(1, intstr.FromInt32(1), intstr.FromInt32(1)), 5, 5, 5},
		{"room under surge grows up to spec", rolling(6, intstr.FromInt32(10), intstr.FromInt32(1)), 2, 5, 6},
		{"room is the limit when smaller than the gap", rolling(10, intstr.FromInt32(3), intstr.FromInt32(2)), 0, 10, 3},
		{"recreate goes straight to spec", recreate(3), 1, 5, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			newRS := replicaSet("new", tc.newRSReplicas, 1)
			got, err := NewRSNewReplicas(tc.d, []*appsv1.ReplicaSet{replicaSet("old", tc.otherReplicas, 0), newRS}, newRS)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
}

func TestUnsupportedStrategyIsAnError(t *testing.T) {
	d := recreate(3)
	d.Spec.Strategy.Type = "BlueGreen"
	if _, err := NewRSNewReplicas(d, nil, replicaSet("new", 0, 0)); err == nil {
		t.Error("want an error for an unknown strategy")
	}
}

func TestLimitsTreatMaxInt32AsUnlimited(t *testing.T) {
	d := rolling(1, intstr.FromInt32(1), intstr.FromInt32(0))
	if HasProgressDeadline(d) || HasRevisionHistoryLimit(d) {
		t.Error("unset limits must read as absent")
	}
	d.Spec.ProgressDeadlineSeconds = new(int32(math.MaxInt32))
	d.Spec.RevisionHistoryLimit = new(int32(math.MaxInt32))
	if HasProgressDeadline(d) || HasRevisionHistoryLimit(d) {
		t.Error("MaxInt32 limits must read as absent")
	}
	d.Spec.ProgressDeadlineSeconds = new(int32(600))
	d.Spec.RevisionHistoryLimit = new(int32(0))
	if !HasProgressDeadline(d) || !HasRevisionHistoryLimit(d) {
		t.Error("set limits must read as present")
	}
}
