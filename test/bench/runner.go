package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/mini-kcm/mini-kcm/controllers/all"
	"github.com/mini-kcm/mini-kcm/test/controlplane"
)

// Config configures Run.
type Config struct {
	// Binaries maps each implementation to its binary.
	Binaries map[Implementation]string
	// Implementations run in this order for every workload.
	Implementations []Implementation
	// Settings are given to both controller managers; LiftedSettings replace them in
	// the ceiling workload, RaisedSettings in the endpoints-raised workload.
	Settings, LiftedSettings, RaisedSettings Settings
	// Sizes are the workload sizes, already scaled.
	Sizes Sizes
	// Scale is the factor Sizes were scaled by, for the report.
	Scale float64
	// Nodes is the number of fake nodes of every control plane.
	Nodes int
	// Workloads are the names of the workloads to run, in order; empty runs all.
	Workloads []string
	// CeilingWorkers is the number of goroutines of the plain client in the ceiling
	// workload.
	CeilingWorkers int
	// PhaseTimeout bounds every phase's wait for convergence.
	PhaseTimeout time.Duration
	// LogDir receives the controller managers' logs, one directory per run.
	LogDir string
	// Logf receives progress messages.
	Logf func(format string, args ...any)
	// SettleLoad, when positive, makes every run wait (up to loadSettleTimeout) for the
	// 1-minute load average to fall to it before starting, so that the previous run's
	// own work, which decays out of the average within a minute or two, is not taken
	// for a busy machine. The run records the load it started at either way.
	SettleLoad float64
}

// loadSettleTimeout bounds a run's wait for the load average to fall to
// Config.SettleLoad: a 1-minute average decays by e every minute with the machine idle,
// so a load the bench's own previous run left (about the number of cores) is gone in
// under two; one that lasts longer comes from something else on the machine.
const loadSettleTimeout = 5 * time.Minute

// memorySampleInterval is how often a run samples the controller manager's RssAnon and
// RssFile for their peaks: reading /proc costs microseconds, and allocation peaks last
// longer than this.
const memorySampleInterval = 200 * time.Millisecond

// benchNamespace holds every workload's objects.
const benchNamespace = "bench"

// WorkloadNames lists the workloads in their default order.
func WorkloadNames() []string {
	var names []string
	for _, w := range allWorkloads() {
		names = append(names, w.name)
	}
	return names
}

// Run runs every selected workload under every implementation, one after the other,
// each on a fresh control plane. A failed run is recorded in the report (see
// Report.Failed) and the benchmark goes on. The error is for an unknown workload, or
// for ctx ending, in which case the report holds what ran so far.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	var selected []workload
	for _, w := range allWorkloads() {
		if len(cfg.Workloads) == 0 && !w.optIn || slices.Contains(cfg.Workloads, w.name) {
			selected = append(selected, w)
		}
	}
	for _, name := range cfg.Workloads {
		if !slices.Contains(WorkloadNames(), name) {
			return nil, fmt.Errorf("unknown workload %q; known: %s", name, strings.Join(WorkloadNames(), ", "))
		}
	}
	report := &Report{
		Started:        time.Now(),
		Commit:         gitDescribe(),
		Machine:        Machine{CPUs: runtime.NumCPU(), LoadAverageStart: loadAverage()},
		Scale:          cfg.Scale,
		Sizes:          cfg.Sizes,
		Settings:       cfg.Settings,
		LiftedSettings: cfg.LiftedSettings,
		RaisedSettings: cfg.RaisedSettings,
		Controllers:    benchedControllers(),
		BinaryBytes:    map[Implementation]int64{},
	}
	for _, impl := range cfg.Implementations {
		if fi, err := os.Stat(cfg.Binaries[impl]); err == nil {
			report.BinaryBytes[impl] = fi.Size()
		}
	}
	for _, w := range selected {
		result := WorkloadResult{Name: w.name, Description: w.description(cfg.Sizes)}
		for _, impl := range cfg.Implementations {
			if ctx.Err() != nil {
				return report, ctx.Err()
			}
			cfg.Logf("== %s under %s (load average %s)", w.name, impl, formatLoad(loadAverage()))
			run := runWorkload(ctx, cfg, w, impl)
			if run.Error != "" {
				cfg.Logf("!! %s under %s failed: %s", w.name, impl, run.Error)
			}
			result.Runs = append(result.Runs, run)
		}
		report.Workloads = append(report.Workloads, result)
	}
	report.Finished = time.Now()
	report.Machine.LoadAverageEnd = loadAverage()
	return report, nil
}

