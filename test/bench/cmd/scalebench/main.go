// Command scalebench runs the scale workload of package bench (make bench-scale, issue
// 33) side by side: for every rate limit setting, several rounds, each running both
// controller managers on fresh control planes, upstream first in odd rounds and
// mini-kcm first in even ones, and reports every figure as min–max over the rounds.
//
//	go run ./test/bench/cmd/scalebench --mini-kcm bin/mini-kcm
//
// BENCH_SCALE multiplies the number of Deployments (default 1: 100 Deployments of 300
// replicas, 30 000 pods).
//
// It refuses to write results from a dirty tree (the figures must name the commit
// they measured) unless --allow-dirty, which marks them a smoke run, and it fails,
// without writing, when a run starts at a 1-minute load average above --max-load: on
// a machine that busy, a ratio says more about the neighbours than about the
// controller managers. Each run first waits a few minutes at most for the load its
// predecessor left to decay to --max-load.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
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
	defaults := bench.DefaultSizes()
	var (
		miniKCM    = flag.String("mini-kcm", "bin/mini-kcm", "the mini-kcm binary (build it without -race)")
		upstream   = flag.String("upstream", filepath.Join(controlplane.BinDir(), "kube-controller-manager"), "the upstream kube-controller-manager binary")
		size       = flag.String("deployments", fmt.Sprintf("%dx%d", defaults.ScaleDeployments, defaults.ScaleReplicas), "Deployments x replicas, before BENCH_SCALE multiplies the Deployments")
		rounds     = flag.Int("rounds", 2, "rounds per rate limit setting; the order of the controller managers alternates between rounds")
		settings   = flag.String("rate-limits", "100/100,20/30", "comma-separated --kube-api-qps/--kube-api-burst settings: upstream's scalability jobs', then the defaults")
		syncs      = flag.Int("concurrent-syncs", 5, "workers of each controller in both controller managers")
		nodes      = flag.Int("nodes", 10, "fake nodes per control plane, as make bench")
		timeout    = flag.Duration("phase-timeout", time.Hour, "how long a phase may take to converge (30 000 pods at 20 QPS take 25 minutes to create)")
		maxLoad    = flag.Float64("max-load", 3, "fail without writing results when a run starts at a 1-minute load average above this (0: never)")
		allowDirty = flag.Bool("allow-dirty", false, "write results from a dirty tree, marked as a smoke run")
		out        = flag.String("out", "test/bench/results", "directory for the results; empty writes none")
		name       = flag.String("name", "scale", "base name of the result files (<name>.md and <name>.json)")
		logDir     = flag.String("log-dir", "", "directory for the logs (default: a new temporary directory)")
		render     = flag.String("render", "", "render the Markdown of this results JSON again into <out>/<name>.md, quote the docs again (--docs), and run nothing")
		reprofile  = flag.String("reprofile", "", "with --render: summarise the CPU profiles kept in this log directory of the rendered run again, into its JSON, before rendering")
		docs       = flag.String("docs", "README.md,docs/benchmarks.md", "comma-separated docs whose quotes of results headlines (<!-- scale headline: <results JSON> -->) are rewritten after results are written")
	)
	flag.Float64Var(&scale, "scale", scale, "multiplies the number of Deployments; $BENCH_SCALE sets the default")
	flag.Parse()
	fail := func(code int, format string, args ...any) {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
		os.Exit(code)
	}
	if *render != "" {
		report, err := bench.ReadScaleReport(*render)
		if err != nil {
			fail(1, "%v", err)
		}
		if *reprofile != "" {
			if err := summariseAgain(report, *reprofile); err != nil {
				fail(1, "--reprofile: %v", err)
			}
			if err := report.WriteFiles(filepath.Dir(*render), strings.TrimSuffix(filepath.Base(*render), ".json")); err != nil {
				fail(1, "%v", err)
			}
		}
		if err := os.WriteFile(filepath.Join(*out, *name+".md"), []byte(report.Markdown()), 0o644); err != nil {
			fail(1, "%v", err)
		}
		if err := quoteDocs(*docs); err != nil {
			fail(1, "%v", err)
		}
		return
	}
	deployments, replicas, err := bench.ParseCount(*size)
	if err != nil || replicas < 2 {
		fail(2, "--deployments %q: want NxM with M at least 2", *size)
	}
	if *rounds < 1 {
		fail(2, "--rounds must be at least 1, got %d", *rounds)
	}
	var limits []bench.Settings
	for _, s := range strings.Split(*settings, ",") {
		var qps float32
		var burst int32
		if _, err := fmt.Sscanf(s, "%g/%d", &qps, &burst); err != nil || qps <= 0 || burst <= 0 {
			fail(2, "--rate-limits: %q is not QPS/BURST", s)
		}
		limits = append(limits, bench.Settings{QPS: qps, Burst: burst, ConcurrentSyncs: *syncs})
	}
	dirty := treeDirty()
	if dirty && *out != "" && !*allowDirty {
		fail(2, "the tree has uncommitted changes: commit them, or pass --allow-dirty to write a smoke result")
	}

	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
	sizes := defaults
	sizes.ScaleDeployments, sizes.ScaleReplicas = deployments, replicas
	sizes = sizes.Scaled(scale)
	binaries := map[bench.Implementation]string{}
	for impl, path := range map[bench.Implementation]string{bench.Upstream: *upstream, bench.MiniKCM: *miniKCM} {
		abs, err := filepath.Abs(path)
		if err == nil {
			_, err = os.Stat(abs)
		}
		if err != nil {
			fail(2, "%s binary: %v", impl, err)
		}
		binaries[impl] = abs
	}
	if *logDir == "" {
		if *logDir, err = os.MkdirTemp("", "mini-kcm-bench-scale-"); err != nil {
			fail(1, "%v", err)
		}
	}
	logf("logs in %s", *logDir)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	report := &bench.ScaleReport{Started: time.Now(), MaxLoad: *maxLoad, Smoke: dirty}
	for _, limit := range limits {
		for round := 1; round <= *rounds; round++ {
			order := []bench.Implementation{bench.Upstream, bench.MiniKCM}
			if round%2 == 0 {
				order = []bench.Implementation{bench.MiniKCM, bench.Upstream}
			}
			logf("== round %d at %g/%d: %s first", round, limit.QPS, limit.Burst, order[0])
			r, err := bench.Run(ctx, bench.Config{
				Binaries:        binaries,
				Implementations: order,
				Settings:        limit,
				Sizes:           sizes,
				Scale:           scale,
				Nodes:           *nodes,
				Workloads:       []string{"scale"},
				PhaseTimeout:    *timeout,
				LogDir:          roundLogDir(*logDir, limit, round),
				Logf:            logf,
				SettleLoad:      *maxLoad,
			})
			if err != nil {
				fail(1, "round %d: %v", round, err)
			}
			report.Commit = r.Commit
			report.Rounds = append(report.Rounds, bench.ScaleRound{Settings: limit, Round: round, Report: r})
			for _, w := range r.Workloads {
				for _, run := range w.Runs {
					if *maxLoad > 0 && run.LoadAverage[0] > *maxLoad {
						fail(1, "round %d: %s started at a load average of %.2f, above --max-load=%g: the machine was too busy for a ratio to mean anything; no results written",
							round, run.Implementation, run.LoadAverage[0], *maxLoad)
					}
				}
			}
		}
	}
	report.Finished = time.Now()
	fmt.Println(report.Markdown())
	if *out != "" {
		if err := report.WriteFiles(*out, *name); err != nil {
			fail(1, "writing results: %v", err)
		}
		logf("results in %s", filepath.Join(*out, *name+".{md,json}"))
		if err := quoteDocs(*docs); err != nil {
			fail(1, "%v", err)
		}
	}
	if failed := report.Failed(); len(failed) > 0 {
		fail(1, "%d run(s) failed:\n  %s", len(failed), strings.Join(failed, "\n  "))
	}
}

