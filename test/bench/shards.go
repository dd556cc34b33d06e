package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/leaderelection"
	"github.com/mini-kcm/mini-kcm/options"
	"github.com/mini-kcm/mini-kcm/sharding"
	"github.com/mini-kcm/mini-kcm/test/controlplane"
)

// ShardConfig configures RunShards, the benchmark of sharded mini-kcm (issue #17):
// the same pods in the same tenant namespaces under one leader and under replicas that
// share the namespaces' shards.
type ShardConfig struct {
	// Binary is the mini-kcm binary.
	Binary string
	// Namespaces is the number of tenant namespaces; each gets one ReplicaSet.
	Namespaces int
	// MemoryPods is the number of pods of the memory runs, spread evenly over the
	// namespaces.
	MemoryPods int
	// Replicas and Shards are the sharded memory run's replicas and --shards.
	Replicas, Shards int
	// ThroughputPods is the number of pods of each throughput run, ThroughputShards the
	// --shards of each (all with Replicas replicas).
	ThroughputPods   int
	ThroughputShards []int
	// Scenarios are the scenarios to run, in order: ShardScenarios names them.
	Scenarios []string
	// Settings are every replica's rate limits and worker counts.
	Settings Settings
	// Controllers is every replica's --controllers; empty runs mini-kcm's default.
	Controllers string
	// RebalancePeriod is every replica's --shard-rebalance-period.
	RebalancePeriod time.Duration
	// Timings are every replica's leader election timings.
	Timings leaderelection.Timings
	// ProfileSeconds is the length of the apiserver CPU profile taken during each
	// throughput run; 0 takes none.
	ProfileSeconds int
	// Seed makes the random namespace names reproducible.
	Seed uint64
	// Scale is the factor the pod counts were scaled by, for the report.
	Scale float64
	// Nodes is the number of fake nodes.
	Nodes int
	// PhaseTimeout bounds every wait.
	PhaseTimeout time.Duration
	// LogDir receives the logs, one directory per run.
	LogDir string
	// Logf receives progress messages.
	Logf func(format string, args ...any)
}

// The scenarios of RunShards.
const (
	ScenarioMemoryTenant = "memory-tenant"
	ScenarioMemoryRandom = "memory-random"
	ScenarioThroughput   = "throughput"
)

// ShardScenarios lists the scenarios in their default order.
func ShardScenarios() []string {
	return []string{ScenarioMemoryTenant, ScenarioMemoryRandom, ScenarioThroughput}
}

// benchLeaseName is the replicas' --leader-elect-resource-name; their Leases live in
// kube-system.
const (
	benchLeaseName      = "mini-kcm-bench"
	benchLeaseNamespace = "kube-system"
)

