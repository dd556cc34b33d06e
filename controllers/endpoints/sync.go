package endpoints

import (
	"context"
	"fmt"
	"maps"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/controllers/endpoints/subsets"
	"github.com/mini-kcm/mini-kcm/controllers/queueworker"
)

const (
	// LabelManagedBy marks the Endpoints this controller writes; its value is
	// ComponentName.
	LabelManagedBy = "endpoints.kubernetes.io/managed-by"

	// maxCapacity is the most addresses an Endpoints holds; the rest are dropped and the
	// Endpoints is annotated v1.EndpointsOverCapacity=truncated. EndpointSlices carry
	// the full list.
	maxCapacity = 1000
	// truncated is the value of the v1.EndpointsOverCapacity annotation.
	truncated = "truncated"
)

// syncService makes the Endpoints named by key match its Service and selected pods.
func (c *Controller) syncService(ctx context.Context, key string) error {
	logger := klog.FromContext(ctx)
	namespace, name, ok := queueworker.SplitKey(ctx, "Service", key)
	if !ok {
		return nil
	}
	start := time.Now()
	defer func() {
		logger.V(2).Info("Finished syncing service endpoints", "service", klog.KRef(namespace, name), "duration", time.Since(start))
	}()

	w, err := c.planWrite(logger, namespace, name, time.Time{})
	if err != nil || w == nil {
		return err
	}
	if c.limiter != nil {
		// Wait for the client's rate limit before building the write for good, not
		// after: pods that change while we wait are then in this write rather than in
		// the next (see package throttle).
		if ctx, err = c.limiter.Prepay(ctx); err != nil {
			return err
		}
		if w, err = c.planWrite(logger, namespace, name, w.triggerTime); err != nil || w == nil {
			return err
		}
	}
	if w.serviceGone {
		return c.deleteEndpoints(ctx, namespace, name)
	}
	return c.writeEndpoints(ctx, w)
}

// endpointsWrite is the write a sync decided on.
type endpointsWrite struct {
	// serviceGone says that the Service no longer exists and its Endpoints go too.
	serviceGone bool
	service     *v1.Service
	// current is the Endpoints in the cache, or an empty one (create) if there is none.
	current *v1.Endpoints
	create  bool
	// updated is what to write.
	updated *v1.Endpoints
	// triggerTime is the earliest change the write publishes.
	triggerTime     time.Time
	ready, notReady int
}

// planWrite reads the Service, its pods and its Endpoints from the caches and returns
// the write that brings the Endpoints in line, or nil if there is nothing to write, or
// nothing yet: the cache has not seen our last write (see cachedEndpoints). A plan made
// again after an earlier one passes that one's trigger time, since the write publishes
// the changes both saw.
func (c *Controller) planWrite(logger klog.Logger, namespace, name string, earlierTrigger time.Time) (*endpointsWrite, error) {
	key := namespace + "/" + name
	service, err := c.serviceLister.Services(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return &endpointsWrite{serviceGone: true}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("getting service %s: %w", key, err)
	}
	// ExternalName Services have no endpoints (kubernetes#105986). Services without
	// a selector get Endpoints written by someone else, which we leave alone. (The API
	// stores an empty selector as nil; only an empty selector from elsewhere, a test
	// say, reaches the list below and selects every pod of the namespace.)
	if service.Spec.Type == v1.ServiceTypeExternalName || service.Spec.Selector == nil {
		return nil, nil
	}

	// The Endpoints are read before the pods, so that the trigger time below is
	// observed by the sync that writes, not by one that waits for the cache.
	current, err := c.cachedEndpoints(namespace, name)
	if err != nil {
		return nil, err
	}
	if current == nil {
		logger.V(4).Info("Waiting for the Endpoints cache to see our last update", "service", klog.KObj(service))
		return nil, nil
	}

	pods, err := podsSelectedBy(c.podIndexer, namespace, service.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("listing pods of service %s: %w", key, err)
	}
	// Observed before deciding whether to write, so that a no-op sync still moves the
	// tracker on and a later write does not report a change that was already published.
	triggerTime := c.triggerTimes.ComputeEndpointLastChangeTriggerTime(service.Namespace, service, pods)
	if triggerTime.IsZero() || !earlierTrigger.IsZero() && earlierTrigger.Before(triggerTime) {
		triggerTime = earlierTrigger
	}
	desired, ready, notReady := subsetsFor(logger, service, pods)
	create := current.ResourceVersion == ""

	if !create && upToDate(current, desired, service) {
		logger.V(4).Info("Endpoints are up to date", "service", klog.KObj(service))
		return nil, nil
	}
	return &endpointsWrite{
		service:     service,
		current:     current,
		create:      create,
		updated:     desiredEndpoints(current, desired, service, triggerTime),
		triggerTime: triggerTime,
		ready:       ready,
		notReady:    notReady,
	}, nil
}

