package sharding

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/mini-kcm/mini-kcm/leaderelection"
)

func shardFenceBinding(name, policy, namespace, lease string) runtime.Object {
	return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy,
			ParamRef: &admissionregistrationv1.ParamRef{Namespace: namespace, Name: lease}},
	}
}

// A sharded replica under --leader-elect-apiserver-fence starts only when every shard
// Lease has its binding of the sharded fence policy; otherwise the error names each
// missing Lease and the fix. Bindings of other policies, or of a Lease of the same name
// in another namespace, do not count.
func TestShardedApiserverFenceNeedsABindingForEveryShard(t *testing.T) {
	policy := leaderelection.ShardFencePolicyName
	tests := []struct {
		name     string
		bindings []runtime.Object
		missing  []string
	}{
		{"all three", []runtime.Object{
			shardFenceBinding("a", policy, "kube-system", "kcm-0"),
			shardFenceBinding("b", policy, "kube-system", "kcm-1"),
			shardFenceBinding("c", policy, "kube-system", "kcm-2"),
		}, nil},
		{"none", nil, []string{"kube-system/kcm-0", "kube-system/kcm-1", "kube-system/kcm-2"}},
		{"generated for two shards, another policy's and another namespace's", []runtime.Object{
			shardFenceBinding("a", policy, "kube-system", "kcm-0"),
			shardFenceBinding("b", policy, "kube-system", "kcm-1"),
			shardFenceBinding("c", leaderelection.FencePolicyName, "kube-system", "kcm-2"),
			shardFenceBinding("d", policy, "default", "kcm-2"),
		}, []string{"kube-system/kcm-2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(tc.bindings...)
			err := CheckFenceBindings(context.Background(), client, "kube-system", "kcm", 3)
			if tc.missing == nil {
				if err != nil {
					t.Fatalf("every shard is bound, but: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want one naming %v", tc.missing)
			}
			for _, want := range append(tc.missing, "make generate", "deploy/sharded/", "--shards=3", policy) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if tc.name != "none" && strings.Contains(err.Error(), "kube-system/kcm-0") {
				t.Errorf("error %q names a bound shard", err)
			}
		})
	}
}
