package controllers

import (
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
)

// Context is what the app hands every controller constructor. It is passed by value
// and holds only shared, concurrency-safe services.
type Context struct {
	// InformerFactory is the one factory shared by all controllers. Constructors ask
	// it for informers; the app starts it after every constructor has returned.
	InformerFactory informers.SharedInformerFactory
	// Clients builds one client per controller, each with its own user agent and its
	// own --kube-api-qps/--kube-api-burst bucket, so the audit log tells who wrote what
	// and one busy controller cannot starve the others.
	Clients ClientBuilder
	// Events hands out recorders on the process's single event broadcaster.
	Events EventRecorders
	// Caches waits for a controller's informers to sync and reports a hung sync by
	// informer name to the logs and to /readyz.
	Caches *CacheSyncTracker
	// Syncs records every sync in progress, so that one stuck longer than
	// --controller-sync-stuck-threshold fails /livez naming its controller and key; nil
	// records nothing.
	Syncs *InFlightSyncs
	// Fence is the write fence of the term the controllers run in; a queue parks a key
	// whose sync it refused until it reopens, instead of backing the key off as a
	// failure (see queueworker). Nil: nothing is fenced.
	Fence WriteFence
	// Config holds the tuning knobs of every controller, filled from flags.
	Config Config
}

// WriteFence is what a controller's queue needs of the write fence (the leaderelection
// Fence of its term): whether an error is a write it refused, and when writes pass
// again.
type WriteFence interface {
	// Refused reports whether err is, or wraps, a write the fence refused.
	Refused(err error) bool
	// WhenOpen returns a channel closed once writes pass: at once when they do now.
	WhenOpen() <-chan struct{}
}

// ClientBuilder returns a client for the named controller.
type ClientBuilder interface {
	Client(controllerName string) (kubernetes.Interface, error)
}

// EventRecorders returns a recorder whose events carry the given component name
// (upstream's names: "replicaset-controller", "deployment-controller", "endpoint-controller").
type EventRecorders interface {
	Recorder(component string) record.EventRecorder
}

// Config holds the controllers' settings, filled from flags.
type Config struct {
	// Options holds each controller's validated options, by canonical name. A controller
	// reads its own with OptionsFor; the options package fills it from the descriptors
	// without knowing any controller.
	Options map[string]Options
	// Features holds the state of the registered controllers' feature gates.
	Features Features
}

// OptionsFor returns the named controller's options from cfg, or defaults() when cfg
// holds none (a test that sets only what it needs).
func OptionsFor[T Options](cfg Config, name string, defaults func() Options) T {
	if o, ok := cfg.Options[name].(T); ok {
		return o
	}
	return defaults().(T)
}
