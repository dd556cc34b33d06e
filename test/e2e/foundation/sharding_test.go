package foundation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mini-kcm/mini-kcm/app/shards"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// This suite's apiserver runs without the ShardedListAndWatch gate: it ignores
// shardSelector, and mini-kcm must see that (test/e2e/sharding has the gate on).
func TestAnApiserverWithoutTheShardGateIsDetectedAsIgnoringIt(t *testing.T) {
	f := framework.New(t)
	// A Service to probe with, in case the apiserver has not created default/kubernetes yet.
	probe := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := f.Client.CoreV1().Services(f.Namespace).Create(f.Context(), probe, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	filters, err := shards.ServerFilters(f.Context(), f.Client)
	if err != nil {
		t.Fatal(err)
	}
	if filters {
		t.Error("an apiserver without ShardedListAndWatch was detected as filtering by shard")
	}
}
