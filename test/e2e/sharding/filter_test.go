package sharding

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mini-kcm/mini-kcm/sharding"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

func TestTheApiserverWithTheGateIsDetectedAsFiltering(t *testing.T) {
	if !framework.New(t).ServerFiltersByShard() {
		t.Error("an apiserver with ShardedListAndWatch=true was detected as ignoring shardSelector")
	}
}

// Namespaces named like a multi-tenant cluster's, which FNV-1a crowds into a tiny arc:
// the apiserver's filtering by the selectors of a balanced plan returns, per shard,
// exactly the ConfigMaps of the namespaces Plan.Shard puts there, and every shard gets
// some.
func TestEachShardListsExactlyItsNamespaces(t *testing.T) {
	f := framework.New(t)
	ctx := f.Context()
	const tenants, shardCount = 12, 3
	weights := map[string]int64{}
	for i := range tenants {
		ns := fmt.Sprintf("%s-t%02d", f.Namespace, i)
		weights[ns] = 1
		if _, err := f.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}) })
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Labels: map[string]string{"suite": f.Namespace}}}
		if _, err := f.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	plan := sharding.Balanced(weights, shardCount)
	if equal := sharding.Imbalance(sharding.Equal(shardCount).Loads(weights)); equal < 2 {
		t.Logf("equal ranges would have been balanced enough here (imbalance %.2f)", equal)
	}
	for i := range shardCount {
		list, err := f.Client.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{
			LabelSelector: "suite=" + f.Namespace,
			ShardSelector: plan.Selector(i).String(),
		})
		if err != nil {
			t.Fatal(err)
		}
		var got, want []string
		for _, cm := range list.Items {
			got = append(got, cm.Namespace)
		}
		for ns := range weights {
			if plan.Shard(ns) == i {
				want = append(want, ns)
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("shard %d (%s): the apiserver lists %v, the plan says %v", i, plan.Selector(i), got, want)
		}
		if len(got) == 0 {
			t.Errorf("shard %d of a balanced plan over %d namespaces is empty", i, tenants)
		}
		t.Logf("shard %d %s: %d namespaces", i, plan.Selector(i), len(got))
	}
}
