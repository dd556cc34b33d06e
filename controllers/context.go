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

// Config holds the controllers' settings, filled from flags.
type Config struct {
	// Options holds each controller's validated options, by canonical name. A controller
	// reads its own with OptionsFor; the options package fills it from the descriptors
	// without knowing any controller.
	Options map[string]Options
	// Features are the feature gates that change what the controllers do.
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

// Features holds the state of each feature gate a controller honours, resolved once from
// --feature-gates; a field is named after its gate. The options package owns the gates,
// their defaults (those of Kubernetes v1.37, where all of these are on) and their
// validation. A gate that is off makes its controllers behave as upstream's do with it
// off. Plain booleans rather than a gate lookup keep the controllers free of flag
// plumbing and let a test state exactly which gates it turns off.
type Features struct {
	// PodDeletionCost: a scale-down ranks pods by their controller.kubernetes.io/pod-deletion-cost
	// annotation. Off, the annotation is ignored.
	PodDeletionCost bool
	// DeploymentReplicaSetTerminatingReplicas: ReplicaSets and Deployments report
	// status.terminatingReplicas. Off, the field is left unset (and cleared if set).
	DeploymentReplicaSetTerminatingReplicas bool
	// StaleControllerConsistencyReplicaSet: the ReplicaSet controller holds a sync back
	// until its informers have seen the pods and status it wrote for that ReplicaSet.
	// Off, only expectations guard it against its own stale cache.
	StaleControllerConsistencyReplicaSet bool
}
