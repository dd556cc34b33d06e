package queueworker

import (
	"fmt"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
)

// DeletedObject unwraps a delete notification, which is either the object or, when the
// watch missed the delete, a tombstone (cache.DeletedFinalStateUnknown) holding its last
// known state. Anything else is reported through HandleError and yields false.
func DeletedObject[T any](obj any) (T, bool) {
	if t, ok := obj.(T); ok {
		return t, true
	}
	var zero T
	tombstone, ok := obj.(cache.DeletedFinalStateUnknown)
	if !ok {
		utilruntime.HandleError(fmt.Errorf("couldn't get object from tombstone %#v", obj))
		return zero, false
	}
	t, ok := tombstone.Obj.(T)
	if !ok {
		utilruntime.HandleError(fmt.Errorf("tombstone contained an object of unexpected type %T", tombstone.Obj))
		return zero, false
	}
	return t, true
}
