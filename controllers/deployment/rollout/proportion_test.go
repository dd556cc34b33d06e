package rollout

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestReplicaSetFractionScalesByMaxReplicasRatio(t *testing.T) {
	tests := []struct {
		name                 string
		deploymentReplicas   int32
		statusReplicas       int32
		maxSurge             int32
		rsReplicas           int32
		maxReplicasAnnotated string // "" means no annotation
		want                 int32
	}{
		{"scaling to zero removes the whole replica set", 0, 0, 0, 10, "", -10},
		{"missing annotation and empty status leaves it alone", 10, 0, 0, 5, "", 0},
		{"zero annotation and empty status leaves it alone", 10, 0, 0, 5, "0", 0},
		{"missing annotation falls back to status replicas", 120, 100, 0, 50, "", 10},
		{"zero annotation falls back to status replicas", 120, 100, 0, 50, "0", 10},
		{"scale up by a fifth", 120, 0, 0, 50, "100", 10},
		{"scale up with surge rounds to nearest", 120, 0, 10, 50, "110", 9},
		{"scale down by a sixth", 10, 0, 0, 6, "12", -1},
		{"scale down with surge", 100, 0, 10, 50, "130", -8},
		{"half rounds away from zero", 3, 0, 0, 1, "2", 1},
		{"garbage annotation falls back to status replicas", 20, 10, 0, 5, "x", 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := rolling(tc.deploymentReplicas, intstr.FromInt32(tc.maxSurge), intstr.FromInt32(1))
			d.Status.Replicas = tc.statusReplicas
			rs := replicaSet("rs", tc.rsReplicas, 0)
			if tc.maxReplicasAnnotated != "" {
				withAnnotations(rs, MaxReplicasAnnotation, tc.maxReplicasAnnotated)
			}
			if got := replicaSetFraction(rs, d); got != tc.want {
				t.Errorf("fraction = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestReplicaSetProportionNeverOvershootsTheBudget(t *testing.T) {
	d := rolling(120, intstr.FromInt32(0), intstr.FromInt32(1))
	rs := withAnnotations(replicaSet("rs", 50, 0), MaxReplicasAnnotation, "100")
	tests := []struct {
		name         string
		toAdd, added int32
		rsReplicas   int32
		want         int32
	}{
		{"fraction below budget", 20, 0, 50, 10},
		{"budget below fraction", 20, 15, 50, 5},
		{"budget spent", 20, 20, 50, 0},
		{"nothing to add", 0, 0, 50, 0},
		{"empty replica set never grows", 20, 0, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs.Spec.Replicas = new(tc.rsReplicas)
			if got := ReplicaSetProportion(rs, d, tc.toAdd, tc.added); got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}

	shrink := rolling(50, intstr.FromInt32(0), intstr.FromInt32(1))
	rs.Spec.Replicas = new(int32(50))
	// The fraction is -25 but only -10 remain to be removed.
	if got := ReplicaSetProportion(rs, shrink, -20, -10); got != -10 {
		t.Errorf("shrinking: got %d, want -10", got)
	}
}