// RunShards runs the selected scenarios, each configuration on a fresh control plane
// with the ShardedListAndWatch gate. A failed run is recorded in the report and the
// benchmark goes on; the error is for ctx ending.
func RunShards(ctx context.Context, cfg ShardConfig) (*ShardReport, error) {
	report := &ShardReport{
		Started:          time.Now(),
		Commit:           gitDescribe(),
		Machine:          Machine{CPUs: runtime.NumCPU(), LoadAverageStart: loadAverage()},
		Scale:            cfg.Scale,
		Namespaces:       cfg.Namespaces,
		MemoryPods:       cfg.MemoryPods,
		ThroughputPods:   cfg.ThroughputPods,
		Replicas:         cfg.Replicas,
		Shards:           cfg.Shards,
		Settings:         cfg.Settings,
		RebalancePeriod:  cfg.RebalancePeriod.String(),
		RebalanceDefault: strconv.FormatFloat(options.NewShardingOptions().RebalanceThreshold, 'g', -1, 64),
		Controllers:      cfg.Controllers,
		LeaseDuration:    cfg.Timings.LeaseDuration.String(),
		RenewDeadline:    cfg.Timings.RenewDeadline.String(),
		RetryPeriod:      cfg.Timings.RetryPeriod.String(),
	}
	for _, scenario := range cfg.Scenarios {
		switch scenario {
		case ScenarioMemoryTenant, ScenarioMemoryRandom:
			naming := "tenant"
			if scenario == ScenarioMemoryRandom {
				naming = "random"
			}
			namespaces := namespaceNames(naming, cfg.Namespaces, cfg.Seed)
			m := MemoryComparison{Naming: naming, Namespaces: namespaces}
			for _, layout := range []struct{ replicas, shards int }{{1, 1}, {cfg.Replicas, cfg.Shards}} {
				if ctx.Err() != nil {
					return report, ctx.Err()
				}
				name := fmt.Sprintf("memory-%s-%dx%d", naming, layout.replicas, layout.shards)
				cfg.Logf("== %s (load average %s)", name, formatLoad(loadAverage()))
				var run MemoryRun
				retryOnce(ctx, cfg, name, &run.FirstAttemptError, func(name string) error {
					run = MemoryRun{Replicas: layout.replicas, Shards: layout.shards, LoadAverage: loadAverage()}
					return runMemory(ctx, cfg, name, namespaces, &run)
				}, func(err error) { run.Error = err.Error() })
				m.Runs = append(m.Runs, run)
			}
			report.Memory = append(report.Memory, m)
		case ScenarioThroughput:
			namespaces := namespaceNames("tenant", cfg.Namespaces, cfg.Seed)
			for _, n := range cfg.ThroughputShards {
				if ctx.Err() != nil {
					return report, ctx.Err()
				}
				name := fmt.Sprintf("throughput-%dx%d", cfg.Replicas, n)
				cfg.Logf("== %s (load average %s)", name, formatLoad(loadAverage()))
				var run ThroughputRun
				retryOnce(ctx, cfg, name, &run.FirstAttemptError, func(name string) error {
					run = ThroughputRun{Replicas: cfg.Replicas, Shards: n, LoadAverage: loadAverage()}
					return runThroughput(ctx, cfg, name, namespaces, &run)
				}, func(err error) { run.Error = err.Error() })
				report.Throughput = append(report.Throughput, run)
			}
		default:
			return report, fmt.Errorf("unknown scenario %q; known: %s", scenario, strings.Join(ShardScenarios(), ", "))
		}
	}
	report.Finished = time.Now()
	report.Machine.LoadAverageEnd = loadAverage()
	return report, nil
}

// retryOnce runs attempt, and once more on a fresh control plane if it failed: on a
// shared 2-core machine etcd now and then stalls for longer than a renew deadline, and
// a replica that cannot renew a shard's Lease exits. The first failure is kept in
// firstError (set after the retry's attempt reset the run), the last one passed to
// failed.
func retryOnce(ctx context.Context, cfg ShardConfig, name string, firstError *string, attempt func(name string) error, failed func(error)) {
	err := attempt(name)
	if err == nil || ctx.Err() != nil {
		if err != nil {
			failed(err)
		}
		return
	}
	cfg.Logf("!! %s failed, trying once more: %s", name, firstLine(err.Error()))
	first := err.Error()
	err = attempt(name + "-retry")
	*firstError = first
	if err != nil {
		cfg.Logf("!! %s failed again: %s", name, firstLine(err.Error()))
		failed(err)
	}
}

// namespaceNames returns n namespace names: tenant-000 … (which FNV-1a crowds into a
// sliver of the hash space) or random ones of ten letters (which it spreads).
func namespaceNames(naming string, n int, seed uint64) []string {
	names := make([]string, n)
	random := rand.New(rand.NewPCG(seed, seed))
	for i := range names {
		if naming == "tenant" {
			names[i] = fmt.Sprintf("tenant-%03d", i)
			continue
		}
		b := make([]byte, 10)
		for j := range b {
			b[j] = byte('a' + random.IntN(26))
		}
		names[i] = string(b)
	}
	return names
}

