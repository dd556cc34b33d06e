package queueworker

import (
	"context"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
)

// SplitKey splits a work queue key into its namespace and name. A key that does not
// split was not made by cache.MetaNamespaceKeyFunc, as every handler's is, and no retry
// can make it valid: SplitKey reports it (naming kind, the queue's object) and returns
// false, and the sync drops the key by returning nil.
func SplitKey(ctx context.Context, kind, key string) (namespace, name string, ok bool) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Dropping an invalid key", "kind", kind, "key", key)
		return "", "", false
	}
	return namespace, name, true
}
