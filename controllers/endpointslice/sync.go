package endpointslice

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	endpointslicemetrics "k8s.io/endpointslice/metrics"
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/controllers/queueworker"
)

// errStaleCache means the EndpointSlice cache has not yet seen a write of ours for the
// Service: acting on it could undo that write, so the sync is retried with backoff.
var errStaleCache = errors.New("EndpointSlice informer cache is out of date")

// isStaleCache reports an expected, transient error, logged quietly.
func isStaleCache(err error) bool { return errors.Is(err, errStaleCache) }

// syncService brings the slices of the Service named by key in line with it and its
// pods, and counts the result in endpoint_slice_controller_syncs as upstream does.
func (c *Controller) syncService(ctx context.Context, key string) error {
	err := c.reconcileService(ctx, key)
	result := "success"
	switch {
	case isStaleCache(err):
		result = "stale"
	case err != nil:
		result = "error"
	}
	endpointslicemetrics.EndpointSliceSyncs.WithLabelValues(result).Inc()
	return err
}

func (c *Controller) reconcileService(ctx context.Context, key string) error {
	logger := klog.FromContext(ctx)
	namespace, name, ok := queueworker.SplitKey(ctx, "Service", key)
	if !ok {
		return nil
	}
	start := time.Now()
	defer func() {
		logger.V(4).Info("Finished syncing service endpoint slices", "service", klog.KRef(namespace, name), "duration", time.Since(start))
	}()

	service, err := c.serviceLister.Services(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		c.triggerTimes.DeleteService(namespace, name)
		c.reconciler.DeleteService(namespace, name)
		c.sliceTracker.DeleteService(namespace, name)
		return c.deleteSlicesOfDeletedService(ctx, namespace, name)
	}
	if err != nil {
		return err
	}
	if service.Spec.Type == v1.ServiceTypeExternalName {
		// An ExternalName Service is a DNS alias and gets no endpoints (kubernetes#105986).
		return nil
	}
	if service.Spec.Selector == nil {
		// Slices of a Service without a selector are written by whoever manages its
		// endpoints, through the API.
		return nil
	}

	pods, err := c.podLister.Pods(namespace).List(labels.Set(service.Spec.Selector).AsSelectorPreValidated())
	if err != nil {
		// Listing a cache cannot fail in practice; upstream reports it all the same.
		c.recorder.Eventf(service, v1.EventTypeWarning, "FailedToListPods",
			"Error listing Pods for Service %s/%s: %v", namespace, name, err)
		return err
	}
	slices, err := c.slicesOf(namespace, name)
	if err != nil {
		c.recorder.Eventf(service, v1.EventTypeWarning, "FailedToListEndpointSlices",
			"Error listing Endpoint Slices for Service %s/%s: %v", namespace, name, err)
		return err
	}
	// A slice being deleted is as good as gone; counting it would wedge the sync on it.
	slices = withoutDeleting(slices)
	if c.sliceTracker.StaleSlices(service, slices) {
		return fmt.Errorf("syncing service %s: %w", key, errStaleCache)
	}

	// Computed before the reconciler runs, so the tracker's state moves on even when the
	// sync turns out to write nothing.
	triggerTime := c.triggerTimes.ComputeEndpointLastChangeTriggerTime(namespace, service, pods)
	if err := c.reconciler.Reconcile(logger, service, pods, slices, triggerTime); err != nil {
		c.recorder.Eventf(service, v1.EventTypeWarning, "FailedToUpdateEndpointSlices",
			"Error updating Endpoint Slices for Service %s/%s: %v", namespace, name, err)
		return fmt.Errorf("reconciling the endpoint slices of service %s: %w", key, err)
	}
	return nil
}

// slicesOf returns the cached slices this controller manages for a Service.
func (c *Controller) slicesOf(namespace, name string) ([]*discovery.EndpointSlice, error) {
	selector := labels.Set{
		discovery.LabelServiceName: name,
		discovery.LabelManagedBy:   ManagedBy,
	}.AsSelectorPreValidated()
	return c.sliceLister.EndpointSlices(namespace).List(selector)
}

// withoutDeleting returns the slices that are not being deleted, in a new slice: the
// lister's result is shared with the cache.
func withoutDeleting(slices []*discovery.EndpointSlice) []*discovery.EndpointSlice {
	kept := make([]*discovery.EndpointSlice, 0, len(slices))
	for _, slice := range slices {
		if slice.DeletionTimestamp == nil {
			kept = append(kept, slice)
		}
	}
	return kept
}

// deleteSlicesOfDeletedService deletes the slices of ours that a deleted Service owned.
// Upstream leaves this to the garbage collector, which deletes an object once every
// owner in its ownerReferences is gone; mini-kcm runs no garbage collector, so its sync
// does the same for the slices it manages, and a cluster that runs both sees the second
// delete answered NotFound. Each delete is conditional on the slice's UID, so that a
// slice recreated meanwhile under the same name is left to its own Service's sync.
func (c *Controller) deleteSlicesOfDeletedService(ctx context.Context, namespace, name string) error {
	slices, err := c.slicesOf(namespace, name)
	if err != nil {
		return err
	}
	var errs []error
	for _, slice := range slices {
		if slice.DeletionTimestamp != nil || !ownedByServiceNamed(slice, name) {
			continue
		}
		uid := slice.UID
		err := c.client.DiscoveryV1().EndpointSlices(namespace).Delete(ctx, slice.Name,
			metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		switch {
		case err == nil:
			klog.FromContext(ctx).V(2).Info("Deleted the EndpointSlice of a deleted Service", "endpointslice", klog.KObj(slice), "service", name)
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			// Gone already, or replaced by a slice that is not this one.
		default:
			errs = append(errs, fmt.Errorf("deleting EndpointSlice %s/%s of deleted service %s: %w", namespace, slice.Name, name, err))
		}
	}
	return errors.Join(errs...)
}

// ownedByServiceNamed reports whether a Service of this name is the slice's controlling
// owner: the reconciler sets that reference on every slice it creates.
func ownedByServiceNamed(slice *discovery.EndpointSlice, name string) bool {
	owner := metav1.GetControllerOfNoCopy(slice)
	return owner != nil && owner.APIVersion == "v1" && owner.Kind == "Service" && owner.Name == name
}

// syncTopology recomputes the nodes' zone distribution and syncs the Services whose
// topology hints it made out of date.
func (c *Controller) syncTopology(ctx context.Context, _ string) error {
	logger := klog.FromContext(ctx)
	nodes, err := c.nodeLister.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	c.topologyCache.SetNodes(logger, nodes)
	for _, key := range c.topologyCache.GetOverloadedServices() {
		logger.V(2).Info("Queuing Service after a node change overloaded a zone", "key", key)
		c.queue.Add(key)
	}
	return nil
}
