package sharding

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core"
	corev1informers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Informers gives a shard's controllers their informers: namespaced ones list and
// watch with the shard's shardSelector, so that the apiserver sends only the shard's
// objects; cluster-scoped ones (Nodes, which the EndpointSlice controller reads for
// topology) belong to no namespace and so to no shard, and come from the replica's one
// unfiltered factory, shared by all the shards it holds.
type Informers struct {
	// selector is the shard's shardSelector; filter drops what an apiserver that
	// ignores it sends anyway.
	selector string
	filter   rangeFilter
	// cluster is the replica's factory of cluster-scoped informers.
	cluster informers.SharedInformerFactory
	// clusterStop stops the cluster-scoped informers: they outlive a shard's term.
	clusterStop <-chan struct{}

	// handlers are the event handlers the term's controllers added to the cluster
	// informers, removed when the term ends (removeHandlers): the informers outlive the
	// term, and a handler left behind would keep the term's controller in memory.
	mu       sync.Mutex
	handlers []handlerRegistration
}

type handlerRegistration struct {
	informer     cache.SharedIndexInformer
	registration cache.ResourceEventHandlerRegistration
}

// RemoveHandlers removes the handlers the term added to the cluster informers; call
// it once the shard's own informers stopped.
func (s *Informers) RemoveHandlers() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.handlers {
		_ = h.informer.RemoveEventHandler(h.registration) // only fails for a handler it does not know
	}
	s.handlers = nil
}

func (s *Informers) track(informer cache.SharedIndexInformer, registration cache.ResourceEventHandlerRegistration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handlers = append(s.handlers, handlerRegistration{informer: informer, registration: registration})
}

// Options returns the factory options that restrict a factory to the shard.
func (s *Informers) Options() []informers.SharedInformerOption {
	return []informers.SharedInformerOption{informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.ShardSelector = s.selector
	})}
}

// Client returns the client the shard's informers list and watch with: it drops every
// object outside the shard's range, whatever the apiserver sends (see filter.go).
func (s *Informers) Client(c kubernetes.Interface) kubernetes.Interface {
	return filteredClient{Interface: c, f: s.filter}
}

// Wrap returns f with its cluster-scoped informers taken from the cluster factory.
func (s *Informers) Wrap(f informers.SharedInformerFactory) informers.SharedInformerFactory {
	return shardFactory{SharedInformerFactory: f, cluster: s.cluster, shard: s}
}

// StartCluster starts the cluster-scoped informers the shard's controllers asked for;
// those another shard asked for already run.
func (s *Informers) StartCluster() { s.cluster.Start(s.clusterStop) }

// shardFactory, shardCore and shardCoreV1 route Core().V1().Nodes() to the cluster
// factory; everything else is the shard's. Nodes is the only cluster-scoped informer a
// mini-kcm controller uses; a controller that needs another adds it here.
type shardFactory struct {
	informers.SharedInformerFactory
	cluster informers.SharedInformerFactory
	shard   *Informers
}

func (f shardFactory) Core() coreinformers.Interface {
	return shardCore{Interface: f.SharedInformerFactory.Core(), cluster: f.cluster.Core(), shard: f.shard}
}

type shardCore struct {
	coreinformers.Interface
	cluster coreinformers.Interface
	shard   *Informers
}

func (c shardCore) V1() corev1informers.Interface {
	return shardCoreV1{Interface: c.Interface.V1(), cluster: c.cluster.V1(), shard: c.shard}
}

type shardCoreV1 struct {
	corev1informers.Interface
	cluster corev1informers.Interface
	shard   *Informers
}

func (c shardCoreV1) Nodes() corev1informers.TypedNodeInformer {
	return trackedNodes{TypedNodeInformer: c.cluster.Nodes(), shard: c.shard}
}

// trackedNodes hands out the cluster Node informer with its handler registrations
// tracked for the shard's term.
type trackedNodes struct {
	corev1informers.TypedNodeInformer
	shard *Informers
}

func (n trackedNodes) Informer() cache.SharedIndexInformer {
	return trackedInformer{SharedIndexInformer: n.TypedNodeInformer.Informer(), shard: n.shard}
}

type trackedInformer struct {
	cache.SharedIndexInformer
	shard *Informers
}

func (i trackedInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return i.tracked(i.SharedIndexInformer.AddEventHandler(h))
}

func (i trackedInformer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return i.tracked(i.SharedIndexInformer.AddEventHandlerWithResyncPeriod(h, resync))
}

func (i trackedInformer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, options cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return i.tracked(i.SharedIndexInformer.AddEventHandlerWithOptions(h, options))
}

// tracked records a handler the informer accepted for removal at the term's end.
func (i trackedInformer) tracked(reg cache.ResourceEventHandlerRegistration, err error) (cache.ResourceEventHandlerRegistration, error) {
	if err == nil {
		i.shard.track(i.SharedIndexInformer, reg)
	}
	return reg, err
}
