package controllerref

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

var rsKind = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")

func newOwner(deleting bool) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "rs", Namespace: "default", UID: "rs-uid"}}
	if deleting {
		rs.DeletionTimestamp = &metav1.Time{}
	}
	return rs
}

func newPod(name, namespace string, lbls map[string]string, owner *metav1.OwnerReference, deleting bool) *v1.Pod {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: namespace, UID: types.UID(name + "-uid"), Labels: lbls,
	}}
	if owner != nil {
		pod.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	if deleting {
		pod.DeletionTimestamp = &metav1.Time{}
	}
	return pod
}

type recordedPatch struct {
	pod   string
	patch string
}

func TestClaimAdoptsMatchingOrphansAndReleasesNonMatchingChildren(t *testing.T) {
	owner := newOwner(false)
	ref := metav1.NewControllerRef(owner, rsKind)
	otherRef := metav1.NewControllerRef(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "other", UID: "other-uid"}}, rsKind)
	match := map[string]string{"app": "web"}
	noMatch := map[string]string{"app": "db"}
	adopt := func(pod string) recordedPatch {
		return recordedPatch{pod, `{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"rs-uid","controller":true,"blockOwnerDeletion":true}],"uid":"` + pod + `-uid"}}`}
	}
	release := func(pod string) recordedPatch {
		return recordedPatch{pod, `{"metadata":{"uid":"` + pod + `-uid","ownerReferences":[{"$patch":"delete","uid":"rs-uid"}]}}`}
	}
	tests := []struct {
		name        string
		owner       *appsv1.ReplicaSet
		pods        []*v1.Pod
		wantClaimed []string
		wantPatches []recordedPatch
	}{
		{
			name:        "claims owned and adopts orphans with matching labels",
			owner:       owner,
			pods:        []*v1.Pod{newPod("owned", "default", match, ref, false), newPod("orphan", "default", match, nil, false)},
			wantClaimed: []string{"owned", "orphan"},
			wantPatches: []recordedPatch{adopt("orphan")},
		},
		{
			name:        "owner being deleted keeps owned children but adopts nothing",
			owner:       newOwner(true),
			pods:        []*v1.Pod{newPod("owned", "default", match, ref, false), newPod("orphan", "default", match, nil, false)},
			wantClaimed: []string{"owned"},
		},
		{
			name:  "owner being deleted does not release non-matching children",
			owner: newOwner(true),
			pods:  []*v1.Pod{newPod("owned", "default", noMatch, ref, false)},
		},
		{
			name:  "ignores children controlled by another owner",
			owner: owner,
			pods:  []*v1.Pod{newPod("theirs", "default", match, otherRef, false)},
		},
		{
			name:        "releases owned children whose labels no longer match",
			owner:       owner,
			pods:        []*v1.Pod{newPod("owned", "default", match, ref, false), newPod("stray", "default", noMatch, ref, false)},
			wantClaimed: []string{"owned"},
			wantPatches: []recordedPatch{release("stray")},
		},
		{
			name:  "does not adopt orphans that are being deleted",
			owner: owner,
			pods:  []*v1.Pod{newPod("dying", "default", match, nil, true)},
		},
		{
			name:  "does not adopt non-matching orphans",
			owner: owner,
			pods:  []*v1.Pod{newPod("orphan", "default", noMatch, nil, false)},
		},
		{
			name:  "does not adopt orphans of another namespace",
			owner: owner,
			pods:  []*v1.Pod{newPod("orphan", "elsewhere", match, nil, false)},
		},
		{
			name:        "cluster-scoped owner adopts orphans of any namespace",
			owner:       &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "rs", UID: "rs-uid"}},
			pods:        []*v1.Pod{newPod("orphan", "elsewhere", match, nil, false)},
			wantClaimed: []string{"orphan"},
			wantPatches: []recordedPatch{adopt("orphan")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var patches []recordedPatch
			m := NewManager(tt.owner, rsKind, labels.SelectorFromSet(match), nil,
				func(_ context.Context, pod *v1.Pod, patch []byte) error {
					patches = append(patches, recordedPatch{pod.Name, string(patch)})
					return nil
				})
			claimed, err := m.Claim(context.Background(), tt.pods)
			if err != nil {
				t.Fatalf("Claim: %v", err)
			}
			if got := names(claimed); !reflect.DeepEqual(got, tt.wantClaimed) {
				t.Errorf("claimed %v, want %v", got, tt.wantClaimed)
			}
			if !reflect.DeepEqual(patches, tt.wantPatches) {
				t.Errorf("patches %v, want %v", patches, tt.wantPatches)
			}
		})
	}
}

