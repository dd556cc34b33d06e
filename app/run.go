package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	goruntime "runtime"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/server/flagz"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/app/clients"
	"github.com/mini-kcm/mini-kcm/app/serving"
	"github.com/mini-kcm/mini-kcm/caches/cachetrim"
	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/handover"
	"github.com/mini-kcm/mini-kcm/leaderelection"
	"github.com/mini-kcm/mini-kcm/options"
	"github.com/mini-kcm/mini-kcm/sharding"
)

const (
	// apiServerWaitTimeout bounds the wait for the apiserver at start, like upstream's
	// 10s: long enough for an apiserver started at the same time, short enough that a
	// wrong address is reported while the operator still watches.
	apiServerWaitTimeout = 10 * time.Second
	// apiServerProbeInterval is how often /readyz's view of the apiserver is refreshed.
	apiServerProbeInterval = 5 * time.Second
	// watchdogTolerance is how long beyond its renew deadline a leader's renewal loop
	// may go without trying to renew before /healthz fails, so that the kubelet
	// restarts a wedged leader (see leaderelection.Watchdog).
	watchdogTolerance = 20 * time.Second
	// eventComponent is the source of the process's own events (LeaderElection on the Lease).
	eventComponent = "mini-kcm"
)

// Run runs mini-kcm until ctx is cancelled, in this order (the process's lifecycle in
// run): serving and event recording start at once on every replica; mini-kcm waits for
// the apiserver; a warm standby (the default) then builds the enabled controllers of reg
// and starts their informers; then it campaigns for the Lease (or, with
// --leader-elect=false, starts right away) and runs the controllers' workers while it
// leads. A cold standby (--leader-elect-warm-standby=false) builds the controllers and
// starts the informers only once it leads. On shutdown these stop in reverse order.
//
// Run returns nil after a graceful shutdown and an error when something failed or the
// controllers did not stop in time. A lost Lease makes this replica a standby again:
// its controllers drained behind the closed fence, and they are built anew for the
// next term (see campaignUntilShutdown).
func Run(ctx context.Context, cfg *options.Config, reg *controllers.Registry) error {
	return run(ctx, cfg, reg, apiServerWaitTimeout)
}

func run(ctx context.Context, cfg *options.Config, reg *controllers.Registry, apiServerWait time.Duration) error {
	logger := klog.FromContext(ctx)
	info := Info()
	logger.Info("Starting mini-kcm", "version", info.GitVersion, "gitCommit", info.GitCommit,
		"gitTreeState", info.GitTreeState, "buildDate", info.BuildDate, "goVersion", goruntime.Version())
	logger.Info("Golang settings", "GOGC", os.Getenv("GOGC"), "GOMAXPROCS", os.Getenv("GOMAXPROCS"),
		"GOTRACEBACK", os.Getenv("GOTRACEBACK"))

	r, err := newReplica(logger, cfg, reg)
	if err != nil {
		return err
	}
	stopReadiness := context.AfterFunc(ctx, r.ready.SetStopping)
	defer stopReadiness()

	// The process's stages, in start order; they stop in reverse once the work (the
	// election, or the controllers without it) returned. See lifecycle. Each run mode
	// adds its own stages and work to the shared ones.
	process := r.processStages(ctx, apiServerWait)
	runMode := map[runMode]func(context.Context, *lifecycle) error{
		withoutElection: r.runWithoutElection,
		sharded:         r.runSharded,
		warmStandby:     r.runWarmStandby,
		coldStandby:     r.runColdStandby,
	}[r.mode.run]
	if err := runMode(ctx, process); err != nil {
		return err
	}
	logger.Info("Shutdown complete")
	return nil
}

// replica is what every run mode shares, built before anything starts: the run mode,
// the clients, the controller manager, and what serving reports.
type replica struct {
	cfg      *options.Config
	mode     *replicaMode
	builder  clients.Builder
	manager  *controllerManager
	events   *eventRecorders
	ready    *serving.Readiness
	probe    *serving.APIServerProbe
	handler  http.Handler
	watchdog *leaderelection.Watchdog
	status   *replicaStatus
	// upstream looks, while leading, for kube-controller-manager running our controllers too.
	upstream *handover.Watch
	// probeClient reads what a replica checks at start.
	probeClient kubernetes.Interface
	eventClient kubernetes.Interface
}

