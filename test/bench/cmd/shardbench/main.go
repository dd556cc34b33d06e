// Command shardbench runs the sharding benchmark of package bench (issue #17): the
// same tenant pods under one mini-kcm leader and under replicas that share the
// namespaces' shards (memory per replica, with tenant-NNN and with random namespace
// names), and the pod creation rate by --shards with the rate limit lifted. It writes
// the report as Markdown and JSON.
//
//	go run ./test/bench/cmd/shardbench --mini-kcm bin/mini-kcm
//
// BENCH_SCALE multiplies the pod counts (default 1).
//
// It is a command of its own rather than a kcmbench workload: kcmbench runs one
// controller manager per workload without leader election and compares it with
// upstream, while this runs several replicas with leader election and compares
// mini-kcm with itself; both share the package's control plane, process statistics,
// audit log reading and helpers.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mini-kcm/mini-kcm/leaderelection"
	"github.com/mini-kcm/mini-kcm/options"
	"github.com/mini-kcm/mini-kcm/test/bench"
)

func main() {
	scale := 1.0
	if s := os.Getenv("BENCH_SCALE"); s != "" {
		var err error
		if scale, err = strconv.ParseFloat(s, 64); err != nil || scale <= 0 {
			fmt.Fprintf(os.Stderr, "BENCH_SCALE=%q: want a positive number\n", s)
			os.Exit(2)
		}
	}
	var (
		miniKCM    = flag.String("mini-kcm", "bin/mini-kcm", "the mini-kcm binary (build it without -race)")
		scenarios  = flag.String("scenarios", strings.Join(bench.ShardScenarios(), ","), "comma-separated scenarios to run, in order")
		out        = flag.String("out", "test/bench/results", "directory for the results; empty writes none")
		name       = flag.String("name", "shards", "base name of the result files (<name>.md and <name>.json)")
		logDir     = flag.String("log-dir", "", "directory for the replicas' and control planes' logs (default: a new temporary directory)")
		namespaces = flag.Int("namespaces", 100, "tenant namespaces, one ReplicaSet each")
		memoryPods = flag.Int("pods", 3000, "pods of the memory runs (before scaling), spread evenly over the namespaces")
		thruPods   = flag.Int("throughput-pods", 3000, "pods of each throughput run (before scaling)")
		replicas   = flag.Int("replicas", 3, "replicas of the sharded runs")
		shardCount = flag.Int("shards", 6, "--shards of the sharded memory runs")
		thruShards = flag.String("throughput-shards", "1,2,3,6", "--shards of the throughput runs")
		qps        = flag.Float64("kube-api-qps", 1000, "--kube-api-qps of every replica")
		burst      = flag.Int("kube-api-burst", 2000, "--kube-api-burst of every replica")
		ctrls      = flag.String("controllers", "", "--controllers of every replica (default: mini-kcm's default controllers)")
		syncs      = flag.Int("concurrent-syncs", 5, "workers of each controller")
		period     = flag.Duration("shard-rebalance-period", options.NewShardingOptions().RebalancePeriod, "--shard-rebalance-period of every replica (default: the product's)")
		lease      = flag.Duration("leader-elect-lease-duration", options.NewLeaderElectionOptions().LeaseDuration, "--leader-elect-lease-duration of every replica (default: the product's)")
		renew      = flag.Duration("leader-elect-renew-deadline", options.NewLeaderElectionOptions().RenewDeadline, "--leader-elect-renew-deadline of every replica (default: the product's)")
		retry      = flag.Duration("leader-elect-retry-period", options.NewLeaderElectionOptions().RetryPeriod, "--leader-elect-retry-period of every replica (default: the product's)")
		profile    = flag.Int("profile-seconds", 10, "length of the kube-apiserver CPU profile taken in each throughput run; 0 takes none")
		seed       = flag.Uint64("seed", 17, "seed of the random namespace names")
		nodes      = flag.Int("nodes", 10, "fake nodes per control plane")
		timeout    = flag.Duration("phase-timeout", 10*time.Minute, "how long any wait may take")
	)
	render := flag.String("render", "", "render this JSON report (and its kube-apiserver profiles, if still there) again as <name>.{md,json} in --out, and run nothing")
	flag.Float64Var(&scale, "scale", scale, "multiplies the pod counts; $BENCH_SCALE sets the default")
	flag.Parse()

	if *render != "" {
		report, err := bench.ReadShardReport(context.Background(), *render)
		if err == nil {
			err = report.WriteFiles(*out, *name)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}

	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
	cfg := bench.ShardConfig{
		Namespaces:      *namespaces,
		MemoryPods:      int(float64(*memoryPods) * scale),
		ThroughputPods:  int(float64(*thruPods) * scale),
		Replicas:        *replicas,
		Shards:          *shardCount,
		Scenarios:       strings.Split(*scenarios, ","),
		Settings:        bench.Settings{QPS: float32(*qps), Burst: int32(*burst), ConcurrentSyncs: *syncs},
		RebalancePeriod: *period,
		Controllers:     *ctrls,
		Timings:         leaderelection.Timings{LeaseDuration: *lease, RenewDeadline: *renew, RetryPeriod: *retry},
		ProfileSeconds:  *profile,
		Seed:            *seed,
		Scale:           scale,
		Nodes:           *nodes,
		PhaseTimeout:    *timeout,
		LogDir:          *logDir,
		Logf:            logf,
	}
	for _, s := range strings.Split(*thruShards, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "--throughput-shards=%q: want positive numbers\n", *thruShards)
			os.Exit(2)
		}
		cfg.ThroughputShards = append(cfg.ThroughputShards, n)
	}
	if cfg.Namespaces < 1 || cfg.MemoryPods < cfg.Namespaces || cfg.ThroughputPods < 2*cfg.Namespaces {
		fmt.Fprintf(os.Stderr, "want at least one pod per namespace in the memory runs and two in the throughput runs: %d namespaces, %d and %d pods\n",
			cfg.Namespaces, cfg.MemoryPods, cfg.ThroughputPods)
		os.Exit(2)
	}
	abs, err := filepath.Abs(*miniKCM)
	if err == nil {
		_, err = os.Stat(abs)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mini-kcm binary: %v\n", err)
		os.Exit(2)
	}
	cfg.Binary = abs
	if cfg.LogDir == "" {
		if cfg.LogDir, err = os.MkdirTemp("", "mini-kcm-shardbench-"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	logf("logs in %s", cfg.LogDir)

	// Ctrl-C ends the run; the control planes and replicas die with us.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	report, err := bench.RunShards(ctx, cfg)
	if err != nil && report == nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	fmt.Println(report.Markdown())
	if *out != "" {
		if err := report.WriteFiles(*out, *name); err != nil {
			fmt.Fprintln(os.Stderr, "writing results:", err)
			os.Exit(1)
		}
		logf("results in %s", filepath.Join(*out, *name+".{md,json}"))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	if failed := report.Failed(); len(failed) > 0 {
		fmt.Fprintf(os.Stderr, "%d run(s) failed:\n  %s\n", len(failed), strings.Join(failed, "\n  "))
		os.Exit(1)
	}
}
