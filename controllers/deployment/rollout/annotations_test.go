package rollout

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestCopyDeploymentAnnotationsSkipsControllerOwnedKeys(t *testing.T) {
	d := rolling(3, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Annotations = map[string]string{
		"team":                             "payments",
		"kubernetes.io/change-cause":       "bump image",
		corev1.LastAppliedConfigAnnotation: "{}",
		RevisionAnnotation:                 "7",
		RevisionHistoryAnnotation:          "1,2",
		DesiredReplicasAnnotation:          "99",
		MaxReplicasAnnotation:              "99",
		appsv1.DeprecatedRollbackTo:        "2",
	}
	rs := withAnnotations(replicaSet("rs", 3, 0), "stale", "kept", "team", "old")
	if !CopyDeploymentAnnotationsToReplicaSet(d, rs) {
		t.Fatal("want a change")
	}
	want := map[string]string{"stale": "kept", "team": "payments", "kubernetes.io/change-cause": "bump image"}
	if !maps.Equal(rs.Annotations, want) {
		t.Errorf("annotations = %v, want %v", rs.Annotations, want)
	}
	if CopyDeploymentAnnotationsToReplicaSet(d, rs) {
		t.Error("a second copy must report no change")
	}
}

func TestSetNewReplicaSetAnnotationsKeepsBoundedRevisionHistory(t *testing.T) {
	d := rolling(1, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Annotations = map[string]string{RevisionAnnotation: "1"}
	rs := withAnnotations(replicaSet("rs", 1, 0), RevisionAnnotation, "10")
	// With a 5-character limit the history holds two two-digit revisions.
	for i := 10; i < 20; i++ {
		next := fmt.Sprint(i + 1)
		if _, err := SetNewReplicaSetAnnotations(d, rs, next, true, 5); err != nil {
			t.Fatal(err)
		}
		if rs.Annotations[RevisionAnnotation] != next {
			t.Fatalf("revision = %q, want %q", rs.Annotations[RevisionAnnotation], next)
		}
		if i >= 12 {
			if want := fmt.Sprintf("%d,%d", i-1, i); rs.Annotations[RevisionHistoryAnnotation] != want {
				t.Errorf("history = %q, want %q", rs.Annotations[RevisionHistoryAnnotation], want)
			}
		}
	}
}

func TestSetNewReplicaSetAnnotations(t *testing.T) {
	tests := []struct {
		name        string
		existing    map[string]string
		newRevision string
		exists      bool
		wantChanged bool
		wantErr     bool
		want        map[string]string
	}{
		{
			name: "new replica set gets revision and sizing", newRevision: "1", wantChanged: true,
			want: map[string]string{RevisionAnnotation: "1", DesiredReplicasAnnotation: "4", MaxReplicasAnnotation: "5", "team": "a"},
		},
		{
			name: "existing replica set at the revision is unchanged", existing: map[string]string{RevisionAnnotation: "3", "team": "a"},
			newRevision: "3", exists: true,
			want: map[string]string{RevisionAnnotation: "3", "team": "a"},
		},
		{
			name: "higher revision is never lowered", existing: map[string]string{RevisionAnnotation: "5", "team": "a"},
			newRevision: "3", exists: true,
			want: map[string]string{RevisionAnnotation: "5", "team": "a"},
		},
		{
			name: "rollback records the old revision", existing: map[string]string{RevisionAnnotation: "2", RevisionHistoryAnnotation: "1", "team": "a"},
			newRevision: "4", exists: true, wantChanged: true,
			want: map[string]string{RevisionAnnotation: "4", RevisionHistoryAnnotation: "1,2", "team": "a"},
		},
		{
			name: "first revision has no history", existing: map[string]string{"team": "a"},
			newRevision: "1", exists: true, wantChanged: true,
			want: map[string]string{RevisionAnnotation: "1", "team": "a"},
		},
		{
			name: "non-numeric revision is left alone", existing: map[string]string{RevisionAnnotation: "abc", "team": "a"},
			newRevision: "2", exists: true, wantErr: true,
			want: map[string]string{RevisionAnnotation: "abc", "team": "a"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := rolling(4, intstr.FromInt32(1), intstr.FromInt32(0))
			d.Annotations = map[string]string{"team": "a", RevisionAnnotation: "99"}
			rs := replicaSet("rs", 4, 0)
			rs.Annotations = maps.Clone(tc.existing)
			changed, err := SetNewReplicaSetAnnotations(d, rs, tc.newRevision, tc.exists, MaxRevisionHistoryLength)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if changed != tc.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tc.wantChanged)
			}
			if !maps.Equal(rs.Annotations, tc.want) {
				t.Errorf("annotations = %v, want %v", rs.Annotations, tc.want)
			}
		})
	}
}

