package deployment

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clienttesting "k8s.io/client-go/testing"

	"github.com/mini-kcm/mini-kcm/controllers/deployment/rollout"
)

// sizedRS returns a ReplicaSet of the given size created age minutes into the test,
// annotated as last sized for a Deployment of desired replicas and maxReplicas.
func sizedRS(name string, replicas int32, age int, desired, maxReplicas int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "default", UID: types.UID(name),
			CreationTimestamp: metav1.NewTime(testNow.Add(time.Duration(age) * time.Minute)),
			Annotations: map[string]string{
				rollout.DesiredReplicasAnnotation: fmt.Sprint(desired),
				rollout.MaxReplicasAnnotation:     fmt.Sprint(maxReplicas),
			},
		},
		Spec: appsv1.ReplicaSetSpec{Replicas: new(replicas), Template: podTemplate(name)},
	}
}

func TestScaleDistributesReplicasProportionally(t *testing.T) {
	type rsSpec struct {
		name     string
		replicas int32
		desired  int32 // desired-replicas annotation; 0 means the old deployment size
	}
	tests := []struct {
		name               string
		replicas, oldSize  int32
		surge, oldSurge    int32
		newRS              *rsSpec // newest
		oldRSs             []rsSpec
		want               map[string]int32
		wantNoUpdate       []string
		newRSAvailable     int32
		maxUnavailable     int32
		replicaSetsInOrder bool
	}{
		{name: "normal scaling event: 10 -> 12", replicas: 12, oldSize: 10,
			newRS: &rsSpec{"v1", 10, 0}, want: map[string]int32{"v1": 12}},
		{name: "normal scaling event: 10 -> 5", replicas: 5, oldSize: 10,
			newRS: &rsSpec{"v1", 10, 0}, want: map[string]int32{"v1": 5}},
		{name: "proportional scaling: 5 -> 10", replicas: 10, oldSize: 5,
			newRS: &rsSpec{"v2", 2, 0}, oldRSs: []rsSpec{{"v1", 3, 0}}, want: map[string]int32{"v2": 4, "v1": 6}},
		{name: "proportional scaling: 5 -> 3", replicas: 3, oldSize: 5,
			newRS: &rsSpec{"v2", 2, 0}, oldRSs: []rsSpec{{"v1", 3, 0}}, want: map[string]int32{"v2": 1, "v1": 2}},
		{name: "proportional scaling: 9 -> 4", replicas: 4, oldSize: 9,
			newRS: &rsSpec{"v2", 8, 0}, oldRSs: []rsSpec{{"v1", 1, 0}}, want: map[string]int32{"v2": 4, "v1": 0}},
		{name: "proportional scaling: 7 -> 10", replicas: 10, oldSize: 7,
			newRS: &rsSpec{"v3", 2, 0}, oldRSs: []rsSpec{{"v2", 3, 0}, {"v1", 2, 0}}, want: map[string]int32{"v3": 3, "v2": 4, "v1": 3}},
		{name: "proportional scaling: 13 -> 8", replicas: 8, oldSize: 13,
			newRS: &rsSpec{"v3", 2, 0}, oldRSs: []rsSpec{{"v2", 8, 0}, {"v1", 3, 0}}, want: map[string]int32{"v3": 1, "v2": 5, "v1": 2}},
		{name: "leftover goes to the newest of equals when growing: 3 -> 4", replicas: 4, oldSize: 3,
			newRS: &rsSpec{"v3", 1, 0}, oldRSs: []rsSpec{{"v2", 1, 0}, {"v1", 1, 0}}, want: map[string]int32{"v3": 2, "v2": 1, "v1": 1}},
		{name: "leftover comes from the oldest of equals when shrinking: 3 -> 2", replicas: 2, oldSize: 3,
			newRS: &rsSpec{"v3", 1, 0}, oldRSs: []rsSpec{{"v2", 1, 0}, {"v1", 1, 0}}, want: map[string]int32{"v3": 1, "v2": 1, "v1": 0}},
		{name: "without a new replica set the newest old one grows first: 4 -> 5", replicas: 5, oldSize: 4,
			oldRSs: []rsSpec{{"v2", 2, 0}, {"v1", 2, 0}}, want: map[string]int32{"v2": 3, "v1": 2}},
		{name: "scaling to zero empties everything: 6 -> 0", replicas: 0, oldSize: 6,
			newRS: &rsSpec{"v3", 3, 0}, oldRSs: []rsSpec{{"v2", 2, 0}, {"v1", 1, 0}}, want: map[string]int32{"v3": 0, "v2": 0, "v1": 0}},
		{name: "scaling up from zero grows only the new replica set: 0 -> 6", replicas: 6, oldSize: 6,
			newRS: &rsSpec{"v3", 0, 0}, oldRSs: []rsSpec{{"v2", 0, 0}, {"v1", 0, 0}}, want: map[string]int32{"v3": 6}, wantNoUpdate: []string{"v2", "v1"}},
		{name: "surge pods are distributed too", replicas: 20, oldSize: 10, surge: 2, oldSurge: 2,
			newRS: &rsSpec{"v2", 6, 0}, oldRSs: []rsSpec{{"v1", 6, 0}}, want: map[string]int32{"v2": 11, "v1": 11}},
		{name: "size and surge change together", replicas: 50, oldSize: 10, surge: 6, oldSurge: 3,
			newRS: &rsSpec{"v2", 5, 0}, oldRSs: []rsSpec{{"v1", 8, 0}}, want: map[string]int32{"v2": 22, "v1": 34}},
		{name: "upstream example: 100 -> 120 blocked at 100/20 gives 117/23", replicas: 120, oldSize: 100, surge: 20, oldSurge: 20,
			newRS: &rsSpec{"new", 20, 0}, oldRSs: []rsSpec{{"old", 100, 0}}, want: map[string]int32{"new": 23, "old": 117}},
		{name: "a saturated but broken new replica set leaves the old pods", replicas: 2, oldSize: 2, surge: 1, oldSurge: 1, maxUnavailable: 1,
			newRS: &rsSpec{"v2", 2, 0}, oldRSs: []rsSpec{{"v1", 1, 0}}, want: map[string]int32{"v2": 2, "v1": 1}},
		{name: "a saturated available new replica set takes everything", replicas: 2, oldSize: 2, surge: 1, oldSurge: 1, maxUnavailable: 1, newRSAvailable: 2,
			newRS: &rsSpec{"v2", 2, 0}, oldRSs: []rsSpec{{"v1", 1, 0}}, want: map[string]int32{"v2": 2, "v1": 0}, wantNoUpdate: []string{"v2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newDeployment("foo", tc.replicas, intstr.FromInt32(tc.surge), intstr.FromInt32(tc.maxUnavailable))
			oldMax := tc.oldSize + tc.oldSurge
			var objects []runtime.Object
			var newRS *appsv1.ReplicaSet
			start := map[string]int32{}
			if tc.newRS != nil {
				newRS = sizedRS(tc.newRS.name, tc.newRS.replicas, 100, tc.oldSize, oldMax)
				newRS.Status.AvailableReplicas = tc.newRSAvailable
				objects = append(objects, newRS)
				start[newRS.Name] = tc.newRS.replicas
			}
			var oldRSs []*appsv1.ReplicaSet
			for i, spec := range tc.oldRSs {
				rs := sizedRS(spec.name, spec.replicas, 50-i, tc.oldSize, oldMax)
				oldRSs = append(oldRSs, rs)
				objects = append(objects, rs)
				start[rs.Name] = spec.replicas
			}
			f := newFixture(t, objects...)

			if err := f.c.scale(f.ctx, d, newRS, oldRSs); err != nil {
				t.Fatal(err)
			}
			updated := f.updatedReplicaSets()
			for name, want := range tc.want {
				got := start[name]
				if rs, ok := updated[name]; ok {
					got = *rs.Spec.Replicas
				}
				if got != want {
					t.Errorf("%s: replicas %d, want %d", name, got, want)
				}
			}
			for _, name := range tc.wantNoUpdate {
				if _, ok := updated[name]; ok {
					t.Errorf("%s was updated, want untouched", name)
				}
			}
			for name, rs := range updated {
				if rs.Annotations[rollout.DesiredReplicasAnnotation] != fmt.Sprint(tc.replicas) ||
					rs.Annotations[rollout.MaxReplicasAnnotation] != fmt.Sprint(tc.replicas+rollout.MaxSurge(d)) {
					t.Errorf("%s: sizing annotations %v not updated", name, rs.Annotations)
				}
			}
		})
	}
}

