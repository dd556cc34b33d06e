package rollout

import (
	"math"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestHugeSurgeIsCappedSoTheRolloutStillProgresses(t *testing.T) {
	d := rolling(math.MaxInt32, intstr.FromString("200%"), intstr.FromInt32(0))
	surge, _, err := ResolveFenceposts(d.Spec.Strategy.RollingUpdate.MaxSurge, d.Spec.Strategy.RollingUpdate.MaxUnavailable, math.MaxInt32)
	if err != nil || surge != 0 {
		t.Fatalf("surge of 200%% of MaxInt32 = %d, %v; want 0 (nothing fits above MaxInt32)", surge, err)
	}
	if got := MaxSurge(rolling(math.MaxInt32-10, intstr.FromString("100%"), intstr.FromInt32(0))); got != 10 {
		t.Errorf("MaxSurge = %d, want the 10 pods left below MaxInt32", got)
	}

	// Upstream adds spec.replicas and the surge in int32: the maximum wraps around to a
	// negative number and the new ReplicaSet never grows.
	d = rolling(math.MaxInt32, intstr.FromString("100%"), intstr.FromInt32(1))
	newRS := replicaSet("new", 0, 2)
	got, err := NewRSNewReplicas(d, []*appsv1.ReplicaSet{replicaSet("old", 5, 1), newRS}, newRS)
	if err != nil {
		t.Fatal(err)
	}
	if want := int32(math.MaxInt32 - 5); got != want {
		t.Errorf("NewRSNewReplicas = %d, want %d (all the room up to MaxInt32)", got, want)
	}
}

func TestProportionNeverGoesAgainstTheScalingDirection(t *testing.T) {
	tests := []struct {
		name                  string
		size, statusReplicas  int32
		desired               int32
		toAdd, added, wantMax int32
		wantMin               int32
	}{
		// The annotation is gone and status.replicas (10) is stale: 5 × 113 / 10 would
		// grow the ReplicaSet to 57 in the middle of a scale-down.
		{name: "scale-down with a stale base", size: 5, statusReplicas: 10, desired: 113, toAdd: -5, wantMin: -5, wantMax: 0},
		// The reverse: 50 × 20 / 100 would shrink it during a scale-up.
		{name: "scale-up with a stale base", size: 50, statusReplicas: 100, desired: 20, toAdd: 7, wantMin: 0, wantMax: 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := rolling(tt.desired, intstr.FromInt32(0), intstr.FromInt32(1))
			d.Status.Replicas = tt.statusReplicas
			got := ReplicaSetProportion(replicaSet("rs", tt.size, 1), d, tt.toAdd, tt.added)
			if got < tt.wantMin || got > tt.wantMax {
				t.Errorf("ReplicaSetProportion = %d, want within [%d, %d]", got, tt.wantMin, tt.wantMax)
			}
		})
	}
}