func TestClaimFiltersApplyToOrphansAndOwnedChildren(t *testing.T) {
	owner := newOwner(false)
	ref := metav1.NewControllerRef(owner, rsKind)
	match := map[string]string{"app": "web"}
	var patched []string
	m := NewManager(owner, rsKind, labels.SelectorFromSet(match), nil,
		func(_ context.Context, pod *v1.Pod, _ []byte) error {
			patched = append(patched, pod.Name)
			return nil
		})
	notFiltered := func(pod *v1.Pod) bool { return !strings.HasPrefix(pod.Name, "filtered") }
	claimed, err := m.Claim(context.Background(), []*v1.Pod{
		newPod("filtered-orphan", "default", match, nil, false),
		newPod("filtered-owned", "default", match, ref, false),
		newPod("orphan", "default", match, nil, false),
	}, notFiltered)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if got := names(claimed); !reflect.DeepEqual(got, []string{"orphan"}) {
		t.Errorf("claimed %v, want [orphan]", got)
	}
	// The owned child failing the filter is released; the filtered orphan is left alone.
	if !reflect.DeepEqual(patched, []string{"filtered-owned", "orphan"}) {
		t.Errorf("patched %v, want [filtered-owned orphan]", patched)
	}
}

func TestClaimWorksForReplicaSetChildren(t *testing.T) {
	deployment := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "d-uid"}}
	orphan := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default", UID: "rs-1", Labels: map[string]string{"app": "web"}}}
	var got string
	m := NewManager(deployment, appsv1.SchemeGroupVersion.WithKind("Deployment"), labels.SelectorFromSet(map[string]string{"app": "web"}), nil,
		func(_ context.Context, rs *appsv1.ReplicaSet, patch []byte) error {
			got = string(patch)
			return nil
		})
	claimed, err := m.Claim(context.Background(), []*appsv1.ReplicaSet{orphan})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("Claim = %v, %v; want the orphan adopted", names(claimed), err)
	}
	want := `{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":"d-uid","controller":true,"blockOwnerDeletion":true}],"uid":"rs-1"}}`
	if got != want {
		t.Errorf("patch\n got %s\nwant %s", got, want)
	}
}

func TestClaimHandlesPatchErrors(t *testing.T) {
	owner := newOwner(false)
	ref := metav1.NewControllerRef(owner, rsKind)
	match := map[string]string{"app": "web"}
	podsGR := schema.GroupResource{Resource: "pods"}
	tests := []struct {
		name        string
		pod         *v1.Pod
		patchErr    error
		wantErr     bool
		wantClaimed bool
	}{
		{"adopting a vanished orphan is not an error", newPod("orphan", "default", match, nil, false), apierrors.NewNotFound(podsGR, "orphan"), false, false},
		{"failed adoption is an error", newPod("orphan", "default", match, nil, false), apierrors.NewConflict(podsGR, "orphan", errors.New("boom")), true, false},
		{"releasing a vanished child is not an error", newPod("stray", "default", nil, ref, false), apierrors.NewNotFound(podsGR, "stray"), false, false},
		{"release rejected as invalid is not an error", newPod("stray", "default", nil, ref, false), apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "stray", nil), false, false},
		{"failed release is an error", newPod("stray", "default", nil, ref, false), errors.New("connection refused"), true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewManager(owner, rsKind, labels.SelectorFromSet(match), nil,
				func(context.Context, *v1.Pod, []byte) error { return tt.patchErr })
			claimed, err := m.Claim(context.Background(), []*v1.Pod{tt.pod})
			if (err != nil) != tt.wantErr {
				t.Errorf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if (len(claimed) == 1) != tt.wantClaimed {
				t.Errorf("claimed = %v, wantClaimed %v", names(claimed), tt.wantClaimed)
			}
		})
	}
}