func TestScaleEmitsScalingEvents(t *testing.T) {
	d := newDeployment("foo", 120, intstr.FromInt32(20), intstr.FromInt32(0))
	newRS := sizedRS("new", 20, 10, 100, 120)
	oldRS := sizedRS("old", 100, 0, 100, 120)
	f := newFixture(t, newRS, oldRS)
	if err := f.c.scale(f.ctx, d, newRS, []*appsv1.ReplicaSet{oldRS}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Normal ScalingReplicaSet Scaled up replica set old from 100 to 117",
		"Normal ScalingReplicaSet Scaled up replica set new from 20 to 23",
	}
	if got := f.events(); !slices.Equal(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
}

func TestScaleStopsAtTheFirstFailedUpdate(t *testing.T) {
	d := newDeployment("foo", 10, intstr.FromInt32(0), intstr.FromInt32(1))
	newRS := sizedRS("new", 2, 10, 5, 5)
	oldRS := sizedRS("old", 3, 0, 5, 5)
	f := newFixture(t, newRS, oldRS)
	f.client.PrependReactor("update", "replicasets", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("boom")
	})
	if err := f.c.scale(f.ctx, d, newRS, []*appsv1.ReplicaSet{oldRS}); err == nil {
		t.Fatal("want the update error")
	}
	if got := len(f.writes()); got != 1 {
		t.Errorf("writes = %d, want 1", got)
	}
}

