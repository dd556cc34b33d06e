package rollout

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func revisioned(name, revision string, age int) *appsv1.ReplicaSet {
	rs := replicaSet(name, 0, age)
	if revision != "" {
		withAnnotations(rs, RevisionAnnotation, revision)
	}
	return rs
}

func TestMaxAndLastRevisionSkipUnparsableRevisions(t *testing.T) {
	tests := []struct {
		name              string
		rsList            []*appsv1.ReplicaSet
		wantMax, wantLast int64
	}{
		{"none", nil, 0, 0},
		{"single", []*appsv1.ReplicaSet{revisioned("a", "4", 0)}, 4, 0},
		{"unordered", []*appsv1.ReplicaSet{revisioned("a", "2", 0), revisioned("b", "7", 1), revisioned("c", "5", 2)}, 7, 5},
		{"unparsable and missing", []*appsv1.ReplicaSet{revisioned("a", "x", 0), revisioned("b", "", 1), revisioned("c", "3", 2)}, 3, 0},
		{"duplicate top", []*appsv1.ReplicaSet{revisioned("a", "3", 0), revisioned("b", "3", 1)}, 3, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := MaxRevision(tc.rsList); got != tc.wantMax {
				t.Errorf("MaxRevision = %d, want %d", got, tc.wantMax)
			}
			if got := LastRevision(tc.rsList); got != tc.wantLast {
				t.Errorf("LastRevision = %d, want %d", got, tc.wantLast)
			}
		})
	}
}

func TestCompareByRevisionFallsBackToCreationOrder(t *testing.T) {
	tests := []struct {
		name   string
		rsList []*appsv1.ReplicaSet
		want   []string
	}{
		{"by revision", []*appsv1.ReplicaSet{revisioned("a", "3", 0), revisioned("b", "1", 1), revisioned("c", "4", 2), revisioned("d", "2", 3)}, []string{"b", "d", "a", "c"}},
		{"missing revision counts as 0", []*appsv1.ReplicaSet{revisioned("a", "1", 0), revisioned("b", "", 1)}, []string{"b", "a"}},
		{"unparsable revision sorts by age", []*appsv1.ReplicaSet{revisioned("b", "x", 1), revisioned("a", "9", 0)}, []string{"a", "b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sorted := slices.Clone(tc.rsList)
			slices.SortFunc(sorted, CompareByRevision)
			if got := names(sorted); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSetDeploymentRevision(t *testing.T) {
	d := rolling(1, intstr.FromInt32(1), intstr.FromInt32(0))
	if !SetDeploymentRevision(d, "2") || d.Annotations[RevisionAnnotation] != "2" {
		t.Error("want the revision set")
	}
	if SetDeploymentRevision(d, "2") {
		t.Error("an equal revision is no change")
	}
}
