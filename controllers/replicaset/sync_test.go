package replicaset

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/controllers/controllerref"
	"github.com/mini-kcm/mini-kcm/controllers/podcontrol"
)

func TestSyncDoesNothingWhenTheReplicaSetIsSatisfied(t *testing.T) {
	rs := withStatus(newReplicaSet("web", 2), 2)
	f := newFixture(t, BurstReplicas, append(asObjects(rs), asObjects(newPods("pod", 2, rs)...)...)...)

	if err := f.sync(rs); err != nil {
		t.Fatalf("sync: %v", err)
	}
	f.expectPodWrites(0, 0, 0)
	if writes := f.statusWrites(); len(writes) != 0 {
		t.Fatalf("an unchanged status must not be written, got %d writes", len(writes))
	}
}

func TestSyncWritesStatusWhenOnlyTheGenerationChanged(t *testing.T) {
	rs := withStatus(newReplicaSet("web", 2), 2)
	rs.Generation = 2
	f := newFixture(t, BurstReplicas, append(asObjects(rs), asObjects(newPods("pod", 2, rs)...)...)...)

	if err := f.sync(rs); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if got := f.lastStatus().ObservedGeneration; got != 2 {
		t.Fatalf("observedGeneration = %d, want 2", got)
	}
}

func TestSyncCreatesMissingPodsWithAControllerRef(t *testing.T) {
	rs := newReplicaSet("web", 3)
	f := newFixture(t, BurstReplicas, rs, newPod("pod-0", rs, true))

	if err := f.sync(rs); err != nil {
		t.Fatalf("sync: %v", err)
	}
	f.expectPodWrites(2, 0, 0)
	for i, ref := range f.podControl.ControllerRefs {
		if ref.UID != rs.UID || ref.Kind != "ReplicaSet" || ref.APIVersion != "apps/v1" || !*ref.Controller || !*ref.BlockOwnerDeletion {
			t.Errorf("create %d: controllerRef %+v does not point to the ReplicaSet", i, ref)
		}
		if !reflect.DeepEqual(f.podControl.Templates[i], rs.Spec.Template) {
			t.Errorf("create %d: template differs from the ReplicaSet's", i)
		}
	}
	if add, del, _ := f.c.expectations.Get(cacheKey(rs)); add != 2 || del != 0 {
		t.Errorf("expectations (%d, %d), want (2, 0)", add, del)
	}
	status := f.lastStatus()
	if status.Replicas != 1 || status.ObservedGeneration != 1 {
		t.Errorf("status %+v, want the one existing pod counted", status)
	}
}

func TestSlowStartStopsCreatingAtTheFirstFailedBatch(t *testing.T) {
	rs := newReplicaSet("web", 100)
	f := newFixture(t, BurstReplicas, rs)
	f.podControl.CreateLimit = 10

	err := f.sync(rs)
	if err == nil {
		t.Fatal("want the create failure returned so the key is retried")
	}
	f.expectPodWrites(10, 0, 0)
	// Batches of 1, 2 and 4 succeed; the batch of 8 fails after 3 creations, and no
	// batch of 16 is tried.
	if f.podControl.CreateCalls != 15 {
		t.Errorf("create calls = %d, want 15", f.podControl.CreateCalls)
	}
	// Only the successful creations stay expected: the informer will never report
	// the failed and the skipped ones.
	if add, _, _ := f.c.expectations.Get(cacheKey(rs)); add != 10 {
		t.Errorf("expected creations = %d, want 10 (the successful ones)", add)
	}
	cond := getCondition(f.lastStatus(), appsv1.ReplicaSetReplicaFailure)
	if cond == nil || cond.Status != v1.ConditionTrue || cond.Reason != "FailedCreate" ||
		!strings.Contains(cond.Message, "limit 10 already reached") {
		t.Errorf("ReplicaFailure condition %+v, want FailedCreate with the create error", cond)
	}
}