func TestScalingEventOnlyResizesDuringRollout(t *testing.T) {
	// A Deployment mid-rollout (old 8, new 5) is scaled from 10 to 20: both ReplicaSets
	// grow in proportion and no new rollout step is taken.
	d := newDeployment("foo", 20, intstr.FromInt32(3), intstr.FromInt32(2))
	d.Spec.Template = podTemplate("v2")
	prev := newDeployment("foo", 10, intstr.FromInt32(3), intstr.FromInt32(2))
	oldRS := withStatus(ownedRS(prev, "v1", 8, 1, 0), 8, 8)
	newRS := withStatus(ownedRS(prev, "v2", 5, 2, 1), 5, 0)
	lastProgress := rollout.NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, rollout.ReasonReplicaSetUpdated, "", testNow.Add(-time.Minute))
	d.Status.Conditions = []appsv1.DeploymentCondition{lastProgress}
	d.Annotations[rollout.RevisionAnnotation] = "2"
	f := newFixture(t, d, oldRS, newRS)

	if err := f.sync(d); err != nil {
		t.Fatal(err)
	}
	updated := f.updatedReplicaSets()
	// max 13 -> 23: old 8*23/13 = 14.15 -> 14, new 5*23/13 = 8.8 -> 9; 14+9 = 23.
	if got := *updated[oldRS.Name].Spec.Replicas; got != 14 {
		t.Errorf("old = %d, want 14", got)
	}
	if got := *updated[newRS.Name].Spec.Replicas; got != 9 {
		t.Errorf("new = %d, want 9", got)
	}
	if f.createdReplicaSet() != nil {
		t.Error("a scaling event must not create a replica set")
	}
	if cond := rollout.GetCondition(f.lastStatusUpdate().Status, appsv1.DeploymentProgressing); *cond != lastProgress {
		t.Errorf("a scaling event must not judge progress, got %+v", cond)
	}
}