// runMemory starts the replicas before any tenant exists (so the coordinator's first
// cut sees no pods, as in a cluster that grows), creates the tenants' ReplicaSets, waits
// until every pod is Ready and the plan has settled, and then reads what each replica
// caches, its memory and its CPU.
func runMemory(ctx context.Context, cfg ShardConfig, name string, namespaces []string, run *MemoryRun) error {
	c, err := startShardCluster(ctx, cfg, name, run.Replicas, run.Shards)
	if err != nil {
		return err
	}
	defer c.stop()
	if err := c.waitSettled(ctx); err != nil {
		return err
	}
	idle := map[string]int64{}
	for _, r := range c.replicas {
		u, err := readProcessUsage(r.process.Pid())
		if err != nil {
			return err
		}
		idle[r.name] = u.RSS
	}
	podsEach := cfg.MemoryPods / len(namespaces)
	begin := time.Now()
	c.timeline.setOrigin(begin)
	if err := c.createTenants(ctx, namespaces, podsEach); err != nil {
		return err
	}
	end, err := c.waitReplicaSets(ctx, namespaces, podsEach)
	if err != nil {
		return err
	}
	run.Pods = podsEach * len(namespaces)
	run.CreateReadySeconds = end.Sub(begin).Seconds()
	cfg.Logf("   %d pods Ready in %.1fs", run.Pods, run.CreateReadySeconds)
	if err := c.waitStable(ctx); err != nil {
		return err
	}
	run.Epoch, run.Handovers = c.timeline.summary()
	if run.Replicas > 1 {
		if err := c.checkBalance(ctx, namespaces, run); err != nil {
			return err
		}
	}
	if err := c.measureReplicas(ctx, &run.PerReplica); err != nil {
		return err
	}
	for i := range run.PerReplica {
		run.PerReplica[i].IdleRSSBytes = idle[run.PerReplica[i].Name]
	}
	return nil
}

// runThroughput starts the replicas, creates the tenants with one pod each and waits
// until the plan settled on them, then scales every ReplicaSet up at once and measures
// how fast the pods are created and become Ready, and the CPU every process spent.
func runThroughput(ctx context.Context, cfg ShardConfig, name string, namespaces []string, run *ThroughputRun) error {
	c, err := startShardCluster(ctx, cfg, name, run.Replicas, run.Shards)
	if err != nil {
		return err
	}
	defer c.stop()
	if err := c.waitSettled(ctx); err != nil {
		return err
	}
	c.timeline.setOrigin(time.Now())
	if err := c.createTenants(ctx, namespaces, 1); err != nil {
		return err
	}
	if _, err := c.waitReplicaSets(ctx, namespaces, 1); err != nil {
		return err
	}
	if err := c.waitStable(ctx); err != nil {
		return err
	}
	epochBefore, _ := c.timeline.summary()

	podsEach := cfg.ThroughputPods / len(namespaces)
	run.Pods = (podsEach - 1) * len(namespaces)
	audit := &auditCursor{path: c.cp.AuditLogPath()}
	if _, err := audit.next(c.users()...); err != nil {
		return err
	}
	before, err := c.usage()
	if err != nil {
		return err
	}
	var profile chan profileResult
	if cfg.ProfileSeconds > 0 {
		profile = make(chan profileResult, 1)
		go func() { profile <- c.profileAPIServer(ctx, cfg.ProfileSeconds) }()
	}
	begin := time.Now()
	if err := c.scaleTenants(ctx, namespaces, podsEach); err != nil {
		return err
	}
	end, err := c.waitReplicaSets(ctx, namespaces, podsEach)
	if err != nil {
		return err
	}
	wall := end.Sub(begin)
	after, err := c.usage()
	if err != nil {
		return err
	}
	run.CreateReadySeconds = wall.Seconds()
	run.PodsPerSecond = float64(run.Pods) / wall.Seconds()
	run.CPU = cpuShares(before, after, wall)
	time.Sleep(time.Second) // the audit log has a request once its response was sent
	requests, err := audit.next(c.users()...)
	if err != nil {
		return err
	}
	if pods, seconds := creationRate(requests); pods > 0 && seconds > 0 {
		run.CreatesPerSecond = float64(pods) / seconds
		run.CreatesByReplica = map[string]int{}
		run.FailedCreates, run.CountedOutcomes = map[string]int{}, true
		for _, r := range requests {
			if r.Verb == "create" && r.Resource == "pods" {
				run.CreatesByReplica[r.User]++
				if r.Code >= 300 {
					run.FailedCreates[strconv.Itoa(r.Code)]++
				}
			}
			if r.Verb == "delete" && r.Resource == "pods" {
				run.PodDeletes++
			}
		}
	}
	if epoch, _ := c.timeline.summary(); epoch != epochBefore {
		run.Note = fmt.Sprintf("the plan moved from epoch %d to %d during the run", epochBefore, epoch)
	}
	run.Epoch = epochBefore
	if profile != nil {
		p := <-profile
		run.APIServerProfile, run.APIServerProfileTop = p.path, p.top
		if p.err != nil {
			run.APIServerProfileError = p.err.Error()
		}
	}
	cfg.Logf("   %d pods created and Ready in %.1fs: %.0f pods/s (creates %.0f/s); CPU cores: %s",
		run.Pods, run.CreateReadySeconds, run.PodsPerSecond, run.CreatesPerSecond, formatShares(run.CPU))
	return nil
}