func TestSlowStartBatch(t *testing.T) {
	errFail := errors.New("fail")
	tests := []struct {
		name          string
		count         int
		failAfter     int32 // calls after this many fail; 0 = never
		wantSuccesses int
		wantCalls     int32
	}{
		{"all succeed", 10, 0, 10, 10},
		{"first call fails", 10, -1, 0, 1},
		{"third call fails", 10, 2, 2, 3},
		{"fails within the batch of four", 10, 5, 5, 7},
		{"zero calls", 0, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			successes, err := slowStartBatch(tt.count, 1, func() error {
				n := calls.Add(1)
				if tt.failAfter != 0 && (tt.failAfter < 0 || n > tt.failAfter) {
					return errFail
				}
				return nil
			})
			if successes != tt.wantSuccesses || calls.Load() != tt.wantCalls {
				t.Errorf("successes %d after %d calls, want %d after %d", successes, calls.Load(), tt.wantSuccesses, tt.wantCalls)
			}
			if (err != nil) != (tt.wantSuccesses < tt.count) {
				t.Errorf("err = %v", err)
			}
		})
	}
}

func TestOutstandingExpectationsOnlyUpdateStatus(t *testing.T) {
	rs := newReplicaSet("web", 2)
	f := newFixture(t, BurstReplicas, rs, newPod("pod-0", rs, true))
	key := cacheKey(rs)
	logger := klog.FromContext(f.ctx)

	// The first sync creates the missing pod and expects to see it.
	if err := f.sync(rs); err != nil {
		t.Fatal(err)
	}
	f.expectPodWrites(1, 0, 0)

	// Until it is seen, syncs leave pods alone but still write status.
	f.podControl.Reset()
	f.rsStore.Update(withStatus(newReplicaSet("web", 2), 0))
	if err := f.sync(rs); err != nil {
		t.Fatal(err)
	}
	f.expectPodWrites(0, 0, 0)
	if got := f.lastStatus().Replicas; got != 1 {
		t.Errorf("status replicas = %d, want 1", got)
	}

	// Once observed, a failing create is tried again; the failure is not expected.
	f.c.expectations.CreationObserved(logger, key)
	f.podControl.Reset()
	f.podControl.Err = errors.New("quota exceeded")
	if err := f.sync(rs); err == nil {
		t.Fatal("want the create error")
	}
	f.expectPodWrites(1, 0, 0)
	if !f.c.expectations.Satisfied(logger, key) {
		t.Fatal("a failed create must not leave an expectation behind")
	}

	// So the next sync tries again at once.
	f.podControl.Reset()
	f.podControl.Err = nil
	if err := f.sync(rs); err != nil {
		t.Fatal(err)
	}
	f.expectPodWrites(1, 0, 0)
}

func TestBurstReplicasCapsWritesPerSyncUntilObserved(t *testing.T) {
	const burst = 5
	t.Run("creations", func(t *testing.T) {
		rs := newReplicaSet("web", 12)
		f := newFixture(t, burst, rs)
		logger := klog.FromContext(f.ctx)
		if err := f.sync(rs); err != nil {
			t.Fatal(err)
		}
		f.expectPodWrites(burst, 0, 0)

		// Four of five creations observed: still waiting.
		created := newPods("created", burst, rs)
		for _, pod := range created[:4] {
			f.addPods(pod)
			f.c.addPod(logger, pod)
		}
		f.podControl.Reset()
		if err := f.sync(rs); err != nil {
			t.Fatal(err)
		}
		f.expectPodWrites(0, 0, 0)

		// The fifth arrives: the next burst goes out.
		f.addPods(created[4])
		f.c.addPod(logger, created[4])
		if err := f.sync(rs); err != nil {
			t.Fatal(err)
		}
		f.expectPodWrites(burst, 0, 0)
	})
	t.Run("deletions", func(t *testing.T) {
		rs := newReplicaSet("web", 2)
		pods := newPods("pod", 12, rs)
		f := newFixture(t, burst, append(asObjects(rs), asObjects(pods...)...)...)
		logger := klog.FromContext(f.ctx)
		if err := f.sync(rs); err != nil {
			t.Fatal(err)
		}
		f.expectPodWrites(0, burst, 0)

		deleted := map[string]bool{}
		for _, name := range f.podControl.DeletedPods {
			deleted[name] = true
		}
		for _, pod := range pods {
			if deleted[pod.Name] {
				if err := f.podStore.Delete(pod); err != nil {
					t.Fatal(err)
				}
				f.c.deletePod(logger, pod)
			}
		}
		f.podControl.Reset()
		if err := f.sync(rs); err != nil {
			t.Fatal(err)
		}
		f.expectPodWrites(0, burst, 0)
	})
}