func TestCleanupDeploymentDeletesOnlyIdleOldReplicaSets(t *testing.T) {
	idle := func(name string, revision string, age int) *appsv1.ReplicaSet {
		rs := sizedRS(name, 0, age, 1, 1)
		rs.Annotations[rollout.RevisionAnnotation] = revision
		return rs
	}
	running := func(rs *appsv1.ReplicaSet, spec, status int32) *appsv1.ReplicaSet {
		rs.Spec.Replicas = new(spec)
		rs.Status.Replicas = status
		return rs
	}
	deleting := idle("deleting", "1", 0)
	deleting.DeletionTimestamp = new(metav1.NewTime(testNow))
	deleting.Finalizers = []string{"example.com/hold"}
	unobserved := idle("unobserved", "1", 0)
	unobserved.Generation = 2
	unobserved.Status.ObservedGeneration = 1

	tests := []struct {
		name   string
		limit  *int32
		oldRSs []*appsv1.ReplicaSet
		want   []string
	}{
		{"keeps the newest revisions", new(int32(1)), []*appsv1.ReplicaSet{idle("a", "1", 0), idle("b", "2", 1), idle("c", "3", 2)}, []string{"a", "b"}},
		{"skips replica sets that still have pods", new(int32(0)), []*appsv1.ReplicaSet{
			idle("a", "1", 0), running(idle("b", "2", 1), 0, 1), running(idle("c", "3", 2), 1, 0), running(idle("d", "4", 3), 1, 1)}, []string{"a"}},
		{"limit zero deletes every idle one", new(int32(0)), []*appsv1.ReplicaSet{idle("a", "1", 0), idle("b", "2", 1)}, []string{"a", "b"}},
		{"never deletes one already being deleted", new(int32(0)), []*appsv1.ReplicaSet{deleting}, nil},
		{"never deletes one whose status is stale", new(int32(0)), []*appsv1.ReplicaSet{unobserved}, nil},
		{"MaxInt32 keeps everything", &infinite, []*appsv1.ReplicaSet{idle("a", "1", 0), idle("b", "2", 1)}, nil},
		{"no limit keeps everything", nil, []*appsv1.ReplicaSet{idle("a", "1", 0), idle("b", "2", 1)}, nil},
		{"order is by revision, not age", new(int32(1)), []*appsv1.ReplicaSet{idle("a", "2", 0), idle("b", "1", 1)}, []string{"b"}},
		{"a missing revision sorts first", new(int32(1)), []*appsv1.ReplicaSet{idle("a", "1", 0), idle("b", "", 1)}, []string{"b"}},
		{"an active old one is skipped, the next one goes", new(int32(1)), []*appsv1.ReplicaSet{
			running(idle("a", "1", 0), 1, 1), idle("b", "2", 1), idle("c", "3", 2)}, []string{"b"}},
		{"interleaved revisions", new(int32(2)), []*appsv1.ReplicaSet{idle("a", "3", 0), idle("b", "1", 1), idle("c", "4", 2), idle("d", "2", 3)}, []string{"b", "d"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var objects []runtime.Object
			for _, rs := range tc.oldRSs {
				if rs.Annotations[rollout.RevisionAnnotation] == "" {
					delete(rs.Annotations, rollout.RevisionAnnotation)
				}
				objects = append(objects, rs)
			}
			f := newFixture(t, objects...)
			d := newDeployment("foo", 1, intstr.FromInt32(1), intstr.FromInt32(0))
			d.Spec.RevisionHistoryLimit = tc.limit
			if err := f.c.cleanupDeployment(f.ctx, tc.oldRSs, d); err != nil {
				t.Fatal(err)
			}
			var deleted []string
			for _, w := range f.writes() {
				if name, ok := strings.CutPrefix(w, "delete replicasets "); ok {
					deleted = append(deleted, name)
				}
			}
			if !slices.Equal(deleted, tc.want) {
				t.Errorf("deleted %v, want %v", deleted, tc.want)
			}
		})
	}
}

