package sharding

import (
	"slices"
	"testing"

	"github.com/mini-kcm/mini-kcm/controllers/all"
)

// TestEveryCachedNamespacedResourceIsFiltered keeps the shard filter in step with the
// registry: a controller that starts caching a namespaced resource the filter does not
// know would, behind an apiserver that ignores shardSelector, act outside its shard.
func TestEveryCachedNamespacedResourceIsFiltered(t *testing.T) {
	for _, d := range all.Descriptors() {
		for _, gr := range d.Caches {
			if !slices.Contains(filteredResources, gr) && !slices.Contains(clusterScoped, gr) {
				t.Errorf("%s caches %s, which the shard filter does not filter: add it to filteredClient and filteredResources in sharding/filter.go", d.Name, gr)
			}
		}
	}
}
