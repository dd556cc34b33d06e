package deployment

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

func TestScaleDownOldReplicaSetsForRecreate(t *testing.T) {
	tests := []struct {
		name       string
		replicas   []int32
		wantScaled bool
	}{
		{"active old replica sets go to zero", []int32{3, 1}, true},
		{"already at zero", []int32{0, 0}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newRecreateDeployment("foo", 3)
			var oldRSs []*appsv1.ReplicaSet
			var objects []runtime.Object
			for i, r := range tc.replicas {
				rs := ownedRS(d, "v"+string(rune('a'+i)), r, i+1, i)
				oldRSs = append(oldRSs, rs)
				objects = append(objects, rs)
			}
			f := newFixture(t, objects...)
			scaled, err := f.c.scaleDownOldReplicaSetsForRecreate(f.ctx, oldRSs, d)
			if err != nil {
				t.Fatal(err)
			}
			if scaled != tc.wantScaled {
				t.Errorf("scaled = %v, want %v", scaled, tc.wantScaled)
			}
			for name, rs := range f.updatedReplicaSets() {
				if *rs.Spec.Replicas != 0 {
					t.Errorf("%s = %d, want 0", name, *rs.Spec.Replicas)
				}
			}
		})
	}
}

func TestOldPodsRunning(t *testing.T) {
	newRS := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "new", UID: "new"}}
	oldRS := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "old", UID: "old"}}
	podIn := func(phase corev1.PodPhase, deleting bool) *corev1.Pod {
		p := &corev1.Pod{Status: corev1.PodStatus{Phase: phase}}
		if deleting {
			p.DeletionTimestamp = new(metav1.Now())
		}
		return p
	}
	tests := []struct {
		name      string
		oldStatus int32
		podMap    map[types.UID][]*corev1.Pod
		want      bool
	}{
		{"no pods", 0, nil, false},
		{"old replica set still counts pods", 1, nil, true},
		{"only new pods", 0, map[types.UID][]*corev1.Pod{"new": {podIn(corev1.PodRunning, false)}}, false},
		{"old running pod", 0, map[types.UID][]*corev1.Pod{"old": {podIn(corev1.PodRunning, false)}}, true},
		{"old pending pod", 0, map[types.UID][]*corev1.Pod{"old": {podIn(corev1.PodPending, false)}}, true},
		{"old terminating pod", 0, map[types.UID][]*corev1.Pod{"old": {podIn(corev1.PodRunning, true)}}, true},
		{"old pod in unknown phase", 0, map[types.UID][]*corev1.Pod{"old": {podIn(corev1.PodUnknown, false)}}, true},
		{"old finished pods", 0, map[types.UID][]*corev1.Pod{"old": {podIn(corev1.PodFailed, false), podIn(corev1.PodSucceeded, false)}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := oldRS.DeepCopy()
			old.Status.Replicas = tc.oldStatus
			if got := oldPodsRunning(newRS, []*appsv1.ReplicaSet{old}, tc.podMap); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRecreateWaitsForOldPodsBeforeCreatingNewOnes follows a Recreate rollout: the old
// ReplicaSet goes to 0, nothing new appears while an old pod still terminates, and the
// new ReplicaSet is created at full size once the old pods are gone.
func TestRecreateWaitsForOldPodsBeforeCreatingNewOnes(t *testing.T) {
	d := newRecreateDeployment("foo", 3)
	d.Spec.Template = podTemplate("v2")
	d.Annotations["deployment.kubernetes.io/revision"] = "1"
	oldRS := ownedRS(d, "v1", 3, 1, 0)
	f := newFixture(t, d, oldRS)

	// Sync 1: scale the old ReplicaSet down, create nothing.
	if err := f.sync(d); err != nil {
		t.Fatal(err)
	}
	if got := *f.updatedReplicaSets()[oldRS.Name].Spec.Replicas; got != 0 {
		t.Fatalf("old = %d, want 0", got)
	}
	if f.createdReplicaSet() != nil {
		t.Fatal("created a replica set before the old one was scaled down")
	}

	// Sync 2: the old ReplicaSet reports 0 pods, but one pod is still terminating.
	scaledDown := withStatus(oldRS.DeepCopy(), 0, 0)
	scaledDown.Spec.Replicas = new(int32(0))
	f.addToCache(scaledDown)
	terminating := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "old-pod", Namespace: "default", DeletionTimestamp: new(metav1.NewTime(testNow)),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(oldRS, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	f.addToCache(terminating)
	f.client.ClearActions()
	if err := f.sync(d); err != nil {
		t.Fatal(err)
	}
	if f.createdReplicaSet() != nil {
		t.Fatal("created a replica set while an old pod was still terminating")
	}

	// The pod's deletion wakes the Deployment...
	if err := f.factory.Core().V1().Pods().Informer().GetIndexer().Delete(terminating); err != nil {
		t.Fatal(err)
	}
	f.c.deletePod(klogBackground, terminating)
	if got := f.queued(); !slices.Equal(got, []string{"default/foo"}) {
		t.Fatalf("queued %v", got)
	}
	// ...and sync 3 creates the new ReplicaSet at full size.
	f.client.ClearActions()
	if err := f.sync(d); err != nil {
		t.Fatal(err)
	}
	rs := f.createdReplicaSet()
	if rs == nil || *rs.Spec.Replicas != 3 {
		t.Fatalf("created %v, want a replica set of 3", rs)
	}
	if rs.Annotations["deployment.kubernetes.io/max-replicas"] != "3" {
		t.Errorf("Recreate has no surge: max-replicas = %q", rs.Annotations["deployment.kubernetes.io/max-replicas"])
	}
	if events := f.events(); !slices.Contains(events, "Normal ScalingReplicaSet Scaled up replica set "+rs.Name+" from 0 to 3") {
		t.Errorf("events = %v", events)
	}
}