func TestHashCollisionBumpsCollisionCount(t *testing.T) {
	d := newDeployment("foo", 1, intstr.FromInt32(1), intstr.FromInt32(0))
	// A ReplicaSet with our name but another template: someone else's, or a hash
	// collision between two templates.
	squatter := ownedRS(d, "v1", 1, 1, 0)
	squatter.Spec.Template.Spec.Containers[0].Image = "something-else"
	f := newFixture(t, d, squatter)

	err := f.sync(d)
	if !apierrors.IsAlreadyExists(err) {
		t.Fatalf("err = %v, want AlreadyExists so the key is retried", err)
	}
	status := f.lastStatusUpdate()
	if status == nil || status.Status.CollisionCount == nil || *status.Status.CollisionCount != 1 {
		t.Fatalf("collisionCount not bumped to 1: %+v", status)
	}

	// The retry hashes with the collision count and gets a different name.
	f.addToCache(status)
	f.client.ClearActions()
	if err := f.sync(status); err != nil {
		t.Fatal(err)
	}
	rs := f.createdReplicaSet()
	want := "foo-" + rollout.ComputeHash(&d.Spec.Template, new(int32(1)))
	if rs == nil || rs.Name != want || rs.Name == squatter.Name {
		t.Errorf("created %v, want %s", rs, want)
	}
}

func TestAlreadyExistingOwnReplicaSetIsUsedWithoutCollision(t *testing.T) {
	d := newDeployment("foo", 1, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Spec.Template = podTemplate("v1")
	mine := ownedRS(d, "v1", 1, 1, 0)
	// The apiserver has it, our cache does not yet... until the AlreadyExists lookup.
	f := newFixture(t, d)
	if err := f.client.Tracker().Add(mine); err != nil {
		t.Fatal(err)
	}
	f.client.PrependReactor("create", "replicasets", func(clienttesting.Action) (bool, runtime.Object, error) {
		f.addToCache(mine)
		return true, nil, apierrors.NewAlreadyExists(schema.GroupResource{Group: "apps", Resource: "replicasets"}, mine.Name)
	})

	newRS, err := f.c.getNewReplicaSet(f.ctx, d, nil, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if newRS.Name != mine.Name {
		t.Errorf("got %s, want %s", newRS.Name, mine.Name)
	}
	if d.Status.CollisionCount != nil {
		t.Errorf("collisionCount = %d, want unset", *d.Status.CollisionCount)
	}
	if events := f.events(); len(events) != 0 {
		t.Errorf("no scaling event for a replica set we did not create, got %v", events)
	}
}

func TestReplicaSetCreateErrorIsReported(t *testing.T) {
	d := newDeployment("foo", 1, intstr.FromInt32(1), intstr.FromInt32(0))
	f := newFixture(t, d)
	f.client.PrependReactor("create", "replicasets", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "replicasets"}, "x", errors.New("quota exceeded"))
	})
	if err := f.sync(d); err == nil {
		t.Fatal("want the create error")
	}
	cond := rollout.GetCondition(f.lastStatusUpdate().Status, appsv1.DeploymentProgressing)
	if cond == nil || cond.Status != corev1.ConditionFalse || cond.Reason != rollout.ReasonReplicaSetCreateError ||
		!strings.HasPrefix(cond.Message, `Failed to create new replica set "foo-`) {
		t.Errorf("Progressing = %+v", cond)
	}
	if events := f.events(); len(events) != 1 || !strings.HasPrefix(events[0], "Warning ReplicaSetCreateError Failed to create new replica set") {
		t.Errorf("events = %v", events)
	}
}

