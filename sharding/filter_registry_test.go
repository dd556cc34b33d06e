package sharding

import (
	"bytes"
	"os"
	"slices"
	"testing"

	"github.com/mini-kcm/mini-kcm/controllers/all"
	"github.com/mini-kcm/mini-kcm/hack/rbacgen"
)

// TestEveryCachedNamespacedResourceIsFiltered keeps the shard filter in step with the
// registry: a controller that starts caching a namespaced resource the filter does not
// know would, behind an apiserver that ignores shardSelector, act outside its shard.
func TestEveryCachedNamespacedResourceIsFiltered(t *testing.T) {
	for _, d := range all.Descriptors() {
		for _, gr := range d.Caches {
			if !slices.Contains(filteredResources, gr) && !slices.Contains(clusterScoped, gr) {
				t.Errorf("%s caches %s, which the shard filter does not filter: run make generate (a namespaced resource), "+
					"or route it to the cluster factory in sharding/informers.go and list it in clusterScoped (a cluster-scoped one)", d.Name, gr)
			}
		}
	}
}

// TestTheShardFilterIsGeneratedFromTheRegistry fails when zz_generated_filter.go is not
// what make generate writes from the registry: edited by hand, or not generated again
// after a controller's Caches changed.
func TestTheShardFilterIsGeneratedFromTheRegistry(t *testing.T) {
	want, err := rbacgen.ShardFilterSource(all.Registry())
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("zz_generated_filter.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("sharding/zz_generated_filter.go is not what the registry generates: run make generate and commit the result")
	}
}