func newReplica(logger klog.Logger, cfg *options.Config, reg *controllers.Registry) (*replica, error) {
	// The run mode decides the identity and the fence before any client is built: the
	// fence guards every client's writes, and with --leader-elect-apiserver-fence the
	// controllers' clients carry the identity (see clients.Builder.Config).
	mode, err := newReplicaMode(cfg)
	if err != nil {
		return nil, err
	}
	mode.logStart(logger)
	// The shared informers keep of pods what the registered controllers declare they read.
	trimmer, err := cachetrim.NewTrimmer(reg.PodReads())
	if err != nil {
		return nil, fmt.Errorf("trimming cached pods: %w", err)
	}
	r := &replica{cfg: cfg, mode: mode, events: &eventRecorders{}, ready: &serving.Readiness{}}
	r.builder = clients.Builder{Base: cfg.RESTConfig, UserAgent: userAgent, Fence: mode.fence,
		InProcessFenceOff: mode.inProcessFenceOff, Trimmer: trimmer}
	if mode.apiserverFence {
		r.builder.Holder, r.builder.Controllers = mode.identity, sets.New(reg.Names()...)
	}
	if cfg.UseServiceAccountCredentials {
		tokenClient, err := r.builder.Client("token-requests")
		if err != nil {
			return nil, err
		}
		r.builder.ServiceAccounts, r.builder.Tokens = controllerServiceAccounts(reg), tokenClient.CoreV1()
		logger.Info("Controllers write with the credentials of their own ServiceAccounts", "namespace", "kube-system",
			"serviceAccounts", r.builder.ServiceAccounts)
	}
	if r.eventClient, err = r.builder.Client("event-recorder"); err != nil {
		return nil, err
	}
	if r.probeClient, err = r.builder.Client("apiserver-probe"); err != nil {
		return nil, err
	}
	r.probe = serving.NewAPIServerProbe(r.probeClient.Discovery().RESTClient(), cfg.RESTConfig.Host)

	// A worker wedged in one sync fails /livez and /healthz, naming controller and key.
	syncs := &controllers.InFlightSyncs{Threshold: cfg.ControllerSyncStuckThreshold}
	if mode.run != withoutElection {
		// The watchdog fails /healthz for a leader whose renewal loop stopped trying:
		// it is wedged, and the kubelet's liveness probe should restart it
		// (kubernetes#70819). A leader paused by an unreachable apiserver is healthy.
		r.watchdog = leaderelection.NewWatchdog(watchdogTolerance)
	}
	r.status = &replicaStatus{ready: r.ready, mode: mode}
	r.status.enabled, r.status.disabled = enabledAndDisabled(reg, cfg.EnabledControllers)
	if mode.singleLeader() {
		r.status.election = &electionStatus{}
	}
	if r.upstream, err = newUpstreamWatch(r.builder, cfg.EnabledControllers); err != nil {
		return nil, err
	}
	r.handler = serving.NewHandler(Version(), serving.NewHealthChecks(syncs, r.watchdog, r.probe, r.ready),
		cfg.Serving.EnableProfiling, flagz.NamedFlagSetsReader{FlagSets: cfg.Serving.Flags},
		append(r.status.fields(), upstreamStatusz(r.upstream)))

	r.manager = &controllerManager{
		registry:        reg,
		enabled:         cfg.EnabledControllers,
		config:          cfg.Controllers,
		clients:         r.builder,
		informerClient:  r.builder.InformerClient,
		cacheTransform:  r.builder.CacheTransform(),
		events:          r.events,
		minResyncPeriod: cfg.MinResyncPeriod,
		shutdownTimeout: cfg.ControllerShutdownTimeout,
		startInterval:   cfg.ControllerStartInterval,
		readiness:       r.ready,
		syncs:           syncs,
	}
	return r, nil
}

// processStages are the stages of every run mode: serving, event recording and the
// apiserver probe.
func (r *replica) processStages(ctx context.Context, apiServerWait time.Duration) *lifecycle {
	process := newLifecycle("process")
	// Serving comes first, before anything can block, on every replica: probes and
	// metrics must work for standbys and for a replica still waiting for the apiserver.
	// It stops last.
	process.add("serving", func(ctx context.Context) (func(), error) {
		srv, err := serving.Start(ctx, r.cfg.Serving, r.handler)
		return srv.Stop, err
	})
	// Events are recorded until the election ended, so that "stopped leading" gets out.
	process.add("event broadcaster", func(ctx context.Context) (func(), error) {
		r.events.start(ctx, r.eventClient)
		return r.events.shutdown, nil
	})
	// Wait for the apiserver (a signal ends the wait, which is not an error), then keep
	// probing it for /readyz through the shutdown.
	process.add("apiserver probe", func(probeCtx context.Context) (func(), error) {
		if err := r.probe.WaitUntilHealthy(ctx, apiServerWait); err != nil {
			if ctx.Err() != nil {
				return nil, errShutDownWhileStarting
			}
			return nil, err
		}
		var probing sync.WaitGroup
		probing.Go(func() { r.probe.Run(probeCtx, apiServerProbeInterval) })
		return probing.Wait, nil
	})
	return process
}

// runWithoutElection (--leader-elect=false) runs the controllers at once, until ctx ends.
func (r *replica) runWithoutElection(ctx context.Context, process *lifecycle) error {
	built := r.manager.addStages(process)
	return process.run(ctx, "controllers", whileWatchingUpstream(r.upstream, func(ctx context.Context) error {
		return r.manager.runWorkers(ctx, built)
	}))
}