func TestCanAdoptRunsOnceAndOnlyWhenAdopting(t *testing.T) {
	owner := newOwner(false)
	ref := metav1.NewControllerRef(owner, rsKind)
	match := map[string]string{"app": "web"}
	noop := func(context.Context, *v1.Pod, []byte) error { return nil }

	calls := 0
	m := NewManager(owner, rsKind, labels.SelectorFromSet(match),
		func(context.Context) error { calls++; return nil }, noop)
	if _, err := m.Claim(context.Background(), []*v1.Pod{newPod("owned", "default", match, ref, false)}); err != nil {
		t.Fatal(err)
	}
	if calls != 0 {
		t.Fatalf("canAdopt ran %d times with nothing to adopt, want 0", calls)
	}
	if _, err := m.Claim(context.Background(), []*v1.Pod{
		newPod("a", "default", match, nil, false), newPod("b", "default", match, nil, false),
	}); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Fatalf("canAdopt ran %d times for two adoptions, want 1", calls)
	}

	refused := NewManager(owner, rsKind, labels.SelectorFromSet(match),
		func(context.Context) error { return errors.New("owner is being deleted") }, noop)
	claimed, err := refused.Claim(context.Background(), []*v1.Pod{
		newPod("owned", "default", match, ref, false), newPod("a", "default", match, nil, false), newPod("b", "default", match, nil, false),
	})
	if err == nil || !strings.Contains(err.Error(), "can't adopt Pod default/a (a-uid): owner is being deleted") {
		t.Errorf("err = %v, want both adoptions refused with the canAdopt error", err)
	}
	if got := names(claimed); !reflect.DeepEqual(got, []string{"owned"}) {
		t.Errorf("claimed %v, want only the already owned pod", got)
	}
}

// An owner deleted since it was cached answers the live GET with NotFound. That must
// fail the claim, not read as "the child vanished": otherwise the caller goes on to
// create children for an owner that no longer exists.
func TestClaimFailsWhenTheLiveOwnerIsGone(t *testing.T) {
	owner := newOwner(false)
	match := map[string]string{"app": "web"}
	gone := RecheckDeletionTimestamp(LiveOwner(owner, func(context.Context) (*appsv1.ReplicaSet, error) {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "replicasets"}, owner.Name)
	}))
	patched := false
	m := NewManager(owner, rsKind, labels.SelectorFromSet(match), gone,
		func(context.Context, *v1.Pod, []byte) error { patched = true; return nil })
	claimed, err := m.Claim(context.Background(), []*v1.Pod{newPod("orphan", "default", match, nil, false)})
	if err == nil {
		t.Fatalf("Claim = %v, nil; want an error for the owner that is gone", names(claimed))
	}
	if patched {
		t.Error("the orphan was patched although its would-be owner is gone")
	}
}

