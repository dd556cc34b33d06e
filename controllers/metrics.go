package controllers

import (
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	syncDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace:      "mini_kcm",
		Subsystem:      "controller",
		Name:           "sync_duration_seconds",
		Help:           "Time one sync of one key took, by controller.",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 15),
		StabilityLevel: metrics.ALPHA,
	}, []string{"controller"})
	syncTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "mini_kcm",
		Subsystem:      "controller",
		Name:           "sync_total",
		Help:           "Syncs by controller and result (success or error).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"controller", "result"})
	registerMetrics sync.Once
)

// RecordSync records one sync of a controller: how long it took since start and whether
// it failed. The queue worker (controllers/queueworker) calls it once per processed key.
func RecordSync(controller string, start time.Time, err error) {
	registerMetrics.Do(func() {
		legacyregistry.MustRegister(syncDuration, syncTotal)
	})
	result := "success"
	if err != nil {
		result = "error"
	}
	syncDuration.WithLabelValues(controller).Observe(time.Since(start).Seconds())
	syncTotal.WithLabelValues(controller, result).Inc()
}
