package app

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/app/serving"
	"github.com/mini-kcm/mini-kcm/caches/reconnect"
	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/leaderelection"
	"github.com/mini-kcm/mini-kcm/sharding"
)

// informerName identifies mini-kcm's shared informers in client-go's informer metrics,
// and freshInformerName those of a term that could not use a warm standby's: after a
// takeover that could not show them fresh, or once the apiserver was replaced.
const (
	informerName      = "mini-kcm"
	freshInformerName = informerName + "-fresh"
)

// controllerManager builds and runs the enabled controllers. Building them (their
// constructors ask the shared informer factory for informers and add event handlers)
// and starting the informers is one lifecycle stage, addStages; running the workers,
// which alone write, is runWorkers. A warm standby runs the stage before the election
// and the workers once it leads; a cold one runs both in one leadership term (run). It
// owns everything it starts: when the lifecycle holding its stage returns, the
// controllers and informers have stopped (unless the shutdown timeout passed, which
// runWorkers reports).
type controllerManager struct {
	// registry holds the descriptors of every known controller.
	registry *controllers.Registry
	// enabled lists the canonical names of the controllers to build, from --controllers.
	enabled []string
	// config is handed to every constructor.
	config controllers.Config
	// clients builds one client per controller.
	clients controllers.ClientBuilder
	// informerClient builds the read-only client of the shared informers, which
	// reports their connection to the apiserver to informers.
	informerClient func(name string, informers *reconnect.Informers) (kubernetes.Interface, error)
	// cacheTransform trims what that client did not (see caches.Transform).
	cacheTransform cache.TransformFunc
	// events hands out recorders on the process's event broadcaster.
	events controllers.EventRecorders
	// minResyncPeriod is the lower bound of the informers' jittered resync period.
	minResyncPeriod time.Duration
	// shutdownTimeout bounds the wait for controllers after ctx is cancelled; 0 waits forever.
	shutdownTimeout time.Duration
	// startInterval delays each controller's Run by a random time between it and twice
	// it (--controller-start-interval, as upstream); 0 runs them at once.
	startInterval time.Duration
	// readiness learns when the informers started and when this replica leads.
	readiness *serving.Readiness
	// syncs records the controllers' syncs in progress for the stuck-sync check.
	syncs *controllers.InFlightSyncs
	// informerName names the informers in client-go's metrics; empty means
	// informerName, the process's one set. Names must be unique in a process.
	informerName string
	// shard, when set, restricts the informers to one shard's namespaces and routes
	// the cluster-scoped informers to the replica's unfiltered factory.
	shard *sharding.Informers
	// takeover, for a warm standby, is the freshness barrier of its terms (takeOver).
	takeover *takeoverBarrier
	// connections, when set, holds the connection tracker of the informers started
	// last, for /statusz.
	connections *atomic.Pointer[reconnect.Informers]
	// reconnect is the informers' gate; a term restarts its informers when it reports
	// the apiserver replaced. Nil never restarts.
	reconnect *reconnect.Gate
	// terms knows the informers the running workers use, for resume; nil outside a
	// leader election with a fence.
	terms *termInformers
	// fence is the write fence of the terms (a shard's term has its own); the
	// controllers' queues park the keys it refused until it reopens. Nil: none.
	fence *leaderelection.Fence
}

// builtControllers is what the informers stage leaves for runWorkers: the controllers,
// built but not running, and the tracker their Run reports cache syncs to.
type builtControllers struct {
	controllers []builtController
	caches      *controllers.CacheSyncTracker
	// factory holds the informers, for the freshness barrier of a warm takeover or a
	// resume, and started is when they started.
	factory informers.SharedInformerFactory
	started time.Time
	// stopInformers stops them before the stage ends, when a takeover gives up on them.
	stopInformers context.CancelFunc
}

