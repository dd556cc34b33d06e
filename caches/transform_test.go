package caches

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/mini-kcm/mini-kcm/caches/cachetrim"
	"github.com/mini-kcm/mini-kcm/controllers/all"
)

// registryTrimmer keeps of pods what the compiled-in controllers read, as Run's does.
func registryTrimmer(t *testing.T) *cachetrim.Trimmer {
	t.Helper()
	trimmer, err := cachetrim.NewTrimmer(all.Registry().PodReads())
	if err != nil {
		t.Fatal(err)
	}
	return trimmer
}

// With JSON the informer client decodes pods whole, and the transform trims them.
func TestCacheTransformSlimsJSONPodsAndKeepsOtherObjectsWhole(t *testing.T) {
	trimCachedObject := Transform("application/json", registryTrimmer(t))
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", ManagedFields: managed, Annotations: map[string]string{"a": "b"}},
		Spec: corev1.PodSpec{NodeName: "node", Containers: []corev1.Container{{
			Name: "app", Image: "app:1", Env: []corev1.EnvVar{{Name: "X", Value: "1"}},
		}}},
	}
	obj, err := trimCachedObject(pod)
	if err != nil {
		t.Fatal(err)
	}
	got := obj.(*corev1.Pod)
	if got.ManagedFields != nil || got.Annotations != nil || got.Spec.Containers[0].Image != "" || got.Spec.Containers[0].Env != nil {
		t.Errorf("pod not trimmed: %+v", got)
	}
	if got.Name != "p" || got.Spec.NodeName != "node" || got.Spec.Containers[0].Name != "app" {
		t.Errorf("pod lost what controllers read: %+v", got)
	}

	// Services (like ReplicaSets, whose pod template creates pods) are cached whole.
	service := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "s", ManagedFields: managed, Annotations: map[string]string{"a": "b"}},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "web"}},
	}
	obj, err = trimCachedObject(service)
	if err != nil {
		t.Fatal(err)
	}
	if s := obj.(*corev1.Service); s.ManagedFields != nil || s.Annotations["a"] != "b" || s.Spec.Selector["app"] != "web" {
		t.Errorf("service = %+v, want only managedFields dropped", s)
	}

	tombstone := cache.DeletedFinalStateUnknown{Key: "default/p", Obj: pod}
	if obj, err := trimCachedObject(tombstone); err != nil || obj != any(tombstone) {
		t.Errorf("a tombstone must pass unchanged, got %v, %v", obj, err)
	}
}

// With protobuf the informer client's Decoder trimmed the pods already: the transform
// does not encode and decode them a second time.
func TestCacheTransformLeavesProtobufPodsToTheDecoder(t *testing.T) {
	transform := Transform("application/vnd.kubernetes.protobuf", registryTrimmer(t))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
	}
	obj, err := transform(pod)
	if err != nil {
		t.Fatal(err)
	}
	if got := obj.(*corev1.Pod); got.ManagedFields != nil || got.Spec.Containers[0].Image != "app:1" {
		t.Errorf("pod = %+v, want only managedFields dropped", got)
	}
}
