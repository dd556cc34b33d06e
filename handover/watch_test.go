package handover

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/utils/ptr"
)

var ours = []string{"deployment-controller", "endpoints-controller", "endpointslice-controller", "replicaset-controller"}

func entry(manager, subresource string, at time.Time) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: subresource,
		Time: &metav1.Time{Time: at}, APIVersion: "v1"}
}

func object(apiVersion, kind, name string, labels map[string]string, entries ...metav1.ManagedFieldsEntry) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: apiVersion, Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: labels, ManagedFields: entries},
	}
}

// podOf is a pod whose controller is of the given kind.
func podOf(ownerAPIVersion, ownerKind string, entries ...metav1.ManagedFieldsEntry) *metav1.PartialObjectMetadata {
	pod := object("v1", "Pod", "p", nil, entries...)
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: ownerAPIVersion, Kind: ownerKind, Name: "owner", UID: "u", Controller: ptr.To(true)}}
	return pod
}

func TestUpstreamWritesNamesTheControllerBehindEachEntry(t *testing.T) {
	start := now
	after, before := start.Add(5*time.Second), start.Add(-time.Hour)
	for _, tc := range []struct {
		name     string
		resource int // index into watchedResources
		obj      *metav1.PartialObjectMetadata
		want     map[string]string // controller -> object
	}{
		{"ReplicaSet status is the ReplicaSet controller's", 0,
			object("apps/v1", "ReplicaSet", "rs", nil, entry("kube-controller-manager", "status", after)),
			map[string]string{"replicaset-controller": "ReplicaSet ns/rs status"}},
		{"ReplicaSet spec is the Deployment controller's", 0,
			object("apps/v1", "ReplicaSet", "rs", nil, entry("kube-controller-manager", "", after)),
			map[string]string{"deployment-controller": "ReplicaSet ns/rs"}},
		{"writes before the leader started are history", 0,
			object("apps/v1", "ReplicaSet", "rs", nil, entry("kube-controller-manager", "status", before)), nil},
		{"mini-kcm's own and users' writes are not upstream's", 0,
			object("apps/v1", "ReplicaSet", "rs", nil, entry("mini-kcm", "status", after), entry("kubectl", "", after)), nil},
		{"Deployment status", 1,
			object("apps/v1", "Deployment", "d", nil, entry("kube-controller-manager", "status", after)),
			map[string]string{"deployment-controller": "Deployment ns/d status"}},
		{"Endpoints", 2,
			object("v1", "Endpoints", "svc", nil, entry("kube-controller-manager", "", after)),
			map[string]string{"endpoints-controller": "Endpoints ns/svc"}},
		{"EndpointSlice of the EndpointSlice controller", 3,
			object("discovery.k8s.io/v1", "EndpointSlice", "svc-abc", map[string]string{"endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"},
				entry("kube-controller-manager", "", after)),
			map[string]string{"endpointslice-controller": "EndpointSlice ns/svc-abc"}},
		{"a pod a ReplicaSet controls, created by upstream, is the ReplicaSet controller's", 4,
			podOf("apps/v1", "ReplicaSet", entry("kube-controller-manager", "", after)),
			map[string]string{"replicaset-controller": "Pod ns/p"}},
		{"upstream's status writes to pods are other controllers'", 4,
			podOf("apps/v1", "ReplicaSet", entry("kube-controller-manager", "status", after)), nil},
		{"pods of other owners are other controllers'", 4,
			podOf("apps/v1", "StatefulSet", entry("kube-controller-manager", "", after)), nil},
		{"pods without an owner are nobody's of ours", 4,
			object("v1", "Pod", "p", nil, entry("kube-controller-manager", "", after)), nil},
		{"EndpointSlice of the mirroring controller is not ours", 3,
			object("discovery.k8s.io/v1", "EndpointSlice", "svc-abc", map[string]string{"endpointslice.kubernetes.io/managed-by": "endpointslicemirroring-controller.k8s.io"},
				entry("kube-controller-manager", "", after)), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := upstreamWrites(watchedResources[tc.resource], tc.obj, ours, start)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for c, object := range tc.want {
				if got[c].Object != object || !got[c].Written.Equal(after) {
					t.Errorf("%s: got %+v, want %s written %s", c, got[c], object, after)
				}
			}
		})
	}
	// A controller mini-kcm does not run is no fight.
	obj := object("apps/v1", "ReplicaSet", "rs", nil, entry("kube-controller-manager", "status", after))
	if got := upstreamWrites(watchedResources[0], obj, []string{"deployment-controller"}, start); len(got) != 0 {
		t.Errorf("sighting for a controller mini-kcm does not run: %v", got)
	}
}

func TestWatchReportsAFightWhileLeadingAndClearsItAfter(t *testing.T) {
	start := time.Now()
	rs := object("apps/v1", "ReplicaSet", "rs", nil, entry("kube-controller-manager", "status", start.Add(2*time.Second)))
	old := object("v1", "Endpoints", "svc", nil, entry("kube-controller-manager", "", start.Add(-time.Hour)))
	scheme := metadatafake.NewTestScheme()
	for _, r := range watchedResources {
		gv := r.gvr.GroupVersion()
		scheme.AddKnownTypeWithName(gv.WithKind(r.kind), &metav1.PartialObjectMetadata{})
		scheme.AddKnownTypeWithName(gv.WithKind(r.kind+"List"), &metav1.PartialObjectMetadataList{})
	}
	client := metadatafake.NewSimpleMetadataClient(scheme, []runtime.Object{rs, old}...)
	w := NewWatch(client, ours)
	w.now = func() time.Time { return start }
	if s := w.Status(); !strings.HasPrefix(s, "not watched") {
		t.Errorf("status before leading = %q", s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for len(w.Active()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	active := w.Active()
	if len(active) != 1 || active["replicaset-controller"].Object != "ReplicaSet ns/rs status" {
		t.Errorf("active = %v, want the ReplicaSet controller only (the Endpoints write is older than the term)", active)
	}
	if s := w.Status(); !strings.Contains(s, "FIGHT: replicaset-controller ACTIVE") {
		t.Errorf("status = %q", s)
	}
	// Ten minutes without another write: the hand-over was completed since.
	w.mu.Lock()
	w.now = func() time.Time { return start.Add(activeFor + time.Minute) }
	w.mu.Unlock()
	if a := w.Active(); len(a) != 0 {
		t.Errorf("still active after %s without writes: %v", activeFor, a)
	}
	cancel()
	<-done
	if s := w.Status(); !strings.HasPrefix(s, "not watched") {
		t.Errorf("status after the term = %q", s)
	}
}
