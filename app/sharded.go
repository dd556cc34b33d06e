package app

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/mini-kcm/mini-kcm/app/serving"
	"github.com/mini-kcm/mini-kcm/caches/reconnect"
	"github.com/mini-kcm/mini-kcm/leaderelection"
	"github.com/mini-kcm/mini-kcm/sharding"
)

// newShardedReplica wires a sharded replica (package sharding holds the protocol) to
// the process: r.manager is the single leader's controller manager, of which each shard's
// term runs a copy restricted to the shard, with its clients fenced by the shard's Lease.
//
// The mode's identity is the holder of the replica's shard Leases; under
// --leader-elect-apiserver-fence each term's controller clients send it with the shard
// Lease's name, which the sharded fence policy (deploy/sharded/fence/) compares with
// that Lease.
func (r *replica) newShardedReplica() (*sharding.Replica, error) {
	cfg, mode, manager, builder, events := r.cfg, r.mode, r.manager, r.builder, r.events
	electionClient, leaseWatch, err := mode.electionClients(cfg.RESTConfig, "leader-election")
	if err != nil {
		return nil, err
	}
	// The coordinator renews the main Lease on a connection of its own, so that a slow
	// weighing never delays a shard's renewal.
	coordinatorClient, err := leaderelection.NewClient(cfg.RESTConfig, userAgent("shard-coordinator"), mode.timings)
	if err != nil {
		return nil, err
	}
	informerClient, err := builder.InformerClient("cluster-informers", reconnect.NewInformers(informerName+"-cluster"))
	if err != nil {
		return nil, err
	}
	name, err := cache.NewInformerName(informerName + "-cluster")
	if err != nil {
		return nil, fmt.Errorf("naming the cluster-scoped informers: %w", err)
	}
	cluster := informers.NewSharedInformerFactoryWithOptions(informerClient, resyncPeriod(cfg.MinResyncPeriod),
		informers.WithTransform(builder.CacheTransform()), informers.WithInformerName(name))
	metadataConfig := rest.CopyConfig(cfg.RESTConfig)
	metadataConfig.UserAgent = userAgent("shard-coordinator")
	metadataClient, err := metadata.NewForConfig(metadataConfig)
	if err != nil {
		return nil, fmt.Errorf("building the shard coordinator's client: %w", err)
	}
	return sharding.New(sharding.Config{
		Base:               mode.name,
		Namespace:          mode.namespace,
		Identity:           mode.identity,
		Shards:             mode.shards,
		Timings:            mode.timings,
		RebalanceThreshold: cfg.Sharding.RebalanceThreshold,
		RebalancePeriod:    cfg.Sharding.RebalancePeriod,
		Client:             electionClient,
		CoordinatorClient:  coordinatorClient,
		LeaseWatch:         leaseWatch,
		Probe:              r.probeClient,
		Weigh:              sharding.WeighPods(metadataClient),
		Recorder:           func() record.EventRecorder { return events.Recorder(eventComponent) },
		Cluster:            cluster,
		Campaigning:        r.ready.SetStandby,
		// The coordinator, one replica at a time, looks for kube-controller-manager
		// still running the controllers, as a single leader does.
		Coordinating: r.upstream.Run,
		Term: func(ctx context.Context, term sharding.Term) error {
			m := *manager
			m.clients = builder.ForShardTerm(term.Fence, mode.namespace+"/"+sharding.ShardLeaseName(mode.name, term.Shard),
				fmt.Sprintf("shard %d, epoch %d, term %d", term.Shard, term.Epoch, time.Now().UnixMilli()))
			m.readiness = &serving.Readiness{}
			m.informerName = fmt.Sprintf("%s-shard-%d", informerName, term.Shard)
			m.shard, m.fence = term.Informers, term.Fence
			// The process's single-leader informers say what /statusz shows.
			m.connections = nil
			m.informerClient = func(name string, connections *reconnect.Informers) (kubernetes.Interface, error) {
				c, err := manager.informerClient(name, connections)
				if err != nil {
					return nil, err
				}
				return term.Informers.Client(c), nil
			}
			return m.run(ctx)
		},
	}), nil
}