// shardCluster is one control plane with its mini-kcm replicas.
type shardCluster struct {
	cfg      ShardConfig
	cp       *controlplane.ControlPlane
	client   kubernetes.Interface
	metadata metadata.Interface
	shards   int
	logDir   string
	replicas []*benchReplica
	timeline *leaseTimeline
	// scraper reads the replicas' /metrics and /debug/pprof as a user in
	// system:masters.
	scraper *http.Client

	replicaSets   appslisters.ReplicaSetLister
	rsLastChange  atomicTime
	stopInformers func()
}

// benchReplica is one mini-kcm process with a user of its own.
type benchReplica struct {
	name    string
	port    int
	process *controlplane.Process
}

func startShardCluster(ctx context.Context, cfg ShardConfig, name string, replicas, shardCount int) (_ *shardCluster, err error) {
	logDir := filepath.Join(cfg.LogDir, name)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	cp, err := controlplane.Start(ctx, controlplane.Options{
		Scheduler:          true,
		KWOK:               true,
		Nodes:              cfg.Nodes,
		ExtraAPIServerArgs: []string{"--feature-gates=ShardedListAndWatch=true"},
		Logf:               func(format string, args ...any) { cfg.Logf("   "+format, args...) },
	})
	if err != nil {
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	c := &shardCluster{cfg: cfg, cp: cp, shards: shardCount, logDir: logDir, stopInformers: func() {}}
	defer func() {
		if err != nil {
			c.stop()
		}
	}()
	restConfig := cp.RESTConfig()
	restConfig.QPS, restConfig.Burst = -1, 0
	restConfig.UserAgent = "mini-kcm-shard-bench"
	if c.client, err = kubernetes.NewForConfig(restConfig); err != nil {
		return nil, err
	}
	if c.metadata, err = metadata.NewForConfig(restConfig); err != nil {
		return nil, err
	}
	if c.scraper, err = cp.ScrapeClient("bench-scraper"); err != nil {
		return nil, err
	}
	if err := c.startInformers(ctx); err != nil {
		return nil, err
	}
	for i := range replicas {
		r, err := c.startReplica(ctx, fmt.Sprintf("mini-kcm-%d", i))
		if err != nil {
			return nil, err
		}
		c.replicas = append(c.replicas, r)
	}
	cfg.Logf("   %d replicas with --shards=%d started", replicas, shardCount)
	return c, nil
}

func (c *shardCluster) startReplica(_ context.Context, name string) (*benchReplica, error) {
	kubeconfig, err := c.cp.AddUser(name, "system:masters")
	if err != nil {
		return nil, err
	}
	port, err := controlplane.FreePort()
	if err != nil {
		return nil, err
	}
	serving, err := c.cp.ServingFlags(name, port, kubeconfig)
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=true",
		"--leader-elect-resource-namespace=" + benchLeaseNamespace,
		"--leader-elect-resource-name=" + benchLeaseName,
		"--shards=" + strconv.Itoa(c.shards),
		"--shard-rebalance-period=" + c.cfg.RebalancePeriod.String(),
		"--leader-elect-lease-duration=" + c.cfg.Timings.LeaseDuration.String(),
		"--leader-elect-renew-deadline=" + c.cfg.Timings.RenewDeadline.String(),
		"--leader-elect-retry-period=" + c.cfg.Timings.RetryPeriod.String(),
	}, serving...)
	args = append(args, c.cfg.Settings.args()...)
	if c.cfg.Controllers != "" {
		args = append(args, "--controllers="+c.cfg.Controllers)
	}
	p, err := controlplane.StartProcess(controlplane.ProcessSpec{
		Name:    name,
		Path:    c.cfg.Binary,
		Args:    args,
		LogPath: filepath.Join(c.logDir, name+".log"),
	})
	if err != nil {
		return nil, err
	}
	return &benchReplica{name: name, port: port, process: p}, nil
}