func TestRecheckDeletionTimestampRefusesGoneRecreatedOrDeletingOwners(t *testing.T) {
	owner := newOwner(false)
	get := func(rs *appsv1.ReplicaSet, err error) func(context.Context) (*appsv1.ReplicaSet, error) {
		return func(context.Context) (*appsv1.ReplicaSet, error) { return rs, err }
	}
	recreated := owner.DeepCopy()
	recreated.UID = "new-uid"
	tests := []struct {
		name    string
		get     func(context.Context) (*appsv1.ReplicaSet, error)
		wantErr string
	}{
		{"live owner allows adoption", get(owner.DeepCopy(), nil), ""},
		{"owner gone", get(nil, apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "replicasets"}, "rs")), "can't recheck DeletionTimestamp"},
		{"owner recreated", get(recreated, nil), "original ReplicaSet default/rs is gone: got uid new-uid, wanted rs-uid"},
		{"owner being deleted", get(newOwner(true), nil), "default/rs has just been deleted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := RecheckDeletionTimestamp(LiveOwner(owner, tt.get))(context.Background())
			if tt.wantErr == "" && err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestReleasePatchMatchesUpstreamBytes(t *testing.T) {
	tests := []struct {
		name      string
		childUID  types.UID
		ownerUID  types.UID
		wantPatch string
	}{
		{"plain uids", "ss2", "ss1", `{"metadata":{"uid":"ss2","ownerReferences":[{"$patch":"delete","uid":"ss1"}]}}`},
		{"owner uid is escaped", "ss2", `ss1"hello`, `{"metadata":{"uid":"ss2","ownerReferences":[{"$patch":"delete","uid":"ss1\"hello"}]}}`},
		{"child uid is escaped", `ss2"hello`, "ss1", `{"metadata":{"uid":"ss2\"hello","ownerReferences":[{"$patch":"delete","uid":"ss1"}]}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReleasePatch(tt.childUID, tt.ownerUID)
			if err != nil || string(got) != tt.wantPatch {
				t.Errorf("ReleasePatch = %s, %v; want %s", got, err, tt.wantPatch)
			}
		})
	}
}

func TestAdoptPatchRefusesAnOwnerWithoutIdentity(t *testing.T) {
	if _, err := AdoptPatch(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "rs"}}, rsKind, "child"); !errors.Is(err, ErrNoOwner) {
		t.Errorf("err = %v, want ErrNoOwner", err)
	}
}

func TestPodsControlledByUsesTheControllerIndex(t *testing.T) {
	owner := newOwner(false)
	ref := metav1.NewControllerRef(owner, rsKind)
	other := metav1.NewControllerRef(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "other", UID: "other-uid"}}, rsKind)
	nonController := *ref
	nonController.Controller = nil

	informer := cache.NewSharedIndexInformer(&cache.ListWatch{}, &v1.Pod{}, 0, cache.Indexers{})
	if err := AddPodControllerIndexer(informer); err != nil {
		t.Fatal(err)
	}
	// A second controller sharing the informer must not fail on the existing index.
	if err := AddPodControllerIndexer(informer); err != nil {
		t.Fatalf("second AddPodControllerIndexer: %v", err)
	}
	indexer := informer.GetIndexer()
	for _, pod := range []*v1.Pod{
		newPod("owned", "default", nil, ref, false),
		newPod("orphan", "default", nil, nil, false),
		newPod("only-owner-ref", "default", nil, &nonController, false),
		newPod("theirs", "default", nil, other, false),
		newPod("orphan-elsewhere", "elsewhere", nil, nil, false),
	} {
		if err := indexer.Add(pod); err != nil {
			t.Fatal(err)
		}
	}

	owned, err := PodsControlledBy(indexer, owner, "ReplicaSet", false)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(owned); !reflect.DeepEqual(got, []string{"owned"}) {
		t.Errorf("owned pods %v, want [owned]", got)
	}
	withOrphans, err := PodsControlledBy(indexer, owner, "ReplicaSet", true)
	if err != nil {
		t.Fatal(err)
	}
	got := names(withOrphans)
	if len(got) != 3 || got[0] != "owned" {
		t.Errorf("owned pods and orphans %v, want owned then orphan and only-owner-ref", got)
	}
	if _, err := PodsControlledBy(indexer, &appsv1.ReplicaSet{}, "ReplicaSet", true); err == nil {
		t.Error("an owner without namespace, name and uid should be an error")
	}
}

func names[T metav1.Object](objs []T) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetName())
	}
	return out
}
