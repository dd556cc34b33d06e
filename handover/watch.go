package handover

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/metadata"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

const (
	// UpstreamManager is the field manager of kube-controller-manager's writes: the
	// apiserver names a manager after its client's user agent up to the first "/", and
	// every kube-controller-manager client's user agent starts "kube-controller-manager/"
	// (with or without --use-service-account-credentials).
	UpstreamManager = "kube-controller-manager"
	// WatchInterval is the time between two pages of each watched resource.
	WatchInterval = 10 * time.Second
	// watchPageSize bounds a page: a sweep lists one page of each resource per
	// interval, continuing where the last one ended, so that every object is seen once
	// per sweep at a cost of five small metadata LISTs per interval.
	watchPageSize = 500
	// activeFor is how long a controller counts as still run by kube-controller-manager
	// after its last write was seen: a fight writes often, and a hand-over completed
	// since clears the metric after this.
	activeFor = 10 * time.Minute
	// endpointSliceManagedBy is the label value of slices the EndpointSlice controller
	// manages (the mirroring controller writes slices too, with its own value).
	endpointSliceManagedBy = "endpointslice-controller.k8s.io"
)

var (
	upstreamActive = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "mini_kcm",
		Name:      "upstream_controller_active",
		Help: "1 while the leader sees kube-controller-manager still run one of its controllers: it wrote, since this leader " +
			"started and within the last 10 minutes, objects that controller owns (the fight mini-kcm handover check warns of); " +
			"0 otherwise. Only the leader reports; see docs/handover.md.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"controller"})
	watchPages = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "mini_kcm",
		Name:           "upstream_watch_pages_total",
		Help:           "Pages of objects the leader listed looking for kube-controller-manager's writes, by resource and result (ok, error).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource", "result"})
	registerOnce sync.Once
)

// watchedResource is a resource our controllers write, with the rule that tells which
// of upstream's controllers wrote an entry of its managedFields.
type watchedResource struct {
	gvr  schema.GroupVersionResource
	kind string
	// writer names the controller behind kube-controller-manager's managedFields entry
	// e of obj, or "" for a controller not ours.
	writer func(obj *metav1.PartialObjectMetadata, e metav1.ManagedFieldsEntry) string
}

// watchedResources are the objects of our four controllers. Upstream's ReplicaSet
// controller writes ReplicaSet status and creates (and adopts) the pods of ReplicaSets;
// the Deployment controller writes ReplicaSets (create, scale, annotations) and
// Deployment status; the Endpoints and EndpointSlice controllers write their objects.
//
// Pods are watched because a status write is a weak trace: the controller that writes
// the status next takes over the fields it changed, and an entry left with no field
// leaves managedFields, so a page may find none of upstream's status writes after a
// fight. The pods upstream created keep its entry for as long as they exist. Other
// kube-controller-manager controllers write pods too (the node lifecycle, disruption
// and pod GC controllers), but through the status subresource; the garbage collector
// removes owner references, after which the pod no longer names its ReplicaSet.
var watchedResources = []watchedResource{
	{gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}, kind: "ReplicaSet",
		writer: func(_ *metav1.PartialObjectMetadata, e metav1.ManagedFieldsEntry) string {
			if e.Subresource == "status" {
				return "replicaset-controller"
			}
			return "deployment-controller"
		}},
	{gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, kind: "Deployment",
		writer: func(*metav1.PartialObjectMetadata, metav1.ManagedFieldsEntry) string { return "deployment-controller" }},
	{gvr: schema.GroupVersionResource{Version: "v1", Resource: "endpoints"}, kind: "Endpoints",
		writer: func(*metav1.PartialObjectMetadata, metav1.ManagedFieldsEntry) string { return "endpoints-controller" }},
	{gvr: schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}, kind: "EndpointSlice",
		writer: func(obj *metav1.PartialObjectMetadata, _ metav1.ManagedFieldsEntry) string {
			if obj.Labels["endpointslice.kubernetes.io/managed-by"] == endpointSliceManagedBy {
				return "endpointslice-controller"
			}
			return ""
		}},
	{gvr: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, kind: "Pod",
		writer: func(obj *metav1.PartialObjectMetadata, e metav1.ManagedFieldsEntry) string {
			owner := metav1.GetControllerOfNoCopy(obj)
			if e.Subresource == "" && e.Operation == metav1.ManagedFieldsOperationUpdate && owner != nil &&
				owner.Kind == "ReplicaSet" && strings.HasPrefix(owner.APIVersion, "apps/") {
				return "replicaset-controller"
			}
			return ""
		}},
}

// Sighting is the latest write of kube-controller-manager seen for one controller.
type Sighting struct {
	// Object is "Kind namespace/name", with "status" for a status write.
	Object string
	// Written is the time of kube-controller-manager's managedFields entry (seconds).
	Written time.Time
}

// upstreamWrites returns, for each controller of ours (in controllers), the newest write
// of kube-controller-manager to obj after since, as recorded in obj's managedFields.
func upstreamWrites(r watchedResource, obj *metav1.PartialObjectMetadata, controllers []string, since time.Time) map[string]Sighting {
	var out map[string]Sighting
	for _, e := range obj.ManagedFields {
		if e.Manager != UpstreamManager || e.Time == nil || !e.Time.After(since) {
			continue
		}
		c := r.writer(obj, e)
		if c == "" || !slices.Contains(controllers, c) {
			continue
		}
		object := fmt.Sprintf("%s %s", r.kind, klog.KObj(obj))
		if e.Subresource != "" {
			object += " " + e.Subresource
		}
		if prev, ok := out[c]; !ok || e.Time.After(prev.Written) {
			if out == nil {
				out = map[string]Sighting{}
			}
			out[c] = Sighting{Object: object, Written: e.Time.Time}
		}
	}
	return out
}