func TestScaleDownDeletesTheCheapestPodsFirst(t *testing.T) {
	rs := newReplicaSet("web", 3)
	unscheduled := newPod("unscheduled", rs, true)
	unscheduled.Spec.NodeName = ""
	unscheduled.Status.Phase = v1.PodPending
	pending := newPod("pending", rs, true)
	pending.Status.Phase = v1.PodPending
	notReadyPod := notReady(newPod("not-ready", rs, true))
	cheap := newPod("cheap", rs, true)
	cheap.Annotations = map[string]string{"controller.kubernetes.io/pod-deletion-cost": "-100"}
	young := newPod("young", rs, true)
	young.CreationTimestamp = metav1.NewTime(testNow.Add(-time.Second))
	young.Status.Conditions[0].LastTransitionTime = metav1.NewTime(testNow.Add(-time.Second))
	old1, old2, old3 := newPod("old-1", rs, true), newPod("old-2", rs, true), newPod("old-3", rs, true)
	// Spread the old pods over nodes so the co-location rank does not decide.
	old1.Spec.NodeName, old2.Spec.NodeName, old3.Spec.NodeName = "node-a", "node-b", "node-c"
	young.Spec.NodeName, cheap.Spec.NodeName = "node-d", "node-e"
	pods := []*v1.Pod{old1, young, cheap, notReadyPod, old2, pending, unscheduled, old3}
	f := newFixture(t, BurstReplicas, append(asObjects(rs), asObjects(pods...)...)...)

	if err := f.sync(rs); err != nil {
		t.Fatal(err)
	}
	want := []string{"unscheduled", "pending", "not-ready", "cheap", "young"}
	got := append([]string(nil), f.podControl.DeletedPods...)
	if !sameSet(got, want) {
		t.Fatalf("deleted %v, want %v", got, want)
	}
	if _, del, _ := f.c.expectations.Get(cacheKey(rs)); del != 5 {
		t.Errorf("expected deletions = %d, want 5", del)
	}
}

func TestPodsToDeletePrefersPodsDoubledUpWithSiblingReplicaSets(t *testing.T) {
	rs := newReplicaSet("web", 1)
	sibling := newReplicaSet("web-old", 1)
	sibling.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web-old"}}
	alone := newPod("alone", rs, true)
	alone.Spec.NodeName = "node-a"
	crowded := newPod("crowded", rs, true)
	crowded.Spec.NodeName = "node-b"
	siblingPod := newPod("sibling-pod", sibling, true)
	siblingPod.Labels = map[string]string{"app": "web-old"}
	siblingPod.Spec.NodeName = "node-b"
	// Make the crowded pod the older one, so only the rank can pick it.
	alone.CreationTimestamp = metav1.NewTime(testNow.Add(-time.Minute))
	f := newFixture(t, BurstReplicas, rs, sibling, alone, crowded, siblingPod)

	if err := f.sync(rs); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.podControl.DeletedPods, []string{"crowded"}) {
		t.Fatalf("deleted %v, want the pod sharing its node with a sibling's pod", f.podControl.DeletedPods)
	}
}

