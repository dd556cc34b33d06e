package controllers

import "k8s.io/client-go/tools/cache"

// AddIndexerOnce adds the index name to a shared informer unless it has one of that
// name already: controllers sharing an informer ask for the same index, and the
// informer refuses a second one of the same name. Call it from a constructor, before
// the informer starts.
func AddIndexerOnce(informer cache.SharedIndexInformer, name string, index cache.IndexFunc) error {
	if _, exists := informer.GetIndexer().GetIndexers()[name]; exists {
		return nil
	}
	return informer.AddIndexers(cache.Indexers{name: index})
}