// startInformers watches the Leases of the replicas (the plan's timeline) and the
// tenants' ReplicaSets, whose status says how many of their pods are Ready: the
// benchmark caches no pods itself, which would cost the apiserver and the CPU a
// fourth replica's worth.
func (c *shardCluster) startInformers(ctx context.Context) error {
	c.timeline = newLeaseTimeline(c.shards)
	leaseFactory := informers.NewSharedInformerFactoryWithOptions(c.client, 0, informers.WithNamespace(benchLeaseNamespace))
	if _, err := leaseFactory.Coordination().V1().Leases().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.timeline.observe(leaseFactory.Coordination().V1().Leases().Lister()) },
		UpdateFunc: func(any, any) { c.timeline.observe(leaseFactory.Coordination().V1().Leases().Lister()) },
		DeleteFunc: func(any) { c.timeline.observe(leaseFactory.Coordination().V1().Leases().Lister()) },
	}); err != nil {
		return err
	}
	rsFactory := informers.NewSharedInformerFactory(c.client, 0)
	rsInformer := rsFactory.Apps().V1().ReplicaSets()
	c.replicaSets = rsInformer.Lister()
	changed := func() { c.rsLastChange.store(time.Now()) }
	if _, err := rsInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { changed() },
		UpdateFunc: func(any, any) { changed() },
		DeleteFunc: func(any) { changed() },
	}); err != nil {
		return err
	}
	stop := make(chan struct{})
	c.stopInformers = func() {
		close(stop)
		leaseFactory.Shutdown()
		rsFactory.Shutdown()
	}
	leaseFactory.Start(stop)
	rsFactory.Start(stop)
	for _, synced := range []map[reflect.Type]bool{leaseFactory.WaitForCacheSync(ctx.Done()), rsFactory.WaitForCacheSync(ctx.Done())} {
		for typ, ok := range synced {
			if !ok {
				return fmt.Errorf("benchmark cache of %v did not sync", typ)
			}
		}
	}
	return nil
}

// stop stops the replicas (SIGTERM: each hands its shards over and exits) and the
// control plane, keeping their logs.
func (c *shardCluster) stop() {
	for _, r := range c.replicas {
		r.process.Stop(10 * time.Second)
	}
	c.stopInformers()
	for _, name := range []string{controlplane.KubeAPIServer, controlplane.KubeScheduler, controlplane.KWOK} {
		_ = copyFile(c.cp.LogPath(name), filepath.Join(c.logDir, name+".log"))
	}
	if err := c.cp.Stop(); err != nil {
		c.cfg.Logf("   stopping the control plane: %v", err)
	}
}

