package deployment

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clienttesting "k8s.io/client-go/testing"

	"github.com/mini-kcm/mini-kcm/controllers/deployment/rollout"
)

// lastDeploymentUpdate returns the Deployment of the last spec Update, or nil.
func (f *fixture) lastDeploymentUpdate() *appsv1.Deployment {
	var last *appsv1.Deployment
	for _, a := range f.client.Actions() {
		if u, ok := a.(clienttesting.UpdateAction); ok && a.GetVerb() == "update" && u.GetSubresource() == "" {
			if d, ok := u.GetObject().(*appsv1.Deployment); ok {
				last = d
			}
		}
	}
	return last
}

func TestRollback(t *testing.T) {
	tests := []struct {
		name        string
		rollbackTo  string
		wantImage   string // the template image after the sync
		wantEvent   string
		wantCause   string
		noOtherRevs bool
	}{
		{name: "to an explicit revision", rollbackTo: "1", wantImage: "v1", wantCause: "create",
			wantEvent: `Normal DeploymentRollback Rolled back deployment "foo" to revision 1`},
		{name: "revision 0 means the previous one", rollbackTo: "0", wantImage: "v2", wantCause: "edit",
			wantEvent: `Normal DeploymentRollback Rolled back deployment "foo" to revision 2`},
		{name: "to the current template", rollbackTo: "3", wantImage: "v3", wantCause: "latest",
			wantEvent: `Warning DeploymentRollbackTemplateUnchanged The rollback revision contains the same template as current deployment "foo"`},
		{name: "to a missing revision", rollbackTo: "7", wantImage: "v3", wantCause: "latest",
			wantEvent: "Warning DeploymentRollbackRevisionNotFound Unable to find the revision to rollback to."},
		{name: "to the previous revision when there is none", rollbackTo: "0", wantImage: "v3", wantCause: "latest", noOtherRevs: true,
			wantEvent: "Warning DeploymentRollbackRevisionNotFound Unable to find last revision."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newDeployment("foo", 1, intstr.FromInt32(1), intstr.FromInt32(0))
			d.Spec.Template = podTemplate("v3")
			d.Annotations = map[string]string{
				rollout.RevisionAnnotation:   "3",
				"kubernetes.io/change-cause": "latest",
				appsv1.DeprecatedRollbackTo:  tc.rollbackTo,
			}
			current := ownedRS(d, "v3", 1, 3, 2)
			current.Annotations["kubernetes.io/change-cause"] = "latest"
			objects := []*appsv1.ReplicaSet{current}
			if !tc.noOtherRevs {
				v1 := ownedRS(d, "v1", 0, 1, 0)
				v1.Annotations["kubernetes.io/change-cause"] = "create"
				v2 := ownedRS(d, "v2", 0, 2, 1)
				v2.Annotations["kubernetes.io/change-cause"] = "edit"
				objects = append(objects, v1, v2)
			}
			f := newFixture(t, d, objects[0])
			for _, rs := range objects[1:] {
				if err := f.client.Tracker().Add(rs); err != nil {
					t.Fatal(err)
				}
				f.addToCache(rs)
			}

			if err := f.sync(d); err != nil {
				t.Fatal(err)
			}
			updated := f.lastDeploymentUpdate()
			if updated == nil {
				t.Fatalf("the rollback request must be cleared with an update; writes %v", f.writes())
			}
			if _, ok := updated.Annotations[appsv1.DeprecatedRollbackTo]; ok {
				t.Error("rollback annotation not cleared")
			}
			if got := updated.Spec.Template.Spec.Containers[0].Image; got != tc.wantImage {
				t.Errorf("image = %q, want %q", got, tc.wantImage)
			}
			if _, ok := updated.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; ok {
				t.Error("the hash label leaked into the deployment template")
			}
			if got := updated.Annotations["kubernetes.io/change-cause"]; got != tc.wantCause {
				t.Errorf("change-cause = %q, want %q", got, tc.wantCause)
			}
			if got := updated.Annotations[rollout.RevisionAnnotation]; got != "3" {
				t.Errorf("the deployment's own revision annotation must be kept, got %q", got)
			}
			if events := f.events(); !slices.Contains(events, tc.wantEvent) {
				t.Errorf("events = %v, want %q", events, tc.wantEvent)
			}
			if f.createdReplicaSet() != nil || len(f.updatedReplicaSets()) != 0 {
				t.Errorf("a rollback sync must not touch replica sets: %v", f.writes())
			}
		})
	}
}

func TestRollbackThenNextSyncPromotesTheOldReplicaSet(t *testing.T) {
	// After a rollback to revision 1 the template is v1 again; the next sync finds the
	// v1 ReplicaSet as the new one and gives it revision 3, recording 1 in its history.
	d := newDeployment("foo", 1, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Spec.Template = podTemplate("v1")
	d.Annotations[rollout.RevisionAnnotation] = "2"
	v1 := ownedRS(d, "v1", 0, 1, 0)
	v2 := ownedRS(d, "v2", 1, 2, 1)
	f := newFixture(t, d, v1, v2)

	if err := f.sync(d); err != nil {
		t.Fatal(err)
	}
	promoted := f.updatedReplicaSets()[v1.Name]
	if promoted == nil {
		t.Fatalf("v1 not updated; writes %v", f.writes())
	}
	if promoted.Annotations[rollout.RevisionAnnotation] != "3" || promoted.Annotations[rollout.RevisionHistoryAnnotation] != "1" {
		t.Errorf("annotations = %v", promoted.Annotations)
	}
}

func TestRollbackToIgnoresUnparsableRequests(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{appsv1.DeprecatedRollbackTo: "latest"}}}
	if got := rollbackTo(d); got != nil {
		t.Errorf("got %d, want nil", *got)
	}
	d.Annotations[appsv1.DeprecatedRollbackTo] = "4"
	if got := rollbackTo(d); got == nil || *got != 4 {
		t.Errorf("got %v, want 4", got)
	}
}
