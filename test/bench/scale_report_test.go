package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The scale report gives every figure as min–max over the rounds, with the ratio taken
// within each round, whatever order the controller managers ran in.
func TestScaleReportGivesMinMaxOverRoundsAndRatiosWithinEachRound(t *testing.T) {
	settings := Settings{QPS: 100, Burst: 100, ConcurrentSyncs: 5}
	run := func(impl Implementation, cpu, converge float64) RunResult {
		return RunResult{Implementation: impl, Settings: settings, CPUSeconds: cpu,
			Phases: []Phase{{Name: "start"}, {Name: "create to Available", Objects: 10, ConvergeSeconds: converge}}}
	}
	round := func(n int, runs ...RunResult) ScaleRound {
		return ScaleRound{Settings: settings, Round: n, Report: &Report{Workloads: []WorkloadResult{{Name: "scale", Runs: runs}}}}
	}
	r := &ScaleReport{MaxLoad: 3, Rounds: []ScaleRound{
		round(1, run(Upstream, 10, 20), run(MiniKCM, 5, 10)),
		round(2, run(MiniKCM, 8, 12), run(Upstream, 16, 24)),
	}}
	md := r.Markdown()
	for _, want := range []string{
		"| whole run: CPU (s) | 10.0–16.0 | 5.0–8.0 | 0.50 |",
		"| create to Available: converge (s) | 20.0–24.0 | 10.0–12.0 | 0.50 |",
		"round 2: mini-kcm (load 0.0), then upstream (load 0.0)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
}

// The README and docs/benchmarks.md quote make bench-scale's results as Headline
// renders them from the checked-in JSON they name, so a quote cannot drift from the
// figures it quotes, and the README quotes at least one.
func TestTheDocsQuoteTheScaleResultsAsMeasured(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, doc := range []string{"README.md", "docs/benchmarks.md"} {
		data, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		quoted, n, err := QuoteScaleHeadlines(data, root)
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		if string(quoted) != string(data) {
			t.Errorf("%s quotes figures other than its results files': run `go run ./test/bench/cmd/scalebench --render <the results JSON> --name <its name>` (it quotes the docs again)", doc)
		}
		if doc == "README.md" && n == 0 {
			t.Errorf("the README quotes no make bench-scale headline (a %q marker)", headlineBegin)
		}
	}
}

// A quote names its results file; a missing one or an unclosed quote is an error, not
// a silently kept figure.
func TestAQuoteOfAMissingResultsFileIsAnError(t *testing.T) {
	for _, doc := range []string{
		headlineBegin + "test/bench/results/no-such.json -->\nold\n" + headlineEnd,
		headlineBegin + "test/bench/results/scale-smoke.json -->\nold\n",
	} {
		if _, _, err := QuoteScaleHeadlines([]byte(doc), filepath.Join("..", "..")); err == nil {
			t.Errorf("quoting %q: no error", doc)
		}
	}
}
