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

// A CPU profile's functions are summed by the packages that spent them, and each
// controller's syncs by the functions either controller manager names them with.
func TestACPUBreakdownSumsFunctionsByWhatSpentThem(t *testing.T) {
	out := `Duration: 60s, Total samples = 10.50s (17.50%)
      flat  flat%   sum%        cum   cum%
        4s 40.00% 40.00%         5s 50.00%  runtime.mallocgc
        2s 20.00% 60.00%         2s 20.00%  k8s.io/api/core/v1.(*Pod).Unmarshal
        1s 10.00% 70.00%         1s 10.00%  crypto/tls.(*Conn).Write
        1s 10.00% 80.00%         1s 10.00%  k8s.io/client-go/tools/cache.(*threadSafeMap).Update
     0.50s  5.00% 85.00%      0.50s  5.00%  hash/fnv.(*sum128a).Write
     0.50s  5.00% 90.00%         3s 30.00%  github.com/mini-kcm/mini-kcm/controllers/endpoints.(*Controller).syncService
     0.50s  5.00% 95.00%      0.50s  5.00%  internal/poll.(*FD).Write
     0.50s  5.00%   100%         2s 20.00%  runtime.gcBgMarkWorker
         0     0%   100%         4s 40.00%  k8s.io/kubernetes/pkg/controller/endpoint.(*Controller).syncService
`
	b := breakdownOf(out)
	group := func(prefix string) string {
		for _, g := range cpuGroups {
			if strings.HasPrefix(g.name, prefix) {
				return g.name
			}
		}
		t.Fatalf("no group %q", prefix)
		return ""
	}
	want := map[string]float64{
		group("controllers"): 0.5, group("client-go"): 1, group("object hashing"): 0.5, group("API objects"): 2,
		group("network"): 1.5, group("Go runtime"): 4.5, "other": 0,
	}
	if b.Seconds != 10 {
		t.Errorf("sampled %v s, want 10", b.Seconds)
	}
	for _, g := range b.Groups {
		if g.Seconds != want[g.Package] {
			t.Errorf("%s: %v s, want %v", g.Package, g.Seconds, want[g.Package])
		}
	}
	paths := map[string]float64{}
	for _, p := range b.Paths {
		paths[p.Path] = p.Seconds
	}
	for name, seconds := range map[string]float64{
		"Endpoints controller's Service syncs": 7, "garbage collection (background marking)": 2, "allocation (mallocgc)": 5, "ReplicaSet controller's syncs": 0,
	} {
		if paths[name] != seconds {
			t.Errorf("%s: %v s, want %v", name, paths[name], seconds)
		}
	}
	for pkg, want := range map[string]string{
		"net/http": group("network"), "netip": "other", "internal/poll": group("network"), "internal/sync": group("Go runtime"),
		"io": group("network"), "iofs": "other", "main": group("controllers"), "k8s.io/kubernetes/pkg/controller": group("controllers"),
		"github.com/davecgh/go-spew/spew": group("object hashing"), "aeshashbody": group("Go runtime"),
		packageOf("type:.eq.github.com/mini-kcm/mini-kcm/controllers/endpoints/subsets.addressKey"): group("Go runtime"),
	} {
		if got := groupOf(pkg); got != want {
			t.Errorf("groupOf(%q) = %q, want %q", pkg, got, want)
		}
	}
}

// The report shows each round's CPU breakdown as min–max shares, beside the figures.
func TestScaleReportShowsTheCPUBreakdownOverRounds(t *testing.T) {
	settings := Settings{QPS: 100, Burst: 100, ConcurrentSyncs: 5}
	profile := func(clientGo, total float64) *CPUBreakdown {
		b := &CPUBreakdown{Window: "the first 60 s of the rolling update of 10", Seconds: total}
		for _, g := range cpuGroups {
			v := 0.0
			if g.name == cpuGroups[1].name {
				v = clientGo
			}
			b.Groups = append(b.Groups, PackageCPU{Package: g.name, Seconds: v, Percent: 100 * v / total})
		}
		b.Paths = []PathCPU{{Path: "Endpoints controller's Service syncs", Seconds: clientGo, Percent: 100 * clientGo / total},
			{Path: "garbage collection (background marking)", Seconds: total, Percent: 100}}
		return b
	}
	run := func(impl Implementation, p *CPUBreakdown) RunResult {
		return RunResult{Implementation: impl, Settings: settings, CPUProfile: p, Phases: []Phase{{Name: "start"}}}
	}
	round := func(n int, runs ...RunResult) ScaleRound {
		return ScaleRound{Settings: settings, Round: n, Report: &Report{Workloads: []WorkloadResult{{Name: "scale", Runs: runs}}}}
	}
	r := &ScaleReport{Rounds: []ScaleRound{
		round(1, run(Upstream, profile(5, 20)), run(MiniKCM, profile(4, 10))),
		round(2, run(MiniKCM, profile(3, 10)), run(Upstream, profile(6, 20))),
	}}
	md := r.Markdown()
	for _, want := range []string{
		"over the first 60 s of the rolling update of 10",
		"| all sampled CPU | 100% | 100% | 20.0 | 10.0 |",
		"| " + cpuGroups[1].name + " | 25–30% | 30–40% | 5.0–6.0 | 3.0–4.0 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	// The headline names the controller that spent the most, not the collector.
	if want := "the biggest spender is the Endpoints controller's Service syncs: 30–40% of mini-kcm's CPU, 25–30% of upstream's"; !strings.Contains(r.Headline(), want) {
		t.Errorf("the headline lacks %q:\n%s", want, r.Headline())
	}
}