func TestExistingNewReplicaSetGetsRevisionAnnotationsAndMinReadySeconds(t *testing.T) {
	d := newDeployment("foo", 3, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Spec.Template = podTemplate("v1")
	d.Spec.MinReadySeconds = 5
	d.Annotations["kubernetes.io/change-cause"] = "rollback"
	// v1 was revision 1, v2 revision 3; rolling back to v1 makes it revision 4.
	newRS := ownedRS(d, "v1", 3, 1, 0)
	newRS.Annotations[rollout.RevisionHistoryAnnotation] = "0"
	oldRS := ownedRS(d, "v2", 0, 3, 1)
	f := newFixture(t, d, newRS, oldRS)

	got, err := f.c.getNewReplicaSet(f.ctx, d, []*appsv1.ReplicaSet{newRS, oldRS}, []*appsv1.ReplicaSet{oldRS}, false)
	if err != nil {
		t.Fatal(err)
	}
	if got.Annotations[rollout.RevisionAnnotation] != "4" || got.Annotations[rollout.RevisionHistoryAnnotation] != "0,1" ||
		got.Annotations["kubernetes.io/change-cause"] != "rollback" || got.Spec.MinReadySeconds != 5 {
		t.Errorf("annotations %v minReadySeconds %d", got.Annotations, got.Spec.MinReadySeconds)
	}
	if w := f.writes(); !slices.Equal(w, []string{"update replicasets " + newRS.Name}) {
		t.Errorf("writes = %v: the deployment's revision follows on the next sync", w)
	}
	if newRS.Annotations[rollout.RevisionAnnotation] != "1" {
		t.Error("the cached replica set was modified")
	}

	// Next sync: the ReplicaSet is current, so the Deployment records its revision.
	f.client.ClearActions()
	if _, err := f.c.getNewReplicaSet(f.ctx, d, []*appsv1.ReplicaSet{got, oldRS}, []*appsv1.ReplicaSet{oldRS}, false); err != nil {
		t.Fatal(err)
	}
	if w := f.writes(); !slices.Equal(w, []string{"update deployments/status foo"}) || d.Annotations[rollout.RevisionAnnotation] != "4" {
		t.Errorf("writes = %v, revision = %q", w, d.Annotations[rollout.RevisionAnnotation])
	}
}

func TestFoundNewReplicaSetStartsProgressTracking(t *testing.T) {
	d := newDeployment("foo", 1, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Annotations[rollout.RevisionAnnotation] = "1"
	rs := ownedRS(d, "v1", 1, 1, 0)
	f := newFixture(t, d, rs)
	if _, err := f.c.getNewReplicaSet(f.ctx, d, []*appsv1.ReplicaSet{rs}, nil, false); err != nil {
		t.Fatal(err)
	}
	cond := rollout.GetCondition(d.Status, appsv1.DeploymentProgressing)
	if cond == nil || cond.Reason != rollout.ReasonFoundNewReplicaSet || cond.Message != fmt.Sprintf("Found new replica set %q", rs.Name) {
		t.Errorf("Progressing = %+v", cond)
	}

	// Without a deadline there is nothing to track and nothing to write.
	d2 := newDeployment("bar", 1, intstr.FromInt32(1), intstr.FromInt32(0))
	d2.Spec.ProgressDeadlineSeconds = nil
	d2.Annotations[rollout.RevisionAnnotation] = "1"
	rs2 := ownedRS(d2, "v1", 1, 1, 0)
	f2 := newFixture(t, d2, rs2)
	if _, err := f2.c.getNewReplicaSet(f2.ctx, d2, []*appsv1.ReplicaSet{rs2}, nil, false); err != nil {
		t.Fatal(err)
	}
	if w := f2.writes(); len(w) != 0 {
		t.Errorf("writes = %v, want none", w)
	}
}

func TestPausedConditions(t *testing.T) {
	progressing := func(reason string) []appsv1.DeploymentCondition {
		return []appsv1.DeploymentCondition{rollout.NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, reason, "", testNow.Add(-time.Hour))}
	}
	tests := []struct {
		name       string
		paused     bool
		deadline   *int32
		conditions []appsv1.DeploymentCondition
		wantReason string // "" means no write
	}{
		{"pausing sets DeploymentPaused", true, new(int32(600)), progressing(rollout.ReasonReplicaSetUpdated), rollout.ReasonDeploymentPaused},
		{"still paused writes nothing", true, new(int32(600)), []appsv1.DeploymentCondition{
			rollout.NewCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, rollout.ReasonDeploymentPaused, "", testNow)}, ""},
		{"resuming sets DeploymentResumed", false, new(int32(600)), []appsv1.DeploymentCondition{
			rollout.NewCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, rollout.ReasonDeploymentPaused, "", testNow)}, rollout.ReasonDeploymentResumed},
		{"a timeout is never overwritten", true, new(int32(600)), []appsv1.DeploymentCondition{
			rollout.NewCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, rollout.ReasonProgressDeadlineExceeded, "", testNow)}, ""},
		{"no deadline, no condition", true, nil, nil, ""},
		{"unpaused without pause condition writes nothing", false, new(int32(600)), progressing(rollout.ReasonReplicaSetUpdated), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newDeployment("foo", 1, intstr.FromInt32(1), intstr.FromInt32(0))
			d.Spec.Paused = tc.paused
			d.Spec.ProgressDeadlineSeconds = tc.deadline
			d.Status.Conditions = tc.conditions
			f := newFixture(t, d)
			if err := f.c.checkPausedConditions(f.ctx, d); err != nil {
				t.Fatal(err)
			}
			status := f.lastStatusUpdate()
			if tc.wantReason == "" {
				if status != nil {
					t.Errorf("unexpected write: %+v", status.Status.Conditions)
				}
				return
			}
			cond := rollout.GetCondition(status.Status, appsv1.DeploymentProgressing)
			if cond == nil || cond.Status != corev1.ConditionUnknown || cond.Reason != tc.wantReason {
				t.Errorf("Progressing = %+v", cond)
			}
		})
	}
}