// RunLogDir is where a run of workload under impl keeps its logs, in a Config's LogDir.
func RunLogDir(logDir, workload string, impl Implementation) string {
	return filepath.Join(logDir, workload+"-"+string(impl))
}

// runWorkload runs one workload under one implementation on a fresh control plane.
func runWorkload(ctx context.Context, cfg Config, w workload, impl Implementation) RunResult {
	settings := cfg.Settings
	switch {
	case w.lifted:
		settings = cfg.LiftedSettings
	case w.raised:
		settings = cfg.RaisedSettings
	}
	waitForLoad(ctx, cfg)
	run := RunResult{Implementation: impl, Settings: settings, LoadAverage: loadAverage()}
	if err := runPhases(ctx, cfg, w, impl, &run); err != nil {
		run.Error = err.Error()
	}
	return run
}

func runPhases(ctx context.Context, cfg Config, w workload, impl Implementation, run *RunResult) error {
	logDir := RunLogDir(cfg.LogDir, w.name, impl)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return err
	}
	cp, err := controlplane.Start(ctx, controlplane.Options{
		Scheduler: true,
		KWOK:      true,
		Nodes:     cfg.Nodes,
		Logf:      func(format string, args ...any) { cfg.Logf("   "+format, args...) },
	})
	if err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	defer func() {
		// The control plane's own logs help explain a slow or failed run.
		for _, name := range []string{controlplane.KubeAPIServer, controlplane.KubeScheduler, controlplane.KWOK} {
			_ = copyFile(cp.LogPath(name), filepath.Join(logDir, name+".log"))
		}
		if err := cp.Stop(); err != nil {
			cfg.Logf("   stopping the control plane: %v", err)
		}
	}()

	e, err := newEnv(ctx, cfg, cp, run)
	if err != nil {
		return err
	}
	e.logDir = logDir
	defer e.stopInformers()
	if w.prepare != nil {
		if err := w.prepare(ctx, e); err != nil {
			return err
		}
	}

	begin := time.Now()
	controllers := w.controllers
	switch {
	case w.everyController:
		controllers = strings.Join(all.Registry().Names(), ",")
	case controllers == "":
		controllers = benchedControllers()
	}
	e.kcm, err = startControllerManager(cp, impl, cfg.Binaries[impl], controllers, run.Settings, logDir)
	if err != nil {
		return err
	}
	defer e.kcm.stop()
	// The split of the peak RSS into RssAnon and RssFile is sampled, as the kernel keeps
	// no high-water mark of either; the sampler stops before the totals are read.
	var peaks memoryPeaks
	samplerCtx, stopSampler := context.WithCancel(ctx)
	var sampler sync.WaitGroup
	sampler.Go(func() { sampleMemory(samplerCtx, memorySampleInterval, e.kcm.usage, &peaks) })
	defer func() {
		stopSampler()
		sampler.Wait()
	}()
	if e.kcm.debugURL != "" {
		cfg.Logf("   %s serves profiles at %s", impl, e.kcm.debugURL)
	}
	if err := waitUntilWorking(ctx, e.client, e.kcm, controllers, 2*time.Minute); err != nil {
		return err
	}
	start := Phase{Name: "start", ConvergeSeconds: time.Since(begin).Seconds()}
	if err := e.finishPhase(ctx, &start, processUsage{}); err != nil {
		return err
	}

	runErr := w.run(ctx, e)
	// Totals are recorded even for a failed run: they say how far it got.
	stopSampler()
	sampler.Wait()
	if usage, err := e.kcm.usage(); err == nil {
		peaks.observe(usage)
		run.CPUSeconds = usage.CPU.Seconds()
		run.PeakRSSBytes = usage.PeakRSS
	}
	run.PeakAnonRSSBytes, run.PeakFileRSSBytes = peaks.peaks()
	if _, err := e.collect(); err != nil && runErr == nil {
		runErr = err
	}
	run.Requests = countRequests(e.allRequests)
	return runErr
}