// roundLogDir is the log directory of one round at one rate limit setting.
func roundLogDir(logDir string, limit bench.Settings, round int) string {
	return filepath.Join(logDir, fmt.Sprintf("qps%g-round%d", limit.QPS, round))
}

// summariseAgain replaces every run's CPU breakdown with one made from the profile the
// run kept in logDir, the log directory of the run that wrote report.
func summariseAgain(report *bench.ScaleReport, logDir string) error {
	for _, round := range report.Rounds {
		for _, w := range round.Report.Workloads {
			for i := range w.Runs {
				run := &w.Runs[i]
				if run.CPUProfile == nil || run.CPUProfile.Error != "" {
					continue
				}
				path := bench.CPUProfilePath(bench.RunLogDir(roundLogDir(logDir, round.Settings, round.Round), w.Name, run.Implementation), run.Implementation)
				b, err := bench.BreakdownOfProfile(context.Background(), path, run.CPUProfile.Window)
				if err != nil {
					return err
				}
				run.CPUProfile = b
			}
		}
	}
	return nil
}

// quoteDocs rewrites the results headlines the docs (comma-separated paths from the
// repository's root, the working directory) quote, from the results files they name.
func quoteDocs(docs string) error {
	for _, doc := range strings.Split(docs, ",") {
		if doc = strings.TrimSpace(doc); doc == "" {
			continue
		}
		data, err := os.ReadFile(doc)
		if err != nil {
			return err
		}
		quoted, n, err := bench.QuoteScaleHeadlines(data, ".")
		if err != nil {
			return fmt.Errorf("%s: %w", doc, err)
		}
		if n > 0 {
			if err := os.WriteFile(doc, quoted, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// treeDirty reports whether the working tree has uncommitted changes (or is not a git
// checkout, whose commit cannot be named either).
func treeDirty() bool {
	out, err := exec.Command("git", "status", "--porcelain").Output()
	return err != nil || len(strings.TrimSpace(string(out))) > 0
}