func TestPodsToDelete(t *testing.T) {
	rs := newReplicaSet("web", 0)
	pending := newPod("pending", rs, true)
	pending.Status.Phase = v1.PodPending
	running := newPod("running", rs, true)
	running2 := newPod("running-2", rs, true)
	running2.Spec.NodeName = "node-2"
	tests := []struct {
		name    string
		active  []*v1.Pod
		related []*v1.Pod
		count   int
		want    []string
	}{
		{"delete all needs no ranking", []*v1.Pod{running, pending}, nil, 2, []string{"running", "pending"}},
		{"pending before running", []*v1.Pod{running, pending}, nil, 1, []string{"pending"}},
		{"doubled-up node first", []*v1.Pod{running2, running}, []*v1.Pod{running, running2, newPod("other", rs, true)}, 1, []string{"running"}},
		{"nothing to delete", []*v1.Pod{running}, nil, 0, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := append([]*v1.Pod(nil), tt.active...)
			got := podsToDelete(tt.active, tt.related, tt.count, metav1.NewTime(testNow), true)
			names := []string{}
			for _, pod := range got {
				names = append(names, pod.Name)
			}
			if !reflect.DeepEqual(names, tt.want) {
				t.Errorf("podsToDelete = %v, want %v", names, tt.want)
			}
			if !reflect.DeepEqual(before, tt.active) {
				t.Error("podsToDelete reordered its input")
			}
		})
	}
	if keys := podKeys([]*v1.Pod{pending, running}); !reflect.DeepEqual(keys, []string{"default/pending", "default/running"}) {
		t.Errorf("podKeys = %v", keys)
	}
}

func TestFailedDeletesAreReportedButMissingPodsAreNot(t *testing.T) {
	tests := []struct {
		name       string
		deleteErr  error
		wantErr    bool
		wantReason string
	}{
		{"pod already gone", apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "pod-0"), false, ""},
		{"delete fails", errors.New("etcd timeout"), true, "FailedDelete"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := newReplicaSet("web", 0)
			f := newFixture(t, BurstReplicas, rs, newPod("pod-0", rs, true))
			f.podControl.Err = tt.deleteErr
			err := f.sync(rs)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			// A delete that did not happen will not be observed either.
			if !f.c.expectations.Satisfied(klog.FromContext(f.ctx), cacheKey(rs)) {
				t.Error("a failed delete must not leave an expectation behind")
			}
			cond := getCondition(f.lastStatus(), appsv1.ReplicaSetReplicaFailure)
			if tt.wantReason == "" && cond != nil {
				t.Errorf("unexpected condition %+v", cond)
			}
			if tt.wantReason != "" && (cond == nil || cond.Reason != tt.wantReason || cond.Message != "etcd timeout") {
				t.Errorf("condition %+v, want reason %s with the delete error", cond, tt.wantReason)
			}
		})
	}
}

func TestCreationsInATerminatingNamespaceCountAsDone(t *testing.T) {
	rs := newReplicaSet("web", 3)
	f := newFixture(t, BurstReplicas, rs)
	f.podControl.Err = &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: v1.NamespaceTerminatingCause}}},
	}}
	if err := f.sync(rs); err != nil {
		t.Fatalf("sync: %v, want no error in a terminating namespace", err)
	}
	// Nothing changed, so not even a status write (which would carry a ReplicaFailure).
	if writes := f.statusWrites(); len(writes) != 0 {
		t.Errorf("status written: %+v", writes[0].Status)
	}
	// As upstream, the refused creations count as successes and stay expected: the
	// ReplicaSet rests until the expectations expire or the namespace is gone, instead
	// of retrying creations that cannot succeed.
	if f.c.expectations.Satisfied(klog.FromContext(f.ctx), cacheKey(rs)) {
		t.Error("want the ReplicaSet to rest while its namespace terminates")
	}
}

func TestSyncAdoptsMatchingOrphansAndReleasesStrays(t *testing.T) {
	rs := newReplicaSet("web", 2)
	orphan := newPod("orphan", rs, false)
	stray := newPod("stray", rs, true)
	stray.Labels = map[string]string{"app": "other"}
	f := newFixture(t, BurstReplicas, rs, newPod("owned", rs, true), orphan, stray)

	if err := f.sync(rs); err != nil {
		t.Fatal(err)
	}
	f.expectPodWrites(0, 0, 2)
	adopt, _ := controllerref.AdoptPatch(rs, controllerKind, orphan.UID)
	release, _ := controllerref.ReleasePatch(stray.UID, rs.UID)
	got := []string{string(f.podControl.Patches[0]), string(f.podControl.Patches[1])}
	if !sameSet(got, []string{string(adopt), string(release)}) {
		t.Errorf("patches %q, want the adoption of orphan and the release of stray", got)
	}
	if got := f.lastStatus().Replicas; got != 2 {
		t.Errorf("status replicas = %d, want the owned pod and the adopted orphan", got)
	}
	// The live recheck before adopting read the ReplicaSet once.
	gets := 0
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "replicasets" {
			gets++
		}
	}
	if gets != 1 {
		t.Errorf("live ReplicaSet reads = %d, want 1", gets)
	}
}

