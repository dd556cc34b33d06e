package controllers

import (
	"time"

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
	// Config holds the tuning knobs of every controller, filled from flags.
	Config Config
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

// Config holds per-controller settings. The options package owns the flags, defaults and
// validation; controllers only read these values.
type Config struct {
	ReplicaSet ReplicaSetConfig
	Deployment DeploymentConfig
	Endpoints  EndpointsConfig
}

// ReplicaSetConfig configures the ReplicaSet controller.
type ReplicaSetConfig struct {
	// ConcurrentSyncs is the number of workers (--concurrent-replicaset-syncs).
	ConcurrentSyncs int
}

// DeploymentConfig configures the Deployment controller.
type DeploymentConfig struct {
	// ConcurrentSyncs is the number of workers (--concurrent-deployment-syncs).
	ConcurrentSyncs int
}

// EndpointsConfig configures the Endpoints controller.
type EndpointsConfig struct {
	// ConcurrentSyncs is the number of workers (--concurrent-endpoint-syncs).
	ConcurrentSyncs int
	// UpdatesBatchPeriod delays pod-driven syncs so that several pod changes to one
	// Service become one write (--endpoint-updates-batch-period); 0 means no delay.
	UpdatesBatchPeriod time.Duration
}