// runSharded is active-active: the namespaces are cut into shards, and this replica
// runs the controllers on its fair share of them; see sharding.Replica.
func (r *replica) runSharded(ctx context.Context, process *lifecycle) error {
	shards, err := r.newShardedReplica()
	if err != nil {
		return err
	}
	r.status.shards = shards.Status
	return process.run(ctx, "shards", func(ctx context.Context) error {
		// The apiserver's half of the fence needs one binding per shard; without
		// them a shard's stale holder would be fenced in-process only.
		if r.mode.apiserverFence {
			if err := sharding.CheckFenceBindings(ctx, r.probeClient, r.mode.namespace, r.mode.name, r.mode.shards); err != nil {
				return err
			}
		}
		return shards.Run(ctx)
	})
}

// runWarmStandby (the default) builds the controllers and syncs the informers before
// and during the election, so that leading only starts the workers: the election runs
// a term of workers while leading and releases the Lease after the workers drained;
// the informers stop after that. leaderelection owns the release order.
func (r *replica) runWarmStandby(ctx context.Context, process *lifecycle) error {
	reads, err := r.builder.Config("takeover-barrier")
	if err != nil {
		return err
	}
	metadataClient, err := metadata.NewForConfig(reads)
	if err != nil {
		return fmt.Errorf("building the takeover barrier's client: %w", err)
	}
	r.manager.takeover = newTakeoverBarrier(metadataClient, r.mode.timings.RetryPeriod)
	return process.run(ctx, "election", func(ctx context.Context) error {
		return campaignUntilShutdown(ctx, func(ctx context.Context) error {
			// Each campaign builds the controllers anew: a lost term's shut its
			// queues down.
			standby := newLifecycle("standby")
			built := r.manager.addStages(standby)
			return standby.run(ctx, "election", func(ctx context.Context) error {
				return r.campaign(ctx, func(ctx context.Context) error {
					return r.manager.takeOver(ctx, built)
				})
			})
		})
	})
}

// runColdStandby (--leader-elect-warm-standby=false) only campaigns: the election runs
// a whole term (informers, then controllers, see controllerManager.run) while leading
// and releases the Lease after the term ended.
func (r *replica) runColdStandby(ctx context.Context, process *lifecycle) error {
	return process.run(ctx, "election", func(ctx context.Context) error {
		return campaignUntilShutdown(ctx, func(ctx context.Context) error {
			return r.campaign(ctx, r.manager.run)
		})
	})
}

// campaignUntilShutdown campaigns again each time a term lost the Lease, until ctx is
// cancelled: a lost Lease makes this replica a standby, not an exit. A term whose
// workers did not stop in time ends the process instead (its error is returned).
func campaignUntilShutdown(ctx context.Context, campaignOnce func(ctx context.Context) error) error {
	for {
		err := campaignOnce(ctx)
		if !errors.Is(err, leaderelection.ErrLeaseLost) || errors.Is(err, leaderelection.ErrControllersStillRunning) {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		klog.FromContext(ctx).Info("Standing by again: the lost term's controllers drained")
	}
}

// campaign joins the election for the mode's Lease and runs term, while watching for
// kube-controller-manager running our controllers too, while leading.
func (r *replica) campaign(ctx context.Context, term func(context.Context) error) error {
	client, leaseWatch, err := r.mode.electionClients(r.cfg.RESTConfig, "leader-election")
	if err != nil {
		return err
	}
	election := r.status.election
	election.joined(r.mode.identity)
	r.ready.SetStandby()
	config := r.mode.election(client)
	config.EventRecorder = r.events.Recorder(eventComponent)
	config.WatchDog, config.Fence, config.Observe = r.watchdog, r.mode.fence, election.observe
	// A standby watches the Lease, so that it tries to take it the moment it expires.
	config.LeaseWatch = leaseWatch
	return leaderelection.Run(ctx, config, whileWatchingUpstream(r.upstream, term))
}

// enabledAndDisabled returns the enabled controllers and the registered ones that are
// not, each sorted, for /statusz.
func enabledAndDisabled(reg *controllers.Registry, enabledNames []string) (enabled, disabled []string) {
	on := sets.New(enabledNames...)
	for _, name := range reg.Names() {
		if !on.Has(name) {
			disabled = append(disabled, name)
		}
	}
	sort.Strings(disabled)
	return sets.List(on), disabled
}

// controllerServiceAccounts maps every registered controller to its ServiceAccount.
func controllerServiceAccounts(reg *controllers.Registry) map[string]string {
	accounts := map[string]string{}
	for _, d := range reg.Descriptors() {
		accounts[d.Name] = d.ServiceAccount()
	}
	return accounts
}