// env is what a workload works with: the control plane, an unthrottled client, caches
// of the benchmark namespace to check convergence against, and the controller manager
// being measured.
type env struct {
	cfg    Config
	cp     *controlplane.ControlPlane
	logDir string
	client kubernetes.Interface
	kcm    *controllerManager
	run    *RunResult
	audit  *auditCursor
	// allRequests are the controller manager's requests since it started.
	allRequests []request

	pods           corelisters.PodNamespaceLister
	replicaSets    appslisters.ReplicaSetNamespaceLister
	deployments    appslisters.DeploymentNamespaceLister
	endpoints      corelisters.EndpointsNamespaceLister
	endpointSlices discoverylisters.EndpointSliceNamespaceLister
	stopInformers  func()
	// lastChange is when the benchmark's caches last saw an object change (Unix
	// nanoseconds): the time a phase converged is that of the change that completed it,
	// not of the poll that noticed.
	lastChange atomic.Int64

	// ceilingPodsPerSecond is the plain client's pod creation rate, measured by the
	// ceiling workload before the controller manager starts.
	ceilingPodsPerSecond float64
	// deploymentGenerations maps a Deployment's name to the generation the
	// benchmark's last patch of it produced.
	deploymentGenerations sync.Map
}

func newEnv(ctx context.Context, cfg Config, cp *controlplane.ControlPlane, run *RunResult) (*env, error) {
	restConfig := cp.RESTConfig()
	// The benchmark's own requests must never be what a phase waits for.
	restConfig.QPS, restConfig.Burst = -1, 0
	restConfig.UserAgent = "mini-kcm-bench"
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating namespace %s: %w", benchNamespace, err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(benchNamespace))
	e := &env{
		cfg:            cfg,
		cp:             cp,
		client:         client,
		run:            run,
		audit:          &auditCursor{path: cp.AuditLogPath()},
		pods:           factory.Core().V1().Pods().Lister().Pods(benchNamespace),
		replicaSets:    factory.Apps().V1().ReplicaSets().Lister().ReplicaSets(benchNamespace),
		deployments:    factory.Apps().V1().Deployments().Lister().Deployments(benchNamespace),
		endpoints:      factory.Core().V1().Endpoints().Lister().Endpoints(benchNamespace),
		endpointSlices: factory.Discovery().V1().EndpointSlices().Lister().EndpointSlices(benchNamespace),
	}
	changed := func() { e.lastChange.Store(time.Now().UnixNano()) }
	for _, informer := range []cache.SharedIndexInformer{
		factory.Core().V1().Pods().Informer(), factory.Apps().V1().ReplicaSets().Informer(),
		factory.Apps().V1().Deployments().Informer(), factory.Core().V1().Endpoints().Informer(),
		factory.Discovery().V1().EndpointSlices().Informer(),
	} {
		if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { changed() },
			UpdateFunc: func(any, any) { changed() },
			DeleteFunc: func(any) { changed() },
		}); err != nil {
			return nil, err
		}
	}
	stop := make(chan struct{})
	e.stopInformers = func() {
		close(stop)
		factory.Shutdown()
	}
	factory.Start(stop)
	for typ, synced := range factory.WaitForCacheSync(ctx.Done()) {
		if !synced {
			e.stopInformers()
			return nil, fmt.Errorf("benchmark cache of %v did not sync", typ)
		}
	}
	return e, nil
}

// collect returns the controller manager's requests since the last call and adds them
// to the run's totals.
func (e *env) collect() ([]request, error) {
	requests, err := e.audit.next(e.kcm.user)
	e.allRequests = append(e.allRequests, requests...)
	return requests, err
}

// phase measures one step: it takes the controller manager's CPU time, calls act,
// waits until converged returns nil, then waits for the controller manager to go
// quiet so that trailing writes (final status updates) count towards the phase.
func (e *env) phase(ctx context.Context, p Phase, act func(ctx context.Context) error, converged func() error) error {
	e.cfg.Logf("   %s: %d objects", p.Name, p.Objects)
	before, err := e.kcm.usage()
	if err != nil {
		return err
	}
	// Requests before the phase (the tail of the previous one) are not the phase's.
	if _, err := e.collect(); err != nil {
		return err
	}
	begin := time.Now()
	if err := act(ctx); err != nil {
		return fmt.Errorf("%s: %w", p.Name, err)
	}
	if p.FromLastChange {
		begin = time.Now()
	}
	if err := e.waitConverged(ctx, p.Name, converged); err != nil {
		return err
	}
	// The poll noticed up to 100ms late; the last change it saw is when it happened.
	end := time.Now()
	if last := time.Unix(0, e.lastChange.Load()); last.After(begin) && last.Before(end) {
		end = last
	}
	p.ConvergeSeconds = end.Sub(begin).Seconds()
	return e.finishPhase(ctx, &p, before)
}