func TestSyncLeavesPodsOfOtherControllersAlone(t *testing.T) {
	rs := newReplicaSet("web", 1)
	other := newReplicaSet("other", 1)
	theirs := newPod("theirs", other, true)
	f := newFixture(t, BurstReplicas, rs, other, theirs)

	if err := f.sync(rs); err != nil {
		t.Fatal(err)
	}
	// The pod matches our selector but belongs to another ReplicaSet: we create our own.
	f.expectPodWrites(1, 0, 0)
}

func TestFailedAdoptionStopsTheSync(t *testing.T) {
	rs := newReplicaSet("web", 2)
	f := newFixture(t, BurstReplicas, rs, newPod("orphan-1", rs, false), newPod("orphan-2", rs, false))
	f.podControl.Err = apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "orphan-1", errors.New("adopted by someone else"))

	if err := f.sync(rs); err == nil {
		t.Fatal("want the adoption error")
	}
	// Both adoptions were tried; no pod is created for them and no status written on a
	// view we know to be wrong.
	f.expectPodWrites(0, 0, 2)
	if writes := f.statusWrites(); len(writes) != 0 {
		t.Errorf("status written %d times", len(writes))
	}
}

func TestReplicaSetBeingDeletedNeitherAdoptsNorCreates(t *testing.T) {
	t.Run("cached ReplicaSet is being deleted", func(t *testing.T) {
		rs := newReplicaSet("web", 2)
		rs.DeletionTimestamp = &metav1.Time{Time: testNow}
		f := newFixture(t, BurstReplicas, rs, newPod("orphan", rs, false))
		if err := f.sync(rs); err != nil {
			t.Fatal(err)
		}
		f.expectPodWrites(0, 0, 0)
	})
	t.Run("live ReplicaSet is being deleted", func(t *testing.T) {
		// The cache is late: only the live read before adopting sees the deletion.
		cached := newReplicaSet("web", 2)
		live := cached.DeepCopy()
		live.DeletionTimestamp = &metav1.Time{Time: testNow}
		f := newFixture(t, BurstReplicas, live, newPod("orphan", cached, false))
		f.rsStore.Update(cached)
		err := f.sync(cached)
		if err == nil || !strings.Contains(err.Error(), "has just been deleted") {
			t.Fatalf("err = %v, want adoption refused", err)
		}
		f.expectPodWrites(0, 0, 0)
	})
	t.Run("ReplicaSet was recreated under the same name", func(t *testing.T) {
		cached := newReplicaSet("web", 2)
		live := cached.DeepCopy()
		live.UID = "new-uid"
		f := newFixture(t, BurstReplicas, live, newPod("orphan", cached, false))
		f.rsStore.Update(cached)
		if err := f.sync(cached); err == nil || !strings.Contains(err.Error(), "is gone") {
			t.Fatalf("err = %v, want adoption refused", err)
		}
		f.expectPodWrites(0, 0, 0)
	})
	t.Run("ReplicaSet is already gone from the apiserver", func(t *testing.T) {
		// replicas=3 with one owned pod and one orphan cached, and a live read that
		// answers NotFound: upstream stops the sync before creating pods, and so must we.
		rs := newReplicaSet("web", 3)
		f := newFixture(t, BurstReplicas, newPod("owned", rs, true), newPod("orphan", rs, false))
		f.addRS(rs)
		if err := f.sync(rs); err == nil || !strings.Contains(err.Error(), `replicasets.apps "web" not found`) {
			t.Fatalf("err = %v, want the sync to fail on the owner's NotFound", err)
		}
		f.expectPodWrites(0, 0, 0)
	})
}

