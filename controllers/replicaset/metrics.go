package replicaset

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// The controller's own metrics, named as upstream's so existing dashboards work.
var (
	sortingDeletionAgeRatio = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem: "replicaset_controller",
		Name:      "sorting_deletion_age_ratio",
		Help: "The ratio of chosen deleted pod's ages to the current youngest pod's age (at the time). Should be <2. " +
			"The intent of this metric is to measure the rough efficacy of the sorting (and deletion) of pods when " +
			"a replicaset scales down. This only considers Ready pods when calculating and reporting.",
		Buckets:        metrics.ExponentialBuckets(0.25, 2, 6),
		StabilityLevel: metrics.ALPHA,
	})
	staleSyncSkips = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "replicaset_controller",
		Name:           "stale_sync_skips_total",
		Help:           "Total number of ReplicaSet syncs skipped due to a stale watch cache.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"group", "resource"})

	registerOnce sync.Once
)

// registerMetrics registers the metrics once per process, however many controllers
// (tests build many) are constructed.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(sortingDeletionAgeRatio, staleSyncSkips)
	})
}
