package endpoints

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// Indexes that spare the controller full scans of a namespace: a Service's pods are found
// by label, and a pod's Services by one pair of their selector.

// podLabelIndex indexes pods by each of their labels as "namespace/key=value". A sync
// reads the pods of its Service through it instead of matching the selector against
// every pod of the namespace: with 4000 pods and 200 Services in one namespace that
// scan was two thirds of the controller's CPU while readiness changed.
const podLabelIndex = "endpoints-pod-label"

// podLabelIndexValues is the index function of podLabelIndex.
func podLabelIndexValues(obj any) ([]string, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return nil, nil
	}
	values := make([]string, 0, len(pod.Labels))
	for key, value := range pod.Labels {
		values = append(values, labelIndexValue(pod.Namespace, key, value))
	}
	return values, nil
}

// labelIndexValue encodes one label of a pod in namespace. It is unambiguous: namespaces
// hold no "/" and label keys no "=".
func labelIndexValue(namespace, key, value string) string {
	return namespace + "/" + key + "=" + value
}

// podsSelectedBy returns the pods of namespace whose labels include every pair of
// selector, an empty selector selecting them all. The candidates are the pods carrying
// the selector's rarest pair, which the whole selector then filters. The pods come from
// the cache and must not be modified.
func podsSelectedBy(indexer cache.Indexer, namespace string, selector map[string]string) ([]*v1.Pod, error) {
	var candidates []any
	if len(selector) == 0 {
		var err error
		if candidates, err = indexer.ByIndex(cache.NamespaceIndex, namespace); err != nil {
			return nil, err
		}
	}
	first := true
	for key, value := range selector {
		objs, err := indexer.ByIndex(podLabelIndex, labelIndexValue(namespace, key, value))
		if err != nil {
			return nil, err
		}
		if first || len(objs) < len(candidates) {
			candidates, first = objs, false
		}
		if len(candidates) == 0 {
			break
		}
	}
	matches := labels.ValidatedSetSelector(selector)
	pods := make([]*v1.Pod, 0, len(candidates))
	for _, obj := range candidates {
		if pod, ok := obj.(*v1.Pod); ok && matches.Matches(labels.Set(pod.Labels)) {
			pods = append(pods, pod)
		}
	}
	return pods, nil
}

// serviceSelectorIndex indexes each Service with a selector under one pair of it, as
// "namespace/key=value" (the smallest key: a pod the Service selects has every pair, so
// one is enough to find it), and each Service with an empty selector, which selects
// every pod, as "namespace/". A pod event then matches only the Services indexed under
// one of its labels, not every Service of the namespace.
const serviceSelectorIndex = "endpoints-service-selector"

// serviceSelectorIndexValues is the index function of serviceSelectorIndex. Services
// without a selector select nothing and are not indexed.
func serviceSelectorIndexValues(obj any) ([]string, error) {
	service, ok := obj.(*v1.Service)
	if !ok || service.Spec.Selector == nil {
		return nil, nil
	}
	if len(service.Spec.Selector) == 0 {
		return []string{selectsEverythingIndexValue(service.Namespace)}, nil
	}
	key := minKey(service.Spec.Selector)
	return []string{labelIndexValue(service.Namespace, key, service.Spec.Selector[key])}, nil
}

// selectsEverythingIndexValue is the serviceSelectorIndex value of the Services of
// namespace with an empty selector. It cannot collide with a label's value, which
// always holds "=".
func selectsEverythingIndexValue(namespace string) string { return namespace + "/" }

// minKey returns the smallest key of a non-empty map.
func minKey(m map[string]string) string {
	first := true
	var smallest string
	for key := range m {
		if first || key < smallest {
			smallest, first = key, false
		}
	}
	return smallest
}