// exited returns an error with the end of its log for a replica that exited.
func (c *shardCluster) exited() error {
	for _, r := range c.replicas {
		if r.process.Exited() {
			return fmt.Errorf("%s exited; end of %s:\n%s", r.name, r.process.LogPath(), controlplane.Tail(r.process.LogPath(), 30))
		}
	}
	return nil
}

func (c *shardCluster) users() []string {
	var users []string
	for _, r := range c.replicas {
		users = append(users, r.name)
	}
	return users
}

// waitFor polls check every 200ms until it returns nil, a replica exits or the phase
// timeout passes.
func (c *shardCluster) waitFor(ctx context.Context, what string, check func() error) error {
	deadline := time.Now().Add(c.cfg.PhaseTimeout)
	for {
		if err := c.exited(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not done after %v: %w", what, c.cfg.PhaseTimeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitSettled waits until every shard of the active plan is held and no handover is
// under way (with one shard: until the single leader holds the Lease).
func (c *shardCluster) waitSettled(ctx context.Context) error {
	return c.waitFor(ctx, "waiting for the shards to be held", c.timeline.settled)
}

// waitStable waits until the plan has settled and stayed the same for two rebalance
// periods: the coordinator weighed the shards at least once more and found no reason
// to cut anew.
func (c *shardCluster) waitStable(ctx context.Context) error {
	if c.shards == 1 {
		return c.waitSettled(ctx)
	}
	for {
		if err := c.waitSettled(ctx); err != nil {
			return err
		}
		epoch, _ := c.timeline.summary()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2*c.cfg.RebalancePeriod + time.Second):
		}
		if now, _ := c.timeline.summary(); now == epoch && c.timeline.settled() == nil {
			return nil
		}
	}
}

// createTenants creates every namespace with one ReplicaSet of podsEach pods.
func (c *shardCluster) createTenants(ctx context.Context, namespaces []string, podsEach int) error {
	labels := map[string]string{"app": "tenant"}
	return parallel(ctx, len(namespaces), 20, func(ctx context.Context, i int) error {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespaces[i]}}
		if _, err := c.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", namespaces[i], err)
		}
		rs := &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: "tenant"},
			Spec: appsv1.ReplicaSetSpec{
				Replicas: ptr.To(int32(podsEach)),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: podTemplate(labels, "1"),
			},
		}
		if _, err := c.client.AppsV1().ReplicaSets(namespaces[i]).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating the ReplicaSet of %s: %w", namespaces[i], err)
		}
		return nil
	})
}

