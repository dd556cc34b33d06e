package app

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// correlatorOptions spells out client-go's defaults, so that the event spam filter and
// aggregation mini-kcm runs with are visible here rather than implied.
var correlatorOptions = record.CorrelatorOptions{
	// Remember up to 4096 event series.
	LRUCacheSize: 4096,
	// Per source and object: a burst of 25 events, then one every 5 minutes.
	BurstSize: 25,
	QPS:       1. / 300.,
	// Aggregate after 10 similar events (same object and reason) within 10 minutes.
	MaxEvents:            10,
	MaxIntervalInSeconds: 600,
}

// eventRecorders is the process's single event pipeline. Upstream starts one broadcaster
// per controller; one is enough, as a recorder carries its own component name.
// It implements controllers.EventRecorders once started.
type eventRecorders struct {
	broadcaster record.EventBroadcaster
}

// start starts recording events to the core/v1 Events API through client and, with -v=3
// or more, logging them at V(3), the level upstream controllers log their events at.
// The broadcaster ignores ctx's cancellation, so events recorded during shutdown (such
// as "stopped leading") are still sent: only shutdown stops it, and it hands the queued
// events to the sink before it cancels the write in flight, which cancelling the
// broadcaster's context would abort at once.
func (e *eventRecorders) start(ctx context.Context, client kubernetes.Interface) {
	e.broadcaster = record.NewBroadcaster(
		record.WithContext(context.WithoutCancel(ctx)),
		record.WithCorrelatorOptions(correlatorOptions),
	)
	// The verbosity is fixed at start (nothing serves /debug/flags/v), so without -v=3
	// the logging watcher would only pass every event through one more goroutine.
	if klog.FromContext(ctx).V(3).Enabled() {
		e.broadcaster.StartStructuredLogging(3)
	}
	e.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
}

// Recorder returns a recorder whose events name component as their source.
func (e *eventRecorders) Recorder(component string) record.EventRecorder {
	return e.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component})
}

// shutdown stops the pipeline; events not yet sent are dropped.
func (e *eventRecorders) shutdown() {
	e.broadcaster.Shutdown()
}
