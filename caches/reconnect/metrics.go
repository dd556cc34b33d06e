package reconnect

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	informerConnected = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "mini_kcm",
		Subsystem: "informer",
		Name:      "connected",
		Help: "1 while the informer's watch of the resource is open, 0 between two watches: a leader whose informer says 0 " +
			"does not see that resource change.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"informers", "resource"})
	informerReceived = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "mini_kcm",
		Subsystem: "informer",
		Name:      "last_received_timestamp_seconds",
		Help: "When the informer last received anything of the resource (a list, a watch event or bookmark, which a quiet " +
			"watch gets about once a minute), in seconds since the epoch; refreshed at most once a second.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"informers", "resource"})
	reachable = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "mini_kcm",
		Subsystem: "informers",
		Name:      "apiserver_reachable",
		Help: "0 while the informers' requests wait for an apiserver found unreachable (their gate is closed), 1 once it " +
			"answered again.",
		StabilityLevel: metrics.ALPHA,
	})
	outages = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "mini_kcm",
		Subsystem: "informers",
		Name:      "apiserver_outages_total",
		Help: "Outages of the apiserver the informers waited out, by whether it came back as the same process (apiserver=same) " +
			"or a new one (apiserver=replaced: it refused connections meanwhile), whose watch cache makes informers relist.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"apiserver"})
	requestsHeld = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "mini_kcm",
		Subsystem:      "informers",
		Name:           "requests_held_total",
		Help:           "Informer requests that waited for the apiserver to answer again instead of failing.",
		StabilityLevel: metrics.ALPHA,
	})
	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(informerConnected, informerReceived, reachable, outages, requestsHeld)
	})
}
