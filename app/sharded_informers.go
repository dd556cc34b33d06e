package app

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core"
	corev1informers "k8s.io/client-go/informers/core/v1"
)

// shardInformers gives a shard's controllers their informers: namespaced ones list and
// watch with the shard's shardSelector, so that the apiserver sends only the shard's
// objects; cluster-scoped ones (Nodes, which the EndpointSlice controller reads for
// topology) belong to no namespace and so to no shard, and come from the replica's one
// unfiltered factory, shared by all the shards it holds.
type shardInformers struct {
	// selector is the shard's shardSelector.
	selector string
	// cluster is the replica's factory of cluster-scoped informers.
	cluster informers.SharedInformerFactory
	// clusterStop stops the cluster-scoped informers: they outlive a shard's term.
	clusterStop <-chan struct{}
}

// options returns the factory options that restrict a factory to the shard.
func (s *shardInformers) options() []informers.SharedInformerOption {
	return []informers.SharedInformerOption{informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.ShardSelector = s.selector
	})}
}

// wrap returns f with its cluster-scoped informers taken from the cluster factory.
func (s *shardInformers) wrap(f informers.SharedInformerFactory) informers.SharedInformerFactory {
	return shardFactory{SharedInformerFactory: f, cluster: s.cluster}
}

// startCluster starts the cluster-scoped informers the shard's controllers asked for;
// those another shard asked for already run.
func (s *shardInformers) startCluster() { s.cluster.Start(s.clusterStop) }

// shardFactory, shardCore and shardCoreV1 route Core().V1().Nodes() to the cluster
// factory; everything else is the shard's. Nodes is the only cluster-scoped informer a
// mini-kcm controller uses; a controller that needs another adds it here.
type shardFactory struct {
	informers.SharedInformerFactory
	cluster informers.SharedInformerFactory
}

func (f shardFactory) Core() coreinformers.Interface {
	return shardCore{Interface: f.SharedInformerFactory.Core(), cluster: f.cluster.Core()}
}

type shardCore struct {
	coreinformers.Interface
	cluster coreinformers.Interface
}

func (c shardCore) V1() corev1informers.Interface {
	return shardCoreV1{Interface: c.Interface.V1(), cluster: c.cluster.V1()}
}

type shardCoreV1 struct {
	corev1informers.Interface
	cluster corev1informers.Interface
}

func (c shardCoreV1) Nodes() corev1informers.TypedNodeInformer { return c.cluster.Nodes() }
