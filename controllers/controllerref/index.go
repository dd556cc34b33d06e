package controllerref

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/mini-kcm/mini-kcm/controllers"
)

// PodControllerIndex is the name of the pod informer index that maps a controller to the
// pods it controls, so that a sync reads its pods without scanning the namespace.
const PodControllerIndex = "podController"

// PodControllerIndexKey returns the index key of pods in namespace controlled by ref:
// "<ns>/<Kind>/<name>/<uid>", or "<ns>" for orphans when ref is nil.
func PodControllerIndexKey(namespace string, ref *metav1.OwnerReference) string {
	if ref == nil {
		return namespace
	}
	return namespace + "/" + ref.Kind + "/" + ref.Name + "/" + string(ref.UID)
}

// AddPodControllerIndexer adds PodControllerIndex to a (shared) pod informer unless
// another controller already did. Call it from a constructor, before the informer starts.
func AddPodControllerIndexer(informer cache.SharedIndexInformer) error {
	return controllers.AddIndexerOnce(informer, PodControllerIndex, func(obj any) ([]string, error) {
		pod, ok := obj.(*v1.Pod)
		if !ok {
			return nil, nil
		}
		return []string{PodControllerIndexKey(pod.Namespace, metav1.GetControllerOfNoCopy(pod))}, nil
	})
}

// PodsControlledBy returns the cached pods controlled by owner (of kind ownerKind,
// e.g. "ReplicaSet"), plus the orphans in owner's namespace if includeOrphans is set.
// The pods come from the cache: callers must not modify them.
func PodsControlledBy(indexer cache.Indexer, owner metav1.Object, ownerKind string, includeOrphans bool) ([]*v1.Pod, error) {
	if owner.GetNamespace() == "" || owner.GetName() == "" || owner.GetUID() == "" || ownerKind == "" {
		return nil, fmt.Errorf("looking up pods of %s %s/%s (uid %q): owner namespace, name, uid and kind are required",
			ownerKind, owner.GetNamespace(), owner.GetName(), owner.GetUID())
	}
	keys := []string{PodControllerIndexKey(owner.GetNamespace(),
		&metav1.OwnerReference{Kind: ownerKind, Name: owner.GetName(), UID: owner.GetUID()})}
	if includeOrphans {
		keys = append(keys, PodControllerIndexKey(owner.GetNamespace(), nil))
	}
	var pods []*v1.Pod
	for _, key := range keys {
		objs, err := indexer.ByIndex(PodControllerIndex, key)
		if err != nil {
			return nil, fmt.Errorf("listing pods of %s %s/%s: %w", ownerKind, owner.GetNamespace(), owner.GetName(), err)
		}
		for _, obj := range objs {
			if pod, ok := obj.(*v1.Pod); ok {
				pods = append(pods, pod)
			}
		}
	}
	return pods, nil
}