// run runs one cold leadership term: its own lifecycle with the informers stage (see
// addStages), then the workers until ctx is cancelled. It returns after every
// controller's Run returned and the informers stopped, in that order, so the caller may
// then release the Lease. If the controllers do not stop within the shutdown timeout,
// it returns an error wrapping leaderelection.ErrControllersStillRunning. When the
// apiserver is replaced meanwhile (see runWorkers), the term goes on with fresh
// informers and controllers, in a lifecycle of their own.
func (m *controllerManager) run(ctx context.Context) error {
	for {
		m.readiness.SetLeading()
		term := newLifecycle("term")
		built := m.addStages(term)
		err := term.run(ctx, "controllers", func(ctx context.Context) error {
			return m.runWorkers(ctx, built)
		})
		if !errors.Is(err, errFreshInformers) {
			return err
		}
		klog.FromContext(ctx).Info("Restarting the term on fresh informers", "reason", err)
	}
}

// continueFresh goes on, after runWorkers returned err, with a term on fresh informers
// when it asked for them (see runWorkers); otherwise it returns err. The
// replaced informers belong to a lifecycle that outlives the term (a warm standby's, the
// process's), which stops them again at its end.
func (m *controllerManager) continueFresh(ctx context.Context, err error) error {
	if !errors.Is(err, errFreshInformers) {
		return err
	}
	klog.FromContext(ctx).Info("Restarting the term on fresh informers", "reason", err)
	fresh := *m
	fresh.informerName = freshInformerName
	return fresh.run(ctx)
}

// addStages adds to l the "informers" stage: it makes the shared informer factory,
// builds every enabled controller (each constructor asks the factory for its informers
// and adds its event handlers) and then starts the informers. Nothing in it writes to
// the apiserver: handlers only fill the controllers' queues, which no worker drains
// until runWorkers. Stopping the stage stops the informers and waits for them; since
// stages stop after the work, that happens only after the workers drained, so a worker
// finishing its last sync still reads a live cache. The returned value is filled when
// the stage has started.
func (m *controllerManager) addStages(l *lifecycle) *builtControllers {
	built := &builtControllers{}
	l.add("informers", func(ctx context.Context) (func(), error) {
		named := informerName
		if m.informerName != "" {
			named = m.informerName
		}
		connections := reconnect.NewInformers(named)
		informerClient, err := m.informerClient("shared-informers", connections)
		if err != nil {
			return nil, err
		}
		name, err := cache.NewInformerName(named)
		if err != nil {
			return nil, fmt.Errorf("naming the shared informers: %w", err)
		}
		options := []informers.SharedInformerOption{informers.WithTransform(m.cacheTransform), informers.WithInformerName(name)}
		if m.shard != nil {
			options = append(options, m.shard.Options()...)
		}
		var factory informers.SharedInformerFactory = informers.NewSharedInformerFactoryWithOptions(informerClient,
			resyncPeriod(m.minResyncPeriod), options...)
		// The controllers ask this factory for every informer, cluster-scoped or not.
		controllerFactory := factory
		if m.shard != nil {
			controllerFactory = m.shard.Wrap(factory)
		}
		built.caches = &controllers.CacheSyncTracker{}
		cc := controllers.Context{
			InformerFactory: controllerFactory,
			Clients:         m.clients,
			Events:          m.events,
			Caches:          built.caches,
			Syncs:           m.syncs,
			Config:          m.config,
		}
		if m.fence != nil {
			cc.Fence = m.fence
		}
		built.controllers, err = m.build(ctx, cc)
		if err != nil {
			// Nothing started yet; Shutdown only releases the informers' name.
			factory.Shutdown()
			return nil, err
		}
		// Start only now: the constructors registered the informers they need, and an
		// informer requested after Start would never run. Informers start with a
		// consistent list: client-go v0.37's WatchListClient gate (on by default) streams
		// it in a watch the apiserver serves from its current revision, so a cold term
		// (a cold standby's, a shard's, a warm takeover's fallback) sees every earlier write.
		informersCtx, stopInformers := context.WithCancel(ctx)
		built.factory, built.stopInformers, built.started = factory, stopInformers, time.Now()
		factory.Start(informersCtx.Done())
		if m.shard != nil {
			m.shard.StartCluster()
		}
		m.readiness.SetInformers(func() []string { return unsyncedInformers(factory) })
		if m.connections != nil {
			m.connections.Store(connections)
		}
		// Shutdown waits for the informers and releases their name; a shard's term also
		// leaves the replica's cluster informers without its handlers.
		return func() {
			stopInformers()
			factory.Shutdown()
			if m.shard != nil {
				m.shard.RemoveHandlers()
			}
			if m.connections != nil {
				m.connections.CompareAndSwap(connections, nil)
			}
			connections.Forget()
		}, nil
	})
	return built
}

