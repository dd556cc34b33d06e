package app

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/leaderelection"
)

// informerName identifies mini-kcm's shared informers in client-go's informer metrics.
const informerName = "mini-kcm"

// controllerManager builds and runs the enabled controllers for one leadership term, or
// for the life of the process without leader election. It owns everything it starts:
// when run returns, the controllers and informers have stopped (unless the shutdown
// timeout passed, which run reports).
type controllerManager struct {
	// registry holds the descriptors of every known controller.
	registry *controllers.Registry
	// enabled lists the canonical names of the controllers to build, from --controllers.
	enabled []string
	// config is handed to every constructor.
	config controllers.Config
	// clients builds one client per controller.
	clients controllers.ClientBuilder
	// informerClient builds the read-only client of the shared informers.
	informerClient func(name string) (kubernetes.Interface, error)
	// cacheTransform trims what that client did not (see clientBuilder.cacheTransform).
	cacheTransform cache.TransformFunc
	// events hands out recorders on the process's event broadcaster.
	events controllers.EventRecorders
	// minResyncPeriod is the lower bound of the informers' jittered resync period.
	minResyncPeriod time.Duration
	// shutdownTimeout bounds the wait for controllers after ctx is cancelled; 0 waits forever.
	shutdownTimeout time.Duration
	// readiness learns when the controllers are built and their caches can be tracked.
	readiness *readiness
	// syncs records the controllers' syncs in progress for the stuck-sync check.
	syncs *controllers.InFlightSyncs
}

// run runs one term's lifecycle: the shared informers' factory, then the controllers,
// which are built (asking the factory for their informers), start the informers and
// run until ctx is cancelled. It returns after every controller's Run returned and the
// informers stopped, in that order, so the caller may then release the Lease. If the
// controllers do not stop within the shutdown timeout, it returns an error wrapping
// leaderelection.ErrControllersStillRunning.
func (m *controllerManager) run(ctx context.Context) error {
	m.readiness.setLeading()

	// The term's stages, in start order (see lifecycle).
	term := newLifecycle("term")
	var (
		factory informers.SharedInformerFactory
		// informersCtx is the informers stage's context: the informers stop only after
		// the controllers returned, so a worker finishing its last sync still reads a
		// live cache.
		informersCtx context.Context
	)
	term.add("informers", func(ctx context.Context) (func(), error) {
		informerClient, err := m.informerClient("shared-informers")
		if err != nil {
			return nil, err
		}
		name, err := cache.NewInformerName(informerName)
		if err != nil {
			return nil, fmt.Errorf("naming the shared informers: %w", err)
		}
		factory = informers.NewSharedInformerFactoryWithOptions(informerClient, resyncPeriod(m.minResyncPeriod),
			informers.WithTransform(m.cacheTransform), informers.WithInformerName(name))
		informersCtx = ctx
		// Shutdown waits for the informers and releases their name for the next term.
		return factory.Shutdown, nil
	})
	return term.run(ctx, "controllers", func(ctx context.Context) error {
		caches := &controllers.CacheSyncTracker{}
		built, err := m.build(ctx, controllers.Context{
			InformerFactory: factory,
			Clients:         m.clients,
			Events:          m.events,
			Caches:          caches,
			Syncs:           m.syncs,
			Config:          m.config,
		})
		if err != nil {
			return err
		}
		m.readiness.setControllersBuilt(caches)

		// Start only now: the constructors registered the informers they need, and an
		// informer requested after Start would never run.
		factory.Start(informersCtx.Done())
		return m.runControllers(ctx, built)
	})
}

// build calls the constructor of every enabled controller, each with a logger named
// after the controller. A nil controller is skipped; an error aborts the whole start,
// since running only some controllers would hide the problem.
func (m *controllerManager) build(ctx context.Context, cc controllers.Context) ([]controllers.Controller, error) {
	logger := klog.FromContext(ctx)
	var built []controllers.Controller
	enabled := sets.New(m.enabled...)
	for _, name := range m.registry.Names() {
		if !enabled.Has(name) {
			logger.Info("Warning: controller is disabled", "controller", name)
		}
	}
	for _, name := range m.enabled {
		d, ok := m.registry.Get(name)
		if !ok {
			return nil, fmt.Errorf("controller %q is enabled but not registered", name)
		}
		c, err := d.New(klog.NewContext(ctx, klog.LoggerWithName(logger, name)), cc)
		if err != nil {
			logger.Error(err, "Error building a controller", "controller", name)
			return nil, fmt.Errorf("building controller %s: %w", name, err)
		}
		if c == nil {
			logger.Info("Warning: skipping controller", "controller", name)
			continue
		}
		// From now on /readyz waits for this controller's caches.
		cc.Caches.Expect(c.Name())
		built = append(built, c)
	}
	return built, nil
}

// runControllers runs each controller in a goroutine of its own until ctx is cancelled,
// then waits for them, logging every shutdownTimeout/3 which ones are still running.
func (m *controllerManager) runControllers(ctx context.Context, built []controllers.Controller) error {
	logger := klog.FromContext(ctx)
	var (
		mu      sync.Mutex
		running = sets.New[string]()
		wg      sync.WaitGroup
	)
	for _, c := range built {
		name := c.Name()
		running.Insert(name)
		wg.Go(func() {
			defer func() {
				mu.Lock()
				running.Delete(name)
				mu.Unlock()
				logger.V(1).Info("Controller stopped", "controller", name)
			}()
			logger.V(1).Info("Starting controller", "controller", name)
			c.Run(klog.NewContext(ctx, klog.LoggerWithName(logger, name)))
		})
	}
	stillRunning := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return sets.List(running)
	}
	allStopped := make(chan struct{})
	go func() {
		wg.Wait()
		close(allStopped)
	}()
	logger.Info("Controllers started", "controllers", stillRunning())

	if len(built) == 0 {
		<-ctx.Done()
	} else {
		select {
		case <-ctx.Done():
		case <-allStopped:
			return errors.New("every controller stopped although mini-kcm is not shutting down")
		}
	}

	logger.Info("Stopping controllers", "timeout", m.shutdownTimeout)
	var timeout <-chan time.Time
	if m.shutdownTimeout > 0 {
		timer := time.NewTimer(m.shutdownTimeout)
		defer timer.Stop()
		timeout = timer.C
	}
	logEvery := m.shutdownTimeout / 3
	if logEvery <= 0 {
		logEvery = 5 * time.Second
	}
	ticker := time.NewTicker(logEvery)
	defer ticker.Stop()
	for {
		select {
		case <-allStopped:
			logger.Info("All controllers stopped")
			return nil
		case <-ticker.C:
			logger.Info("Still waiting for controllers to terminate", "runningControllers", stillRunning())
		case <-timeout:
			running := stillRunning()
			logger.Info("Controller shutdown timeout reached", "timeout", m.shutdownTimeout, "runningControllers", running)
			// The stuck goroutines end with the process, which exits next.
			return fmt.Errorf("controller shutdown timeout (%s) reached with %v: %w",
				m.shutdownTimeout, running, leaderelection.ErrControllersStillRunning)
		}
	}
}

// resyncPeriod draws the informers' resync period from [min, 2×min), so that
// replicas and restarts do not resync in lock-step. 0 turns resyncs off.
func resyncPeriod(minimum time.Duration) time.Duration {
	if minimum <= 0 {
		return 0
	}
	return minimum + rand.N(minimum)
}