func TestSyncOfADeletedReplicaSetForgetsItsExpectations(t *testing.T) {
	rs := newReplicaSet("web", 1)
	f := newFixture(t, BurstReplicas, rs)
	logger := klog.FromContext(f.ctx)
	if err := f.sync(rs); err != nil {
		t.Fatal(err)
	}
	if f.c.expectations.Satisfied(logger, cacheKey(rs)) {
		t.Fatal("the creation should be expected")
	}
	// The delete event arrives: expectations go, the key is queued.
	if err := f.rsStore.Delete(rs); err != nil {
		t.Fatal(err)
	}
	f.c.deleteReplicaSet(logger, rs)
	if _, _, ok := f.c.expectations.Get(cacheKey(rs)); ok {
		t.Fatal("expectations survived the delete of their ReplicaSet")
	}
	if got := f.queued(); !reflect.DeepEqual(got, []string{"default/web"}) {
		t.Fatalf("queued %v", got)
	}
	f.podControl.Reset()
	f.client.ClearActions()
	if err := f.sync(rs); err != nil {
		t.Fatal(err)
	}
	f.expectPodWrites(0, 0, 0)
	if len(f.client.Actions()) != 0 {
		t.Errorf("a missing ReplicaSet caused API calls: %v", f.client.Actions())
	}
}