// Watch notices kube-controller-manager running one of our controllers while this
// replica leads: it pages through the objects our controllers write, metadata only, and
// reads in their managedFields whether kube-controller-manager wrote them since the
// leader started. It logs each new sighting as an error, sets
// mini_kcm_upstream_controller_active and says so on /statusz/replica.
//
// It sees a fight only once kube-controller-manager writes: two controllers that agree
// on a settled object write nothing, and a fight starts with the next change, which both
// act on. It cannot tell a controller that runs but has nothing to do.
type Watch struct {
	client      metadata.Interface
	controllers []string

	mu        sync.Mutex
	since     time.Time // zero while not leading
	seen      map[string]Sighting
	lastSweep time.Time
	now       func() time.Time
}

// NewWatch returns a Watch of the given controllers (canonical names) through client.
func NewWatch(client metadata.Interface, controllers []string) *Watch {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(upstreamActive)
		legacyregistry.MustRegister(watchPages)
	})
	return &Watch{client: client, controllers: slices.Clone(controllers), now: time.Now}
}

// Run watches until ctx ends, as the leader of a term that started now; it resets the
// metric and the status when it returns.
func (w *Watch) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("upstream-watch")
	w.mu.Lock()
	w.since, w.seen, w.lastSweep = w.now(), map[string]Sighting{}, time.Time{}
	w.mu.Unlock()
	for _, c := range w.controllers {
		upstreamActive.WithLabelValues(c).Set(0)
	}
	defer func() {
		w.mu.Lock()
		w.since = time.Time{}
		w.mu.Unlock()
		for _, c := range w.controllers {
			upstreamActive.WithLabelValues(c).Set(0)
		}
	}()
	continues := make([]string, len(watchedResources))
	ticker := time.NewTicker(WatchInterval)
	defer ticker.Stop()
	for {
		for i, r := range watchedResources {
			continues[i] = w.page(ctx, logger, r, continues[i])
		}
		w.updateMetric()
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// page lists one page of r from cont and returns where the next page starts ("" for
// the first).
func (w *Watch) page(ctx context.Context, logger klog.Logger, r watchedResource, cont string) string {
	list, err := w.client.Resource(r.gvr).List(ctx, metav1.ListOptions{Limit: watchPageSize, Continue: cont})
	if err != nil {
		if ctx.Err() == nil {
			watchPages.WithLabelValues(r.gvr.Resource, "error").Inc()
			// An expired continue token (410) starts the sweep over; anything else is
			// retried with the next interval.
			if !apierrors.IsResourceExpired(err) {
				logger.V(2).Info("Cannot list to look for kube-controller-manager's writes", "resource", r.gvr.Resource, "err", err)
			}
		}
		if apierrors.IsResourceExpired(err) {
			return ""
		}
		return cont
	}
	watchPages.WithLabelValues(r.gvr.Resource, "ok").Inc()
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range list.Items {
		for c, s := range upstreamWrites(r, &list.Items[i], w.controllers, w.since) {
			prev, known := w.seen[c]
			if known && !s.Written.After(prev.Written) {
				continue
			}
			w.seen[c] = s
			logger.Error(nil, "kube-controller-manager still runs one of mini-kcm's controllers: both act on the same objects "+
				"and undo each other's work. Turn it off in kube-controller-manager's --controllers (mini-kcm handover check "+
				"says how)", "controller", c, "object", s.Object, "written", s.Written.UTC().Format(time.RFC3339))
		}
	}
	w.lastSweep = w.now()
	return list.Continue
}

// updateMetric sets the gauge from the sightings.
func (w *Watch) updateMetric() {
	active := w.Active()
	for _, c := range w.controllers {
		v := 0.0
		if _, ok := active[c]; ok {
			v = 1
		}
		upstreamActive.WithLabelValues(c).Set(v)
	}
}

// Active returns the controllers kube-controller-manager wrote for within activeFor,
// with the latest sighting of each.
func (w *Watch) Active() map[string]Sighting {
	w.mu.Lock()
	defer w.mu.Unlock()
	active := map[string]Sighting{}
	for c, s := range w.seen {
		if w.now().Sub(s.Written) < activeFor {
			active[c] = s
		}
	}
	return active
}

// Status is the watch's line of /statusz/replica.
func (w *Watch) Status() string {
	w.mu.Lock()
	leading, lastSweep, now := !w.since.IsZero(), w.lastSweep, w.now()
	w.mu.Unlock()
	if !leading {
		return "not watched (only the leader, or sharded the coordinator, looks for kube-controller-manager's writes)"
	}
	active := w.Active()
	if len(active) == 0 {
		return fmt.Sprintf("none seen: no write of kube-controller-manager to %s's objects since this leader started (last page %s)",
			strings.Join(w.controllers, ", "), ago(now, lastSweep))
	}
	names := make([]string, 0, len(active))
	for c := range active {
		names = append(names, c)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, c := range names {
		s := active[c]
		parts = append(parts, fmt.Sprintf("%s ACTIVE (kube-controller-manager wrote %s %s)", c, s.Object, ago(now, s.Written)))
	}
	return "FIGHT: " + strings.Join(parts, "; ") + "; turn them off in kube-controller-manager (mini-kcm handover check)"
}

func ago(now, t time.Time) string {
	if t.IsZero() {
		return "not yet"
	}
	return duration.HumanDuration(now.Sub(t)) + " ago"
}