func TestPausedDeploymentScalesAndCleansUpButDoesNotRollOut(t *testing.T) {
	d := newDeployment("foo", 5, intstr.FromInt32(1), intstr.FromInt32(0))
	d.Spec.Paused = true
	d.Spec.Template = podTemplate("v3")
	d.Spec.RevisionHistoryLimit = new(int32(2))
	prev := newDeployment("foo", 3, intstr.FromInt32(1), intstr.FromInt32(0))
	current := ownedRS(prev, "v2", 3, 2, 2)
	idle1 := ownedRS(prev, "v1", 0, 1, 1)
	idle0 := ownedRS(prev, "v0", 0, 0, 0)
	f := newFixture(t, d, current, idle1, idle0)

	if err := f.sync(d); err != nil {
		t.Fatal(err)
	}
	if f.createdReplicaSet() != nil {
		t.Error("a paused deployment must not create a replica set")
	}
	if got := *f.updatedReplicaSets()[current.Name].Spec.Replicas; got != 5 {
		t.Errorf("the only active replica set = %d, want 5", got)
	}
	if w := f.writes(); !slices.Contains(w, "delete replicasets "+idle0.Name) || slices.Contains(w, "delete replicasets "+idle1.Name) {
		t.Errorf("writes = %v: want the oldest idle replica set cleaned up", w)
	}
	cond := rollout.GetCondition(f.lastStatusUpdate().Status, appsv1.DeploymentProgressing)
	if cond == nil || cond.Reason != rollout.ReasonDeploymentPaused {
		t.Errorf("Progressing = %+v", cond)
	}
}

func TestNewReplicaSetNameTruncatesLongDeploymentNames(t *testing.T) {
	d := newDeployment(strings.Repeat("a", 250), 1, intstr.FromInt32(1), intstr.FromInt32(0))
	f := newFixture(t, d)
	if _, err := f.c.getNewReplicaSet(f.ctx, d, nil, nil, true); err != nil {
		t.Fatal(err)
	}
	rs := f.createdReplicaSet()
	hash := rollout.ComputeHash(&d.Spec.Template, nil)
	if want := strings.Repeat("a", 253-1-len(hash)) + "-" + hash; rs.Name != want {
		t.Errorf("name = %q, want %q", rs.Name, want)
	}
}