func TestRecreatedReplicaSetStartsWithoutTheOldExpectations(t *testing.T) {
	rs := newReplicaSet("web", 1)
	f := newFixture(t, BurstReplicas, rs)
	logger := klog.FromContext(f.ctx)
	if err := f.sync(rs); err != nil {
		t.Fatal(err)
	}
	// Delete and recreate happened between two watch events: we only see an update
	// with a new UID.
	recreated := rs.DeepCopy()
	recreated.UID = "recreated-uid"
	f.rsStore.Update(recreated)
	f.c.updateReplicaSet(logger, rs, recreated)
	if !f.c.expectations.Satisfied(logger, cacheKey(recreated)) {
		t.Fatal("the recreated ReplicaSet inherited the old one's expectations")
	}
	f.podControl.Reset()
	if _, err := f.client.AppsV1().ReplicaSets("default").Update(context.Background(), recreated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.sync(recreated); err != nil {
		t.Fatal(err)
	}
	f.expectPodWrites(1, 0, 0)
	if f.podControl.ControllerRefs[0].UID != "recreated-uid" {
		t.Errorf("pod created for %s, want the new ReplicaSet", f.podControl.ControllerRefs[0].UID)
	}
}

func TestGracefulDeletionIsObservedOncePerPod(t *testing.T) {
	rs := newReplicaSet("web", 0)
	pods := newPods("pod", 2, rs)
	f := newFixture(t, BurstReplicas, append(asObjects(rs), asObjects(pods...)...)...)
	logger := klog.FromContext(f.ctx)
	key := cacheKey(rs)
	if err := f.sync(rs); err != nil {
		t.Fatal(err)
	}
	f.expectPodWrites(0, 2, 0)

	// pod-0 is deleted gracefully: first an update sets deletionTimestamp...
	old := pods[0]
	terminating := deleting(old.DeepCopy())
	terminating.ResourceVersion = "2"
	f.c.updatePod(logger, old, terminating)
	if _, del, _ := f.c.expectations.Get(key); del != 1 {
		t.Fatalf("after the graceful delete update, outstanding deletions = %d, want 1", del)
	}
	// ...then the kubelet finishes and the delete arrives: it must not count again.
	f.c.deletePod(logger, terminating)
	if _, del, _ := f.c.expectations.Get(key); del != 1 {
		t.Fatalf("after the delete of the same pod, outstanding deletions = %d, want 1", del)
	}
	if f.c.expectations.Satisfied(logger, key) {
		t.Fatal("satisfied while pod-1 has not been seen going away")
	}
	// A pod we did not delete does not count either.
	f.c.deletePod(logger, newPod("unrelated", rs, true))
	if f.c.expectations.Satisfied(logger, key) {
		t.Fatal("an unrelated deletion satisfied the expectations")
	}
	f.c.deletePod(logger, pods[1])
	if !f.c.expectations.Satisfied(logger, key) {
		t.Fatal("both deletions observed, want satisfied")
	}
}

func TestTerminatingPodsAreCountedButNotReplacedTwice(t *testing.T) {
	rs := newReplicaSet("web", 2)
	otherSelector := deleting(newPod("terminating-stray", rs, true))
	otherSelector.Labels = map[string]string{"app": "other"}
	orphanTerminating := deleting(newPod("terminating-orphan", rs, false))
	failedTerminating := deleting(newPod("failed-terminating", rs, true))
	failedTerminating.Status.Phase = v1.PodFailed
	f := newFixture(t, BurstReplicas, rs,
		newPod("running", rs, true),
		deleting(newPod("terminating-1", rs, true)),
		deleting(newPod("terminating-2", rs, true)),
		otherSelector, orphanTerminating, failedTerminating)

	if err := f.sync(rs); err != nil {
		t.Fatal(err)
	}
	// Terminating pods are not active: one replacement is created, as upstream.
	f.expectPodWrites(1, 0, 0)
	status := f.lastStatus()
	if status.Replicas != 1 || status.TerminatingReplicas == nil || *status.TerminatingReplicas != 2 {
		t.Errorf("status replicas %d terminating %v, want 1 and 2 (only owned, matching, non-terminal)",
			status.Replicas, optional(status.TerminatingReplicas))
	}
}

func TestStatusCountsReadyAndAvailablePodsAndRequeuesForTheNextAvailable(t *testing.T) {
	rs := newReplicaSet("web", 4)
	rs.Spec.MinReadySeconds = 10
	availableLong := newPod("available", rs, true)
	readySoon := newPod("ready-3s", rs, true)
	readySoon.Status.Conditions[0].LastTransitionTime = metav1.NewTime(testNow.Add(-3 * time.Second))
	readyLater := newPod("ready-1s", rs, true)
	readyLater.Status.Conditions[0].LastTransitionTime = metav1.NewTime(testNow.Add(-time.Second))
	partlyLabeled := notReady(newPod("partly-labeled", rs, true))
	partlyLabeled.Labels = map[string]string{"app": "web"}
	f := newFixture(t, BurstReplicas, rs, availableLong, readySoon, readyLater, partlyLabeled)

	if err := f.sync(rs); err != nil {
		t.Fatal(err)
	}
	status := f.lastStatus()
	want := appsv1.ReplicaSetStatus{
		Replicas: 4, FullyLabeledReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 1,
		ObservedGeneration: 1, TerminatingReplicas: new(int32(0)),
	}
	if !reflect.DeepEqual(status, want) {
		t.Errorf("status\n got %+v\nwant %+v", status, want)
	}
	if after, ok := f.queue.addedAfter("default/web"); !ok || after != 7*time.Second {
		t.Errorf("requeue after (%v, %v), want 7s, when ready-3s becomes available", after, ok)
	}
}

func TestStatusUpdateIsRetriedOnceOnAFreshReplicaSet(t *testing.T) {
	rs := newReplicaSet("web", 1)
	f := newFixture(t, BurstReplicas, rs, newPod("pod-0", rs, true))
	// The live object moved on (generation 2) since our cache saw it.
	live := rs.DeepCopy()
	live.Generation = 2
	if _, err := f.client.AppsV1().ReplicaSets("default").Update(context.Background(), live, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	failures := 1
	f.client.PrependReactor("update", "replicasets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" && failures > 0 {
			failures--
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "replicasets"}, "web", errors.New("stale"))
		}
		return false, nil, nil
	})
	f.client.ClearActions()

	if err := f.sync(rs); err != nil {
		t.Fatalf("sync: %v", err)
	}
	writes := f.statusWrites()
	if len(writes) != 2 {
		t.Fatalf("status writes = %d, want 2 (one failure, one retry)", len(writes))
	}
	retry := writes[1]
	if retry.Generation != 2 || retry.Status.ObservedGeneration != 1 || retry.Status.Replicas != 1 {
		t.Errorf("retry wrote generation %d observedGeneration %d replicas %d; want the fresh object claiming only generation 1",
			retry.Generation, retry.Status.ObservedGeneration, retry.Status.Replicas)
	}
}

