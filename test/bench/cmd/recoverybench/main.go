// Command recoverybench runs the recovery benchmark (make bench-recovery, issue 47):
// the outage test of test/e2e/ha, TestEveryReplicaActsSoonAfterAnOutageOfTheControlPlane,
// against mini-kcm and kube-controller-manager in turn, each at its shipped defaults
// and on a fresh control plane, mini-kcm first in odd rounds and upstream first in even
// ones, and writes what the test's RECOVERY lines say (package bench's RecoveryReport).
//
//	go run ./test/bench/cmd/recoverybench --mini-kcm bin/mini-kcm
//
// One run takes about two and a half minutes. It refuses to write results from a dirty
// tree (the figures must name the commit they measured) unless --allow-dirty.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/mini-kcm/mini-kcm/test/bench"
)

// outageTest is the test whose RECOVERY lines are the figures.
const outageTest = "^TestEveryReplicaActsSoonAfterAnOutageOfTheControlPlane$"

func main() {
	var (
		miniKCM    = flag.String("mini-kcm", "bin/mini-kcm", "the mini-kcm binary (build it without -race, as users run it)")
		rounds     = flag.Int("rounds", 2, "runs of each controller manager; the order alternates between rounds")
		allowDirty = flag.Bool("allow-dirty", false, "write results from a tree with uncommitted changes")
		out        = flag.String("out", "test/bench/results", "directory for the results; empty writes none")
		name       = flag.String("name", "recovery", "base name of the result files (<name>.md and <name>.json)")
		logDir     = flag.String("log-dir", "", "directory for the test logs (default: a new temporary directory)")
		render     = flag.String("render", "", "render the Markdown of this results JSON again, quote the docs again (--docs), and run nothing")
		docs       = flag.String("docs", "docs/high-availability.md", "comma-separated docs whose quotes of results headlines (<!-- recovery headline: <results JSON> -->) are rewritten")
	)
	flag.Parse()
	fail := func(code int, format string, args ...any) {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
		os.Exit(code)
	}
	if *render != "" {
		report, err := bench.ReadRecoveryReport(*render)
		if err != nil {
			fail(1, "%v", err)
		}
		if err := writeResults(report, filepath.Dir(*render), strings.TrimSuffix(filepath.Base(*render), ".json"), *docs); err != nil {
			fail(1, "%v", err)
		}
		return
	}
	if *rounds < 1 {
		fail(2, "--rounds must be at least 1, got %d", *rounds)
	}
	if *out != "" && !*allowDirty && bench.TrackedChanges() {
		fail(2, "the tree has uncommitted changes: commit them, or pass --allow-dirty")
	}
	binary, err := filepath.Abs(*miniKCM)
	if err == nil {
		_, err = os.Stat(binary)
	}
	if err != nil {
		fail(2, "--mini-kcm: %v (make build writes bin/mini-kcm)", err)
	}
	if *logDir == "" {
		if *logDir, err = os.MkdirTemp("", "mini-kcm-bench-recovery-"); err != nil {
			fail(1, "%v", err)
		}
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
	logf("logs in %s", *logDir)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	report := bench.RecoveryReport{Commit: bench.HeadCommit(), Date: time.Now().UTC().Format("2006-01-02"), CPUs: runtime.NumCPU()}
	for round := 1; round <= *rounds; round++ {
		order := []string{"mini-kcm", "kube-controller-manager"}
		if round%2 == 0 {
			order = []string{order[1], order[0]}
		}
		for _, impl := range order {
			logPath := filepath.Join(*logDir, fmt.Sprintf("round%d-%s.log", round, impl))
			logf("== round %d: %s (log %s)", round, impl, logPath)
			run, err := runOnce(ctx, impl, binary, logPath)
			if ctx.Err() != nil {
				fail(1, "interrupted")
			}
			if err != nil {
				fail(1, "round %d, %s: %v", round, impl, err)
			}
			run.Round = round
			if !run.Passed {
				logf("round %d: the test failed against %s; its figures are kept (see %s)", round, impl, logPath)
			}
			report.Runs = append(report.Runs, run)
		}
	}
	fmt.Println(report.Markdown())
	if *out != "" {
		if err := writeResults(report, *out, *name, *docs); err != nil {
			fail(1, "%v", err)
		}
		logf("results in %s", filepath.Join(*out, *name+".{md,json}"))
	}
}

// runOnce runs the outage test against impl and reads its RECOVERY lines.
func runOnce(ctx context.Context, impl, binary, logPath string) (bench.RecoveryRun, error) {
	run := bench.RecoveryRun{Implementation: impl}
	upstream := map[bool]string{true: "1", false: "0"}[impl != "mini-kcm"]
	output, passed, err := bench.RunE2ETest(ctx, "./test/e2e/ha/", outageTest, 1,
		[]string{"MINI_KCM_BINARY=" + binary, "MINI_KCM_E2E_UPSTREAM=" + upstream}, logPath)
	if err != nil {
		return run, err
	}
	run.Passed = passed
	if run.Outages, err = bench.ParseRecoveryLines(bytes.NewReader(output)); err != nil {
		return run, err
	}
	if len(run.Outages) == 0 {
		return run, fmt.Errorf("the test logged no RECOVERY line; see %s", logPath)
	}
	for _, o := range run.Outages {
		if o.Implementation != impl {
			return run, fmt.Errorf("the test measured %s, not %s: is MINI_KCM_E2E_UPSTREAM honoured?", o.Implementation, impl)
		}
	}
	return run, nil
}

// writeResults writes <dir>/<name>.json and .md, and quotes the docs again.
func writeResults(report bench.RecoveryReport, dir, name, docs string) error {
	return bench.WriteResults(dir, name, report, report.Markdown(), docs, bench.QuoteRecoveryHeadlines)
}
