package endpoints

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	endpointsliceutil "k8s.io/endpointslice/util"
)

// A pod event is reduced to k8s.io/endpointslice's PodProjectionKey by its
// GetPodUpdateProjectionKey, as upstream's Endpoints and EndpointSlice controllers do:
// the namespace and labels of the pod (and its old labels when an update changed them),
// or nil for an event that cannot change any Endpoints. Matching a pod against the
// Services of its namespace is the expensive part of handling a pod event, so handlers
// only record the projection and the pod workers do the matching off the informer's
// goroutine, with serviceSelectorIndex instead of the library's GetServicesToUpdate,
// which lists and matches every Service of the namespace.

// servicesToSync returns the keys of the Services whose Endpoints a pod event may change.
// services is the Service informer's indexer, with serviceSelectorIndex.
func servicesToSync(services cache.Indexer, p *endpointsliceutil.PodProjectionKey) (sets.Set[string], error) {
	selecting, err := servicesSelecting(services, p.Namespace, p.Labels)
	if err != nil {
		return nil, err
	}
	if p.OldLabels == nil {
		return selecting, nil
	}
	oldSelecting, err := servicesSelecting(services, p.Namespace, p.OldLabels)
	if err != nil {
		return nil, err
	}
	return affectedServices(oldSelecting, selecting, p.PodChanged), nil
}

// affectedServices returns, for a pod whose labels changed, the Services to sync: those
// that selected it before or select it now if the pod itself changed too, and otherwise
// only those that gained or lost it.
func affectedServices(before, after sets.Set[string], podChanged bool) sets.Set[string] {
	if podChanged {
		return after.Union(before)
	}
	return after.SymmetricDifference(before)
}

// servicesSelecting returns the keys of the Services in namespace whose selector matches
// podLabels. A nil selector selects nothing (such Services have hand-made Endpoints). The
// candidates come from serviceSelectorIndex: the Services with an empty selector and
// those indexed under one of the pod's labels.
func servicesSelecting(services cache.Indexer, namespace string, podLabels labels.Set) (sets.Set[string], error) {
	keys := sets.New[string]()
	addMatching := func(indexValue string) error {
		objs, err := services.ByIndex(serviceSelectorIndex, indexValue)
		if err != nil {
			return fmt.Errorf("looking up services in namespace %q: %w", namespace, err)
		}
		for _, obj := range objs {
			service, ok := obj.(*v1.Service)
			if ok && service.Spec.Selector != nil && labels.ValidatedSetSelector(service.Spec.Selector).Matches(podLabels) {
				keys.Insert(service.Namespace + "/" + service.Name)
			}
		}
		return nil
	}
	if err := addMatching(selectsEverythingIndexValue(namespace)); err != nil {
		return nil, err
	}
	for key, value := range podLabels {
		if err := addMatching(labelIndexValue(namespace, key, value)); err != nil {
			return nil, err
		}
	}
	return keys, nil
}