func TestStatusUpdateFailureRequeuesTheReplicaSet(t *testing.T) {
	rs := newReplicaSet("web", 1)
	f := newFixture(t, BurstReplicas, rs, newPod("pod-0", rs, true))
	f.client.PrependReactor("update", "replicasets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("apiserver unavailable")
	})
	f.queue.Add(cacheKey(rs))
	f.c.queue.ProcessNextWorkItem(f.ctx)
	if n := f.queue.NumRequeues(cacheKey(rs)); n != 1 {
		t.Fatalf("requeues = %d, want 1 rate-limited retry", n)
	}
	if len(f.statusWrites()) != 2 {
		t.Errorf("status writes = %d, want the write and one retry", len(f.statusWrites()))
	}
}

func TestSyncWaitsForTheCacheToSeeItsOwnStatusWrite(t *testing.T) {
	rs := newReplicaSet("web", 1)
	rs.ResourceVersion = "10"
	f := newFixture(t, BurstReplicas, rs, newPod("pod-0", rs, true))
	nn := types.NamespacedName{Namespace: "default", Name: "web"}

	// Pretend we wrote the status at resourceVersion 12 while the cache is at 10.
	f.c.consistency.WroteAt(nn, rs.UID, replicaSetsResource, "12")
	err := f.sync(rs)
	var stale *staleCacheError
	if !errors.As(err, &stale) {
		t.Fatalf("err = %v, want a stale cache error", err)
	}
	if len(f.client.Actions()) != 0 {
		t.Fatal("a sync on a stale cache must not write")
	}

	// The informer delivers our write.
	caughtUp := rs.DeepCopy()
	caughtUp.ResourceVersion = "12"
	f.rsStore.Update(caughtUp)
	if err := f.sync(rs); err != nil {
		t.Fatalf("sync after the cache caught up: %v", err)
	}
}

func TestInvalidSelectorIsDroppedWithoutWrites(t *testing.T) {
	// An invalid selector can only come from a corrupt object: the sync drops it
	// without writes instead of failing forever.
	rs := newReplicaSet("web", 1)
	rs.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}}
	f := newFixture(t, BurstReplicas, rs)
	if err := f.sync(rs); err != nil {
		t.Fatalf("sync: %v", err)
	}
	f.expectPodWrites(0, 0, 0)
	if len(f.statusWrites()) != 0 {
		t.Error("status written for an invalid selector")
	}
}

func TestSyncThroughTheAPIRecordsUpstreamEvents(t *testing.T) {
	rs := newReplicaSet("web", 2)
	f := newFixture(t, BurstReplicas, rs)
	n := 0
	f.client.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		pod := a.(clienttesting.CreateAction).GetObject().(*v1.Pod)
		n++
		pod.Name = fmt.Sprintf("%s%d", pod.GenerateName, n)
		return false, nil, nil
	})
	f.c.podControl = &podcontrol.Real{Client: f.client, Recorder: f.recorder, OnWrite: f.c.podWritten}

	if err := f.sync(rs); err != nil {
		t.Fatal(err)
	}
	pods, err := f.client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(pods.Items) != 2 {
		t.Fatalf("created %d pods (%v), want 2", len(pods.Items), err)
	}
	for _, pod := range pods.Items {
		if pod.GenerateName != "web-" || !metav1.IsControlledBy(&pod, rs) || pod.Labels["tier"] != "frontend" {
			t.Errorf("pod %s: generateName %q owner %v labels %v", pod.Name, pod.GenerateName, pod.OwnerReferences, pod.Labels)
		}
	}
	var events []string
	for len(f.recorder.Events) > 0 {
		events = append(events, <-f.recorder.Events)
	}
	if !sameSet(events, []string{"Normal SuccessfulCreate Created pod: web-1", "Normal SuccessfulCreate Created pod: web-2"}) {
		t.Errorf("events %q", events)
	}
}

func sameSet(a, b []string) bool {
	count := map[string]int{}
	for _, s := range a {
		count[s]++
	}
	for _, s := range b {
		count[s]--
	}
	for _, n := range count {
		if n != 0 {
			return false
		}
	}
	return len(a) == len(b)
}