// cachedEndpoints returns a Service's Endpoints from the cache, or an empty one if there
// is none. It returns nil if the cache still holds a version this controller has
// replaced: the sync then ends without a write, and onEndpointsUpdate queues the Service
// again as soon as the cache has caught up (see staleEndpointsTracker).
func (c *Controller) cachedEndpoints(namespace, name string) (*v1.Endpoints, error) {
	for {
		current, err := c.endpointsLister.Endpoints(namespace).Get(name)
		if apierrors.IsNotFound(err) {
			return &v1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("getting endpoints %s/%s: %w", namespace, name, err)
		}
		switch c.staleEndpoints.check(current) {
		case cacheCurrent:
			return current, nil
		case cacheBehind:
			return nil, nil
		}
		// cachePassed: the cache caught up between the read and the check, and now
		// holds a newer version; read that.
	}
}

// writeEndpoints creates or updates the Endpoints as planned, and reports a failure
// as a Warning event on them.
func (c *Controller) writeEndpoints(ctx context.Context, w *endpointsWrite) error {
	logger := klog.FromContext(ctx)
	namespace, name := w.current.Namespace, w.current.Name
	logger.V(4).Info("Writing endpoints", "service", klog.KObj(w.service), "create", w.create, "ready", w.ready, "notReady", w.notReady)
	var err error
	if w.create {
		_, err = c.client.CoreV1().Endpoints(namespace).Create(ctx, w.updated, metav1.CreateOptions{})
	} else {
		var written *v1.Endpoints
		written, err = c.client.CoreV1().Endpoints(namespace).Update(ctx, w.updated, metav1.UpdateOptions{})
		// Remember the version we replaced, so that the next sync waits for the cache
		// to catch up rather than diffing against it. An update that changed nothing
		// (an admission webhook reverted it, say) keeps its version and is not stale.
		if err == nil && written.ResourceVersion != w.current.ResourceVersion {
			c.staleEndpoints.markStale(w.current)
		}
	}
	if err == nil {
		return nil
	}

	if w.create && apierrors.IsForbidden(err) {
		// Forbidden is mostly a terminating namespace, where creates keep failing until
		// it is gone, so the key is dropped; otherwise RBAC is broken and the user needs
		// to see it.
		logger.V(5).Info("Forbidden from creating endpoints", "service", klog.KObj(w.service), "err", err)
		if apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause) {
			return nil
		}
	}
	if w.create {
		c.recorder.Eventf(w.updated, v1.EventTypeWarning, "FailedToCreateEndpoint", "Failed to create endpoint for service %s/%s: %v", namespace, name, err)
		return fmt.Errorf("creating endpoints %s/%s: %w", namespace, name, err)
	}
	c.recorder.Eventf(w.updated, v1.EventTypeWarning, "FailedToUpdateEndpoint", "Failed to update endpoint %s/%s: %v", namespace, name, err)
	return fmt.Errorf("updating endpoints %s/%s: %w", namespace, name, err)
}