// waitConverged polls converged against the benchmark's caches.
func (e *env) waitConverged(ctx context.Context, name string, converged func() error) error {
	deadline := time.Now().Add(e.cfg.PhaseTimeout)
	lastLog := time.Now()
	for {
		if e.kcm != nil {
			if err := e.kcm.exited(); err != nil {
				return err
			}
		}
		err := converged()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not converged after %v: %w", name, e.cfg.PhaseTimeout, err)
		}
		if time.Since(lastLog) > 30*time.Second {
			e.cfg.Logf("   %s: waiting, %v", name, err)
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// quietPeriod is how long a controller manager must make no write for a phase to
// end; maxSettle bounds the wait.
const (
	quietPeriod = 2 * time.Second
	maxSettle   = 20 * time.Second
)

// finishPhase waits until the controller manager has gone quiet, then records the
// phase's CPU time, memory and requests.
func (e *env) finishPhase(ctx context.Context, p *Phase, before processUsage) error {
	var requests []request
	settleStart := time.Now()
	lastWrite := time.Now()
	for {
		batch, err := e.collect()
		if err != nil {
			return err
		}
		requests = append(requests, batch...)
		if slices.ContainsFunc(batch, func(r request) bool { return isWrite(r.Verb) }) {
			lastWrite = time.Now()
		}
		if time.Since(lastWrite) >= quietPeriod || time.Since(settleStart) >= maxSettle {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	after, err := e.kcm.usage()
	if err != nil {
		return err
	}
	p.CPUSeconds = (after.CPU - before.CPU).Seconds()
	p.PeakRSSBytes = after.PeakRSS
	p.Requests = countRequests(requests)
	if pods, seconds := creationRate(requests); pods >= 100 && seconds > 0 {
		p.PodsPerSecond = float64(pods) / seconds
	}
	e.run.Phases = append(e.run.Phases, *p)
	e.cfg.Logf("   %s: converged in %.1fs, cpu %.2fs, peak rss %.0f MiB, %d writes, %d reads",
		p.Name, p.ConvergeSeconds, p.CPUSeconds, float64(p.PeakRSSBytes)/(1<<20), p.Requests.Writes, p.Requests.Reads)
	return nil
}

// waitForLoad waits until the 1-minute load average is at most cfg.SettleLoad, for at
// most loadSettleTimeout; it logs what it waited for.
func waitForLoad(ctx context.Context, cfg Config) {
	if cfg.SettleLoad <= 0 || loadAverage()[0] <= cfg.SettleLoad {
		return
	}
	start := time.Now()
	cfg.Logf("   waiting for the load average (%.2f) to fall to %g", loadAverage()[0], cfg.SettleLoad)
	for loadAverage()[0] > cfg.SettleLoad && time.Since(start) < loadSettleTimeout {
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
	}
	cfg.Logf("   load average %.2f after %s", loadAverage()[0], time.Since(start).Round(time.Second))
}

// loadAverage reads the 1, 5 and 15 minute load averages; zeros if unavailable.
func loadAverage() [3]float64 {
	var avg [3]float64
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return avg
	}
	fields := strings.Fields(string(data))
	for i := range min(3, len(fields)) {
		avg[i], _ = strconv.ParseFloat(fields[i], 64)
	}
	return avg
}

func formatLoad(avg [3]float64) string {
	return fmt.Sprintf("%.2f %.2f %.2f", avg[0], avg[1], avg[2])
}

// gitDescribe names the checked-out commit, or "unknown" outside a git checkout.
func gitDescribe() string {
	out, err := exec.Command("git", "describe", "--tags", "--always", "--dirty").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	return os.WriteFile(to, data, 0o644)
}