// scaleTenants sets every tenant's ReplicaSet to podsEach replicas.
func (c *shardCluster) scaleTenants(ctx context.Context, namespaces []string, podsEach int) error {
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, podsEach)
	return parallel(ctx, len(namespaces), 20, func(ctx context.Context, i int) error {
		_, err := c.client.AppsV1().ReplicaSets(namespaces[i]).Patch(ctx, "tenant", types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
}

// waitReplicaSets waits until every tenant's ReplicaSet has podsEach Ready pods for
// its current generation, and returns when the benchmark's cache saw the change that
// completed it.
func (c *shardCluster) waitReplicaSets(ctx context.Context, namespaces []string, podsEach int) (time.Time, error) {
	err := c.waitFor(ctx, "waiting for the tenants' pods", func() error {
		done, ready := 0, 0
		for _, ns := range namespaces {
			rs, err := c.replicaSets.ReplicaSets(ns).Get("tenant")
			if err != nil {
				continue
			}
			ready += int(rs.Status.ReadyReplicas)
			if rs.Status.ObservedGeneration >= rs.Generation && int(rs.Status.Replicas) == podsEach && int(rs.Status.ReadyReplicas) == podsEach {
				done++
			}
		}
		if done < len(namespaces) {
			return fmt.Errorf("%w (%d of %d pods Ready)", progress("ReplicaSets done", done, len(namespaces)), ready, podsEach*len(namespaces))
		}
		return nil
	})
	return c.rsLastChange.load(), err
}

// heldShards returns the shards each replica holds, by the holder identity of every
// shard Lease (with one shard, of the leader Lease) and the identity each replica
// logs when it joins an election: the Leases are the authority, where a replica's
// leader_election_master_status is what it believes.
func (c *shardCluster) heldShards(ctx context.Context) (held map[string][]int, coordinator string, err error) {
	byIdentity := map[string]string{}
	for _, r := range c.replicas {
		id, err := replicaIdentity(r.process.LogPath())
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", r.name, err)
		}
		byIdentity[id] = r.name
	}
	leases, err := c.client.CoordinationV1().Leases(benchLeaseNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, "", err
	}
	held = map[string][]int{}
	for _, l := range leases.Items {
		replica, ok := byIdentity[ptr.Deref(l.Spec.HolderIdentity, "")]
		if !ok {
			continue
		}
		if c.shards > 1 && l.Name == benchLeaseName {
			coordinator = replica
		}
		if c.shards == 1 && l.Name == benchLeaseName {
			held[replica] = append(held[replica], 0)
		} else if shard, ok := sharding.ShardOf(benchLeaseName, l.Name); ok && c.shards > 1 && shard < c.shards {
			held[replica] = append(held[replica], shard)
		}
	}
	for _, s := range held {
		slices.Sort(s)
	}
	return held, coordinator, nil
}

// identityInLog matches the identity a replica logs with its elections.
var identityInLog = regexp.MustCompile(`identity="([^"]+)"`)

// replicaIdentity returns the holder identity a replica logged.
func replicaIdentity(logPath string) (string, error) {
	data, err := os.ReadFile(logPath)
	if err != nil {
		return "", err
	}
	m := identityInLog.FindSubmatch(data)
	if m == nil {
		return "", fmt.Errorf("no election identity in %s", logPath)
	}
	return string(m[1]), nil
}

// podsInShard counts the pods the apiserver returns for a shard's selector: what the
// informers of the replica holding that shard list and watch.
func (c *shardCluster) podsInShard(ctx context.Context, plan sharding.Plan, shard int) (int, error) {
	opts := metav1.ListOptions{}
	if c.shards > 1 {
		opts.ShardSelector = plan.Selector(shard).String()
	}
	list, err := c.metadata.Resource(corev1.SchemeGroupVersion.WithResource("pods")).List(ctx, opts)
	if err != nil {
		return 0, fmt.Errorf("listing the pods of shard %d: %w", shard, err)
	}
	n := 0
	for _, p := range list.Items {
		if p.Namespace != warmUpNamespace && p.Namespace != "kube-system" {
			n++
		}
	}
	return n, nil
}

// checkBalance records, for the sharded run, the plan's load per shard as the tenants'
// pods fall into it.
func (c *shardCluster) checkBalance(_ context.Context, namespaces []string, run *MemoryRun) error {
	plan := c.timeline.activePlan()
	loads := make([]int, plan.Shards())
	for _, ns := range namespaces {
		loads[plan.Shard(ns)] += run.Pods / len(namespaces)
	}
	run.NamespacesPerShard = make([]int, plan.Shards())
	for _, ns := range namespaces {
		run.NamespacesPerShard[plan.Shard(ns)]++
	}
	run.PodsPerShardByPlan = loads
	return nil
}

// measureReplicas records what every replica caches and what it cost.
func (c *shardCluster) measureReplicas(ctx context.Context, out *[]ReplicaResult) error {
	held, coordinator, err := c.heldShards(ctx)
	if err != nil {
		return err
	}
	plan := c.timeline.activePlan()
	podsOf := map[int]int{}
	for _, r := range c.replicas {
		result := ReplicaResult{Name: r.name, Shards: held[r.name], Coordinator: r.name == coordinator}
		u, err := readProcessUsage(r.process.Pid())
		if err != nil {
			return err
		}
		result.PeakRSSBytes, result.RSSBytes, result.AnonRSSBytes, result.CPUSeconds = u.PeakRSS, u.RSS, u.AnonRSS, u.CPU.Seconds()
		if result.LiveHeapBytes, err = c.liveHeap(ctx, r); err != nil {
			c.cfg.Logf("   %s: no heap profile: %v", r.name, err)
		}
		for _, shard := range result.Shards {
			if _, ok := podsOf[shard]; !ok {
				if podsOf[shard], err = c.podsInShard(ctx, plan, shard); err != nil {
					return err
				}
			}
			result.PodsCached += podsOf[shard]
		}
		*out = append(*out, result)
	}
	return nil
}

// liveHeap saves a heap profile of the replica (after a garbage collection, ?gc=1) in
// the run's log directory and returns the live heap the collection left, from
// go_memstats_heap_alloc_bytes on its /metrics: how much of its RSS its objects are.
func (c *shardCluster) liveHeap(ctx context.Context, r *benchReplica) (int64, error) {
	get := func(path string) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:"+strconv.Itoa(r.port)+path, nil)
		if err != nil {
			return nil, err
		}
		resp, err := c.scraper.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("GET %s: status %d", path, resp.StatusCode)
		}
		return body, err
	}
	profile, err := get("/debug/pprof/heap?gc=1")
	if err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(c.logDir, r.name+"-heap.pprof"), profile, 0o644); err != nil {
		return 0, err
	}
	metrics, err := get("/metrics")
	if err != nil {
		return 0, err
	}
	m := heapAlloc.FindSubmatch(metrics)
	if m == nil {
		return 0, fmt.Errorf("no go_memstats_heap_alloc_bytes on /metrics")
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	return int64(v), err
}

