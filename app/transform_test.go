package app

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestTrimCachedObjectSlimsPodsAndKeepsOtherObjectsWhole(t *testing.T) {
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