// runWorkers runs the built controllers, each waiting for its own caches and then
// starting its workers, until ctx is cancelled; see runControllers. It is a leadership
// term's work, or the process's without leader election.
//
// If the apiserver is replaced meanwhile (reconnect.Gate.Replaced: it refused
// connections during an outage, so a new process answers now), every informer would be
// answered 410 Gone and relist only after a round of client-go's backoff, blind until
// then. Instead the informers stop at once, the workers drain, and runWorkers returns
// errFreshInformers, on which the caller goes on with fresh informers (run,
// continueFresh): one consistent list each, at once. A term resuming after a long
// pause whose caches cannot be shown fresh asks for the same (resume).
func (m *controllerManager) runWorkers(ctx context.Context, built *builtControllers) error {
	m.readiness.SetLeading()
	m.readiness.SetControllersBuilt(built.caches)
	var restart <-chan struct{}
	if m.terms != nil {
		restart = m.terms.running(built)
		defer m.terms.running(nil)
	}
	replaced := m.replacements()
	if replaced == nil && restart == nil {
		return m.runControllers(ctx, built.controllers)
	}
	workers, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	var (
		why      atomic.Pointer[string]
		watching sync.WaitGroup
	)
	watching.Go(func() {
		reason := ""
		select {
		case <-replaced:
			reason = "the apiserver was replaced, and its watch cache does not have the resourceVersions the informers reached"
		case <-restart:
			reason = "the caches could not be shown fresh after a pause"
		case <-workers.Done():
			return
		}
		why.Store(&reason)
		// First the informers, before their reflectors relist on their own; the
		// workers finish their syncs on the caches as they are.
		built.stopInformers()
		stopWorkers()
	})
	err := m.runControllers(workers, built.controllers)
	stopWorkers()
	watching.Wait()
	if reason := why.Load(); err == nil && reason != nil && ctx.Err() == nil {
		return fmt.Errorf("%w: %s", errFreshInformers, *reason)
	}
	return err
}

// errFreshInformers ends a term's workers whose informers are to be replaced by fresh
// ones: the replaced apiserver made them useless, or a resume could not show them
// fresh (see runWorkers).
var errFreshInformers = errors.New("going on with fresh informers")

// replacements returns the channel closed at the next replacement of the apiserver, or
// nil when the term does not restart on one: without a gate, and in a shard's term,
// whose cluster-scoped informers are the replica's.
func (m *controllerManager) replacements() <-chan struct{} {
	if m.reconnect == nil || m.shard != nil {
		return nil
	}
	return m.reconnect.Replaced()
}

// unsyncedInformers lists, sorted and without waiting, the started informers of
// factory whose cache has not synced yet, for /readyz and /statusz.
func unsyncedInformers(factory informers.SharedInformerFactory) []string {
	// A cancelled context makes the factory report the current state at once.
	now, cancel := context.WithCancel(context.Background())
	cancel()
	var unsynced []string
	for informerType, synced := range factory.WaitForCacheSyncWithContext(now).Synced {
		if !synced {
			unsynced = append(unsynced, informerType.String())
		}
	}
	sort.Strings(unsynced)
	return unsynced
}

// resyncPeriod draws the informers' resync period from [min, 2×min), so that
// replicas and restarts do not resync in lock-step. 0 turns resyncs off.
func resyncPeriod(minimum time.Duration) time.Duration {
	if minimum <= 0 {
		return 0
	}
	return minimum + rand.N(minimum)
}
