package endpoints

import (
	"fmt"
	"maps"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"

	"github.com/mini-kcm/mini-kcm/controllers/podstate"
)

// podProjection is what the pod worker needs to know about a pod event to find the
// Services whose Endpoints it may change. Matching a pod against every Service of its
// namespace is the expensive part of handling a pod event, so handlers only record this
// and the pod workers do the matching off the informer's goroutine.
type podProjection struct {
	namespace string
	// labels are the pod's current labels (its last labels for a delete).
	labels labels.Set
	// oldLabels are set only on an update that changed the labels (or the hostname or
	// subdomain, which count as a label change).
	oldLabels labels.Set
	// podChanged tells, when oldLabels is set, whether the pod also changed in a way
	// that changes its addresses; then every Service matching the old or the new labels
	// is synced, otherwise only those matching exactly one of them.
	podChanged bool
}

// projectPodEvent returns the projection of a pod add (oldObj nil), update or delete
// (newObj nil), or nil if the event cannot change any Endpoints: an informer resync
// (same resourceVersion), or an update touching nothing the Endpoints are built from.
func projectPodEvent(oldObj, newObj any) (*podProjection, error) {
	oldPod, err := podFrom(oldObj)
	if err != nil {
		return nil, err
	}
	newPod, err := podFrom(newObj)
	if err != nil {
		return nil, err
	}
	switch {
	case oldPod == nil && newPod == nil:
		return nil, fmt.Errorf("pod event without a pod")
	case oldPod == nil:
		return &podProjection{namespace: newPod.Namespace, labels: newPod.Labels}, nil
	case newPod == nil:
		return &podProjection{namespace: oldPod.Namespace, labels: oldPod.Labels}, nil
	}

	// Resyncs need no work here: the Service informer resyncs every Service anyway.
	if newPod.ResourceVersion == oldPod.ResourceVersion {
		return nil, nil
	}
	podChanged, labelsChanged := podEndpointsChanged(oldPod, newPod)
	switch {
	case !podChanged && !labelsChanged:
		return nil, nil
	case !labelsChanged:
		return &podProjection{namespace: newPod.Namespace, labels: newPod.Labels}, nil
	}
	return &podProjection{
		namespace:  newPod.Namespace,
		labels:     newPod.Labels,
		oldLabels:  labels.Set(oldPod.Labels),
		podChanged: podChanged,
	}, nil
}

// podEndpointsChanged reports whether an update changed what the pod contributes to
// Endpoints (podChanged), and whether it changed which Services may select it
// (labelsChanged). A hostname or subdomain change counts as a label change, as upstream
// has it; both fields are immutable, so in practice only labels change.
func podEndpointsChanged(oldPod, newPod *v1.Pod) (podChanged, labelsChanged bool) {
	labelsChanged = !maps.Equal(oldPod.Labels, newPod.Labels) ||
		oldPod.Spec.Hostname != newPod.Spec.Hostname ||
		oldPod.Spec.Subdomain != newPod.Spec.Subdomain

	// Upstream compares the deletionTimestamp pointers, so every update of a terminating
	// pod counts as a change; we keep that rather than miss one.
	if oldPod.DeletionTimestamp != nil || newPod.DeletionTimestamp != nil {
		return true, labelsChanged
	}
	if podstate.IsReady(oldPod) != podstate.IsReady(newPod) {
		return true, labelsChanged
	}
	if len(oldPod.Status.PodIPs) != len(newPod.Status.PodIPs) {
		return true, labelsChanged
	}
	for i := range oldPod.Status.PodIPs {
		if oldPod.Status.PodIPs[i].IP != newPod.Status.PodIPs[i].IP {
			return true, labelsChanged
		}
	}
	// Name, namespace and UID are immutable, and nodeName is set once, before the pod
	// has an IP and so before it can be in any Endpoints.
	return false, labelsChanged
}

// podFrom returns the pod in an informer event object, unwrapping a tombstone.
func podFrom(obj any) (*v1.Pod, error) {
	switch o := obj.(type) {
	case nil:
		return nil, nil
	case *v1.Pod:
		return o, nil
	case cache.DeletedFinalStateUnknown:
		if pod, ok := o.Obj.(*v1.Pod); ok {
			return pod, nil
		}
		return nil, fmt.Errorf("tombstone %s holds a %T, not a pod", o.Key, o.Obj)
	}
	return nil, fmt.Errorf("pod event holds a %T, not a pod", obj)
}

// servicesToSync returns the keys of the Services whose Endpoints a pod event may change.
// services is the Service informer's indexer, with serviceSelectorIndex.
func servicesToSync(services cache.Indexer, p *podProjection) (sets.Set[string], error) {
	selecting, err := servicesSelecting(services, p.namespace, p.labels)
	if err != nil {
		return nil, err
	}
	if p.oldLabels == nil {
		return selecting, nil
	}
	oldSelecting, err := servicesSelecting(services, p.namespace, p.oldLabels)
	if err != nil {
		return nil, err
	}
	return affectedServices(oldSelecting, selecting, p.podChanged), nil
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

// String describes the projection in logs.
func (p *podProjection) String() string {
	if p.oldLabels == nil {
		return fmt.Sprintf("pod in %s with labels {%s}", p.namespace, p.labels)
	}
	return fmt.Sprintf("pod in %s relabelled from {%s} to {%s}, changed=%v", p.namespace, p.oldLabels, p.labels, p.podChanged)
}