// deleteEndpoints deletes the Endpoints of a Service that no longer exists, whoever made
// them. If the controller was down when the Service was deleted, only the startup scan of
// leftover Endpoints catches it (kubernetes#6877).
func (c *Controller) deleteEndpoints(ctx context.Context, namespace, name string) error {
	err := c.client.CoreV1().Endpoints(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting endpoints %s/%s of deleted service: %w", namespace, name, err)
	}
	c.triggerTimes.DeleteService(namespace, name)
	c.staleEndpoints.forget(namespace, name)
	return nil
}

// upToDate reports whether current needs no write: its subsets equal desired (ignoring pod
// resourceVersions, and also after repacking them, in case another writer, or an older
// version, ordered them differently; kubernetes#129652), its labels are the ones we would
// set, and it is neither over capacity nor wrongly annotated as such. The trigger-time
// annotation alone never causes a write.
func upToDate(current *v1.Endpoints, desired []v1.EndpointSubset, service *v1.Service) bool {
	if !subsets.EqualIgnoringResourceVersion(current.Subsets, desired) &&
		!subsets.EqualIgnoringResourceVersion(subsets.Repack(current.Subsets), desired) {
		return false
	}
	return labelsUpToDate(current.Labels, service.Labels) && capacityAnnotationUpToDate(current)
}

// labelsUpToDate reports whether an Endpoints' labels are the Service's labels plus
// managed-by. The headless label is not compared, as upstream does not.
func labelsUpToDate(endpointsLabels, serviceLabels map[string]string) bool {
	if endpointsLabels[LabelManagedBy] != ComponentName {
		return false
	}
	extra := 0
	for k, v := range endpointsLabels {
		if k == LabelManagedBy || k == v1.IsHeadlessService {
			extra++
			continue
		}
		if sv, ok := serviceLabels[k]; !ok || sv != v {
			return false
		}
	}
	return len(serviceLabels) == len(endpointsLabels)-extra
}

// capacityAnnotationUpToDate reports whether an Endpoints is within capacity and has no
// over-capacity annotation. One over capacity always needs a write, to truncate it.
func capacityAnnotationUpToDate(endpoints *v1.Endpoints) bool {
	ready, notReady := subsets.Count(endpoints.Subsets)
	if ready+notReady > maxCapacity {
		return false
	}
	_, annotated := endpoints.Annotations[v1.EndpointsOverCapacity]
	return !annotated
}

// desiredEndpoints returns a copy of current with desired subsets, truncated to capacity,
// and our labels and annotations. Annotations we do not own are kept; labels are
// replaced, because they are derived from the Service's.
func desiredEndpoints(current *v1.Endpoints, desired []v1.EndpointSubset, service *v1.Service, triggerTime time.Time) *v1.Endpoints {
	endpoints := current.DeepCopy()
	endpoints.Labels = endpointsLabels(service)
	if endpoints.Annotations == nil {
		endpoints.Annotations = map[string]string{}
	}
	if triggerTime.IsZero() {
		delete(endpoints.Annotations, v1.EndpointsLastChangeTriggerTime)
	} else {
		endpoints.Annotations[v1.EndpointsLastChangeTriggerTime] = triggerTime.UTC().Format(time.RFC3339Nano)
	}

	var overCapacity bool
	endpoints.Subsets, overCapacity = subsets.Truncate(desired, maxCapacity)
	if overCapacity {
		endpoints.Annotations[v1.EndpointsOverCapacity] = truncated
	} else {
		delete(endpoints.Annotations, v1.EndpointsOverCapacity)
	}
	return endpoints
}

// endpointsLabels returns the labels of a Service's Endpoints: the Service's own, the
// managed-by label, and the headless label if the Service has no cluster IP (kube-proxy
// ignores headless Services' endpoints by it).
func endpointsLabels(service *v1.Service) map[string]string {
	result := maps.Clone(service.Labels)
	if result == nil {
		result = map[string]string{}
	}
	if service.Spec.ClusterIP == v1.ClusterIPNone || service.Spec.ClusterIP == "" {
		result[v1.IsHeadlessService] = ""
	} else {
		delete(result, v1.IsHeadlessService)
	}
	result[LabelManagedBy] = ComponentName
	return result
}
