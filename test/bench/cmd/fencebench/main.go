// Command fencebench measures the apiserver fence's window (make bench-fence, issue 48):
// test/e2e/ha's TestAPIServerFenceWindowAfterATakeover, run several times, and what its
// FENCE-WINDOW lines say (package bench's FenceWindowReport), written as results and
// quoted by docs/fencing.md.
//
//	go run ./test/bench/cmd/fencebench --runs 5
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

const windowTest = "^TestAPIServerFenceWindowAfterATakeover$"

func main() {
	var (
		runs       = flag.Int("runs", 5, "runs of the test (seven takeovers each)")
		allowDirty = flag.Bool("allow-dirty", false, "write results from a tree with uncommitted changes")
		out        = flag.String("out", "test/bench/results", "directory for the results; empty writes none")
		name       = flag.String("name", "fence-window", "base name of the result files (<name>.md and <name>.json)")
		render     = flag.String("render", "", "render the Markdown of this results JSON again, quote the docs again, and run nothing")
		docs       = flag.String("docs", "docs/fencing.md", "comma-separated docs whose quotes (<!-- fence window headline: <results JSON> -->) are rewritten")
	)
	flag.Parse()
	fail := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
		os.Exit(1)
	}
	write := func(r bench.FenceWindowReport, dir, name string) {
		if err := bench.WriteResults(dir, name, r, r.Markdown(), *docs, bench.QuoteFenceWindowHeadlines); err != nil {
			fail("%v", err)
		}
	}
	if *render != "" {
		r, err := bench.ReadFenceWindowReport(*render)
		if err != nil {
			fail("%v", err)
		}
		write(r, filepath.Dir(*render), strings.TrimSuffix(filepath.Base(*render), ".json"))
		return
	}
	if *runs < 1 {
		fail("--runs must be at least 1, got %d", *runs)
	}
	if *out != "" && !*allowDirty && bench.TrackedChanges() {
		fail("the tree has uncommitted changes: commit them, or pass --allow-dirty")
	}
	logDir, err := os.MkdirTemp("", "mini-kcm-bench-fence-")
	if err != nil {
		fail("%v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logPath := filepath.Join(logDir, "test.log")
	fmt.Fprintf(os.Stderr, "%s %d runs of %s (log %s)\n", time.Now().Format("15:04:05"), *runs, windowTest, logPath)
	output, passed, err := bench.RunE2ETest(ctx, "./test/e2e/ha/", windowTest, *runs, nil, logPath)
	if err != nil {
		fail("%v", err)
	}
	report := bench.FenceWindowReport{Commit: bench.HeadCommit(), Date: time.Now().UTC().Format("2006-01-02"), CPUs: runtime.NumCPU()}
	if report.Runs, err = bench.ParseFenceWindowLines(bytes.NewReader(output)); err != nil {
		fail("%v", err)
	}
	if !passed || len(report.Runs) != *runs {
		fail("the test failed or logged %d FENCE-WINDOW lines of %d; see %s", len(report.Runs), *runs, logPath)
	}
	fmt.Println(report.Markdown())
	if *out != "" {
		write(report, *out, *name)
	}
}
