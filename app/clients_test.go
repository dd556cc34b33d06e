package app

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/mini-kcm/mini-kcm/controllers/throttle"
)

func TestInformerClientDecodesTrimmed(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}}
	pods := &corev1.PodList{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"},
		Items: []corev1.Pod{{
			ObjectMeta: metav1.ObjectMeta{Name: "p", ManagedFields: managed},
			Spec:       corev1.PodSpec{NodeName: "node", Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
		}},
	}
	replicaSets := &appsv1.ReplicaSetList{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSetList"},
		Items:    []appsv1.ReplicaSet{{ObjectMeta: metav1.ObjectMeta{Name: "rs", ManagedFields: managed, Annotations: map[string]string{"a": "b"}}}},
	}
	serve := map[string]runtime.Object{"/api/v1/pods": pods, "/apis/apps/v1/replicasets": replicaSets}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		obj, ok := serve[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		var buf bytes.Buffer
		if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(obj, &buf); err != nil {
			t.Error(err)
		}
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
		_, _ = w.Write(buf.Bytes())
	}))
	defer server.Close()

	builder := clientBuilder{base: &rest.Config{Host: server.URL, QPS: 5, Burst: 10,
		ContentConfig: rest.ContentConfig{ContentType: "application/vnd.kubernetes.protobuf"}}}
	client, err := builder.informerClient("shared-informers")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	gotPods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := gotPods.Items[0]; p.Name != "p" || p.Spec.NodeName != "node" || p.Spec.Containers[0].Name != "app" ||
		p.Spec.Containers[0].Image != "" || p.ManagedFields != nil {
		t.Errorf("pod not decoded trimmed: %+v", p)
	}
	gotRS, err := client.AppsV1().ReplicaSets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rs := gotRS.Items[0]; rs.Name != "rs" || rs.Annotations["a"] != "b" || rs.ManagedFields != nil {
		t.Errorf("ReplicaSet not decoded without managedFields only: %+v", rs)
	}
}

func TestEveryClientHasARateLimiterOfItsOwnThatCanBePaidAhead(t *testing.T) {
	builder := clientBuilder{base: &rest.Config{Host: "https://127.0.0.1:1", QPS: 5, Burst: 10}}
	a, err := builder.Client("a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := builder.Client("b")
	if err != nil {
		t.Fatal(err)
	}
	if throttle.Of(a) == nil || throttle.Of(b) == nil || throttle.Of(a) == throttle.Of(b) {
		t.Errorf("limiters %p and %p, want two of package throttle", throttle.Of(a), throttle.Of(b))
	}
}
