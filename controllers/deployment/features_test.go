package deployment

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mini-kcm/mini-kcm/controllers"
)

// With DeploymentReplicaSetTerminatingReplicas off, upstream's calculateStatus leaves
// status.terminatingReplicas unset, so a count written earlier is cleared.
func TestDeploymentReportsTerminatingReplicasOnlyWithTheirGate(t *testing.T) {
	tests := []struct {
		name     string
		features controllers.Features
		want     *int32
	}{
		{"DeploymentReplicaSetTerminatingReplicas on: the ReplicaSets' counts summed", allFeatures, new(int32(2))},
		{"DeploymentReplicaSetTerminatingReplicas off: unset",
			featuresWithout(controllers.DeploymentReplicaSetTerminatingReplicas), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDeployment("foo", 3, intstr.FromInt32(1), intstr.FromInt32(0))
			d.Status.TerminatingReplicas = new(int32(5))
			rs := ownedRS(d, "v1", 3, 1, 0)
			rs.Status.TerminatingReplicas = new(int32(2))
			f := newFixtureWithFeatures(t, tt.features, d, rs)

			if err := f.sync(d); err != nil {
				t.Fatal(err)
			}
			written := f.lastStatusUpdate()
			if written == nil {
				t.Fatal("no status written")
			}
			if got := written.Status.TerminatingReplicas; (got == nil) != (tt.want == nil) || (got != nil && *got != *tt.want) {
				t.Errorf("status.terminatingReplicas = %v, want %v", deref(got), deref(tt.want))
			}
		})
	}
}

// deref renders an optional count for failure messages.
func deref(v *int32) any {
	if v == nil {
		return "nil"
	}
	return *v
}