// heapAlloc matches the live heap on a Go process's /metrics.
var heapAlloc = regexp.MustCompile(`(?m)^go_memstats_heap_alloc_bytes (\S+)$`)

// usage reads the CPU time and memory of every process of the run: the control plane's
// components, the replicas and the benchmark itself.
func (c *shardCluster) usage() (map[string]processUsage, error) {
	pids := map[string]int{benchProcess: os.Getpid()}
	for _, name := range []string{controlplane.KubeAPIServer, controlplane.Etcd, controlplane.KWOK, controlplane.KubeScheduler} {
		pids[name] = c.cp.Pid(name)
	}
	for _, r := range c.replicas {
		pids[r.name] = r.process.Pid()
	}
	out := map[string]processUsage{}
	for name, pid := range pids {
		u, err := readProcessUsage(pid)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name] = u
	}
	return out, nil
}

// cpuShares returns each process's CPU time between two readings, in cores (CPU
// seconds per second of wall time), with the replicas summed as "mini-kcm (all
// replicas)" besides each.
func cpuShares(before, after map[string]processUsage, wall time.Duration) []ProcessCPU {
	var out []ProcessCPU
	var replicas float64
	for _, name := range sortedKeys(after) {
		seconds := (after[name].CPU - before[name].CPU).Seconds()
		out = append(out, ProcessCPU{Process: name, CPUSeconds: seconds, Cores: seconds / wall.Seconds()})
		if strings.HasPrefix(name, "mini-kcm-") {
			replicas += seconds
		}
	}
	out = append(out, ProcessCPU{Process: allReplicas, CPUSeconds: replicas, Cores: replicas / wall.Seconds()})
	return out
}

// allReplicas names the sum of the replicas' CPU, benchProcess the benchmark's own.
const (
	allReplicas  = "mini-kcm (all replicas)"
	benchProcess = "bench (this process)"
)