func TestRevisionHistoryDropsOldestEntriesAtTheLimit(t *testing.T) {
	rs := withAnnotations(replicaSet("rs", 1, 0), RevisionHistoryAnnotation, strings.Repeat("1,", 999)+"1")
	appendRevisionHistory(rs, "22", MaxRevisionHistoryLength)
	got := rs.Annotations[RevisionHistoryAnnotation]
	if len(got) > MaxRevisionHistoryLength || !strings.HasSuffix(got, ",22") {
		t.Errorf("history of length %d ends %q", len(got), got[len(got)-5:])
	}
}

func TestRollbackCopiesAnnotationsAndTemplateFromReplicaSet(t *testing.T) {
	d := rolling(1, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Annotations = map[string]string{
		"kubernetes.io/change-cause": "edit", RevisionAnnotation: "3",
		corev1.LastAppliedConfigAnnotation: "{}", "only-on-deployment": "x",
	}
	target := withAnnotations(replicaSet("rs", 1, 0),
		"kubernetes.io/change-cause", "create", RevisionAnnotation, "1", DesiredReplicasAnnotation, "1")
	target.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = "abc"

	SetDeploymentAnnotationsTo(d, target)
	want := map[string]string{"kubernetes.io/change-cause": "create", RevisionAnnotation: "3", corev1.LastAppliedConfigAnnotation: "{}"}
	if !maps.Equal(d.Annotations, want) {
		t.Errorf("annotations = %v, want %v", d.Annotations, want)
	}

	SetFromReplicaSetTemplate(d, target.Spec.Template)
	if _, ok := d.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; ok {
		t.Error("the hash label must not be copied into the deployment template")
	}
	if _, ok := target.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; !ok {
		t.Error("the replica set's own template must not be modified")
	}
	if d.Spec.Template.Spec.Containers[0].Image != "rs" {
		t.Errorf("image = %q, want the replica set's", d.Spec.Template.Spec.Containers[0].Image)
	}
}

func TestReplicasAnnotations(t *testing.T) {
	rs := replicaSet("rs", 1, 0)
	if !ReplicasAnnotationsNeedUpdate(rs, 10, 11) {
		t.Error("missing annotations need an update")
	}
	if !SetReplicasAnnotations(rs, 10, 11) {
		t.Error("want a change")
	}
	if rs.Annotations[DesiredReplicasAnnotation] != "10" || rs.Annotations[MaxReplicasAnnotation] != "11" {
		t.Errorf("annotations = %v", rs.Annotations)
	}
	if ReplicasAnnotationsNeedUpdate(rs, 10, 11) || SetReplicasAnnotations(rs, 10, 11) {
		t.Error("equal annotations need no update")
	}
	if !ReplicasAnnotationsNeedUpdate(rs, 10, 12) {
		t.Error("a different max-replicas needs an update")
	}
}

func TestNonNegativeInt32Annotation(t *testing.T) {
	tests := []struct {
		value   string
		want    int32
		wantOK  bool
		wantErr bool
	}{
		{"", 0, false, false}, // missing
		{"7", 7, true, false},
		{"0", 0, true, false},
		{"-1", 0, false, true},
		{"2147483648", 0, false, true},
		{"seven", 0, false, true},
	}
	for _, tc := range tests {
		rs := replicaSet("rs", 1, 0)
		if tc.value != "" {
			withAnnotations(rs, DesiredReplicasAnnotation, tc.value)
		}
		got, ok, err := nonNegativeInt32Annotation(rs, DesiredReplicasAnnotation)
		if got != tc.want || ok != tc.wantOK || (err != nil) != tc.wantErr {
			t.Errorf("%q: got %d %v %v, want %d %v error=%v", tc.value, got, ok, err, tc.want, tc.wantOK, tc.wantErr)
		}
	}
}
