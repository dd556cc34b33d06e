package app

import (
	"context"
	"fmt"
	"net/http"
	"os"
	goruntime "runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/server/flagz"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/app/clients"
	"github.com/mini-kcm/mini-kcm/app/serving"
	"github.com/mini-kcm/mini-kcm/caches/cachetrim"
	"github.com/mini-kcm/mini-kcm/caches/reconnect"
	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/handover"
	"github.com/mini-kcm/mini-kcm/leaderelection"
	"github.com/mini-kcm/mini-kcm/options"
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
	// reconnect holds the informers' requests while the apiserver is unreachable.
	reconnect *reconnect.Gate
	// connections follows the connection of the informers started last.
	connections atomic.Pointer[reconnect.Informers]
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
	r.builder = clients.Builder{Base: cfg.RESTConfig, UserAgent: userAgent, Fence: mode.fence, Logger: logger,
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
	// The informers ride out an unreachable apiserver at the gate instead of in
	// client-go's growing backoff, and every informer client built from now on goes
	// through it. It asks /readyz on the probe's client.
	r.reconnect = reconnect.NewGate(reconnect.ReadyzProbe(r.probeClient.Discovery().RESTClient()))
	r.builder.Reconnect = r.reconnect

	// A worker wedged in one sync fails /livez and /healthz, naming controller and key.
	syncs := &controllers.InFlightSyncs{Threshold: cfg.ControllerSyncStuckThreshold}
	if mode.run != withoutElection {
		// The watchdog fails /healthz for a leader whose renewal loop stopped trying:
		// it is wedged, and the kubelet's liveness probe should restart it
		// (kubernetes#70819). A leader paused by an unreachable apiserver is healthy.
		r.watchdog = leaderelection.NewWatchdog(watchdogTolerance)
	}
	r.status = &replicaStatus{ready: r.ready, mode: mode, connections: &r.connections}
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
		connections:     &r.connections,
		reconnect:       r.reconnect,
		fence:           mode.fence,
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
		r.checkAPIServerVersion(klog.FromContext(ctx))
		var probing sync.WaitGroup
		probing.Go(func() { r.probe.Run(probeCtx, apiServerProbeInterval) })
		return probing.Wait, nil
	})
	// Before any informer starts, and stopped after they all did.
	process.add("informers' reconnect gate", func(ctx context.Context) (func(), error) {
		var running sync.WaitGroup
		running.Go(func() { r.reconnect.Run(ctx) })
		return running.Wait, nil
	})
	return process
}

// checkAPIServerVersion warns, at error severity so that log filters keep it, when the
// apiserver's version is outside the range mini-kcm is tested against
// (options.CheckAPIServerVersion). A warning, not a refusal: a newer apiserver is within
// Kubernetes' skew policy, and refusing would stop the controllers at the moment a
// control-plane upgrade needs them.
func (r *replica) checkAPIServerVersion(logger klog.Logger) {
	info, err := r.probeClient.Discovery().ServerVersion()
	if err != nil {
		logger.Info("Warning: could not read the apiserver's version", "err", err)
		return
	}
	emulated := info.EmulationMajor + "." + info.EmulationMinor
	if problem := options.CheckAPIServerVersion(*info); problem != "" {
		logger.Error(nil, "WARNING: "+problem, "apiserver", info.GitVersion, "emulating", emulated, "supported", options.SupportedAPIServers())
		return
	}
	logger.Info("The apiserver's version is supported", "apiserver", info.GitVersion, "emulating", emulated,
		"supported", options.SupportedAPIServers())
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
