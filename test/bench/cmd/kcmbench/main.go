// Command kcmbench runs the benchmarks of package bench: every workload under the
// upstream kube-controller-manager and under mini-kcm, one after the other, each on a
// fresh local control plane, and writes the comparison as Markdown and JSON.
//
//	go run ./test/bench/cmd/kcmbench --mini-kcm bin/mini-kcm
//
// BENCH_SCALE multiplies the workload sizes (default 1).
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

	"github.com/mini-kcm/mini-kcm/test/bench"
	"github.com/mini-kcm/mini-kcm/test/controlplane"
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
		miniKCM   = flag.String("mini-kcm", "bin/mini-kcm", "the mini-kcm binary (build it without -race)")
		upstream  = flag.String("upstream", filepath.Join(controlplane.BinDir(), "kube-controller-manager"), "the upstream kube-controller-manager binary")
		impls     = flag.String("implementations", "upstream,mini-kcm", "the controller managers to run, in order")
		workloads = flag.String("workloads", "", "comma-separated workloads to run (default all): "+strings.Join(bench.WorkloadNames(), ", "))
		out       = flag.String("out", "test/bench/results", "directory for the results; empty writes none")
		name      = flag.String("name", "latest", "base name of the result files (<name>.md and <name>.json)")
		logDir    = flag.String("log-dir", "", "directory for the controller managers' and control planes' logs (default: a new temporary directory)")
		qps       = flag.Float64("kube-api-qps", 20, "--kube-api-qps of both controller managers")
		burst     = flag.Int("kube-api-burst", 30, "--kube-api-burst of both controller managers")
		syncs     = flag.Int("concurrent-syncs", 5, "workers of each controller in both controller managers")
		raisedQPS = flag.Float64("raised-kube-api-qps", 200, "--kube-api-qps in the endpoints-raised workload (operators raise the defaults)")
		raisedBur = flag.Int("raised-kube-api-burst", 400, "--kube-api-burst in the endpoints-raised workload")
		liftedQPS = flag.Float64("lifted-kube-api-qps", 1000, "--kube-api-qps in the ceiling workload")
		liftedBur = flag.Int("lifted-kube-api-burst", 2000, "--kube-api-burst in the ceiling workload")
		ceilingW  = flag.Int("ceiling-workers", 100, "goroutines of the plain client in the ceiling workload")
		nodes     = flag.Int("nodes", 10, "fake nodes per control plane")
		timeout   = flag.Duration("phase-timeout", 15*time.Minute, "how long a phase may take to converge")
		defaults  = bench.DefaultSizes()
		oneRS     = flag.String("one-replicaset", fmt.Sprint(defaults.OneReplicaSetPods), "pods of the one-replicaset workload")
		manyRS    = flag.String("many-replicasets", fmt.Sprintf("%dx%d", defaults.ManyReplicaSets, defaults.ManyReplicaSetPods), "ReplicaSets x pods of the many-replicasets workload")
		deploys   = flag.String("deployments", fmt.Sprintf("%dx%d", defaults.Deployments, defaults.DeploymentReplicas), "Deployments x replicas of the deployments workload")
		services  = flag.String("services", fmt.Sprintf("%dx%d", defaults.Services, defaults.PodsPerService), "Services x pods of the endpoints workload")
		ceiling   = flag.String("ceiling-pods", fmt.Sprint(defaults.CeilingPods), "pods of the ceiling workload")
		slicePods = flag.Int("slice-service-pods", defaults.SliceServicePods, "pods of the endpointslices-one-service workload's Service")
	)
	flag.Float64Var(&scale, "scale", scale, "multiplies the number of objects of every workload; $BENCH_SCALE sets the default")
	flag.Parse()
	sizes, err := parseSizes(*oneRS, *manyRS, *deploys, *services, *ceiling)
	if err == nil && *slicePods < 1 {
		err = fmt.Errorf("--slice-service-pods must be at least 1, got %d", *slicePods)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	sizes.SliceServicePods = *slicePods

	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
	cfg := bench.Config{
		Binaries:       map[bench.Implementation]string{},
		Settings:       bench.Settings{QPS: float32(*qps), Burst: int32(*burst), ConcurrentSyncs: *syncs},
		RaisedSettings: bench.Settings{QPS: float32(*raisedQPS), Burst: int32(*raisedBur), ConcurrentSyncs: *syncs},
		LiftedSettings: bench.Settings{QPS: float32(*liftedQPS), Burst: int32(*liftedBur), ConcurrentSyncs: *syncs},
		Sizes:          sizes.Scaled(scale),
		Scale:          scale,
		Nodes:          *nodes,
		CeilingWorkers: *ceilingW,
		PhaseTimeout:   *timeout,
		LogDir:         *logDir,
		Logf:           logf,
	}
	for _, impl := range strings.Split(*impls, ",") {
		cfg.Implementations = append(cfg.Implementations, bench.Implementation(strings.TrimSpace(impl)))
	}
	if *workloads != "" {
		cfg.Workloads = strings.Split(*workloads, ",")
	}
	for impl, path := range map[bench.Implementation]string{bench.Upstream: *upstream, bench.MiniKCM: *miniKCM} {
		abs, err := filepath.Abs(path)
		if err == nil {
			_, err = os.Stat(abs)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s binary: %v\n", impl, err)
			os.Exit(2)
		}
		cfg.Binaries[impl] = abs
	}
	if cfg.LogDir == "" {
		dir, err := os.MkdirTemp("", "mini-kcm-bench-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		cfg.LogDir = dir
	}
	logf("logs in %s", cfg.LogDir)

	// Ctrl-C ends the run; the control planes and controller managers die with us.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	report, err := bench.Run(ctx, cfg)
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

// parseSizes reads the size flags: "N" for the one-replicaset and ceiling pods, "NxM"
// for the others.
func parseSizes(oneRS, manyRS, deployments, services, ceiling string) (bench.Sizes, error) {
	var s bench.Sizes
	for _, f := range []struct {
		value       string
		count, size *int
	}{
		{oneRS, &s.OneReplicaSetPods, nil},
		{manyRS, &s.ManyReplicaSets, &s.ManyReplicaSetPods},
		{deployments, &s.Deployments, &s.DeploymentReplicas},
		{services, &s.Services, &s.PodsPerService},
		{ceiling, &s.CeilingPods, nil},
	} {
		count, size, err := bench.ParseCount(f.value)
		if err != nil {
			return s, err
		}
		if (f.size == nil) != (size == 0) {
			return s, fmt.Errorf("size %q: want %s", f.value, map[bool]string{true: "N", false: "NxM"}[f.size == nil])
		}
		*f.count = count
		if f.size != nil {
			*f.size = size
		}
	}
	return s, nil
}
