package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// ScaleReport gathers the rounds of the scale workload (make bench-scale): every rate
// limit setting, every round, both controller managers in the order of that round,
// each run on a fresh control plane. Figures are reported as min–max over the rounds.
type ScaleReport struct {
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Commit   string    `json:"commit"`
	// Smoke marks a run too small or too short to answer the targets: its
	// figures check that the workload works, nothing more.
	Smoke bool `json:"smoke,omitempty"`
	// MaxLoad is the highest 1-minute load average a run may start at; a round that
	// starts above it fails the whole run instead of being reported.
	MaxLoad float64 `json:"maxLoad"`
	// Rounds are in the order they ran.
	Rounds []ScaleRound `json:"rounds"`
}

// ScaleRound is one round at one rate limit setting.
type ScaleRound struct {
	Settings Settings `json:"settings"`
	Round    int      `json:"round"`
	// Report holds the scale workload's runs, in the order they ran.
	Report *Report `json:"report"`
}

// WriteFiles writes the report as name.json and name.md into dir.
func (r *ScaleReport) WriteFiles(dir, name string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".md"), []byte(r.Markdown()), 0o644)
}

// Failed lists the failed runs of every round.
func (r *ScaleReport) Failed() []string {
	var failed []string
	for _, round := range r.Rounds {
		for _, f := range round.Report.Failed() {
			failed = append(failed, fmt.Sprintf("round %d at %g/%d: %s", round.Round, round.Settings.QPS, round.Settings.Burst, f))
		}
	}
	return failed
}

// span is the min–max of one figure over the rounds.
type span struct {
	lo, hi float64
	set    bool
}

func (s *span) add(v float64) {
	if !s.set {
		s.lo, s.hi, s.set = v, v, true
		return
	}
	s.lo, s.hi = min(s.lo, v), max(s.hi, v)
}

func (s span) format(f string) string {
	if !s.set {
		return "–"
	}
	lo, hi := fmt.Sprintf(f, s.lo), fmt.Sprintf(f, s.hi)
	if lo == hi {
		return lo
	}
	return lo + "–" + hi
}

// Markdown renders the report: per rate limit setting, a table of every figure as
// upstream, mini-kcm and their ratio, each min–max over the rounds.
func (r *ScaleReport) Markdown() string {
	var b strings.Builder
	b.WriteString("# mini-kcm and kube-controller-manager v1.37.2 at scale (make bench-scale)\n\n")
	if r.Smoke {
		b.WriteString("**Smoke run**: a smaller size and fewer rounds than `make bench-scale` runs; it shows the workload works, not how the two compare at scale.\n\n")
	}
	fmt.Fprintf(&b, "Measured %s at `%s` in %s. Every round runs both controller managers, each on a fresh control plane, "+
		"upstream first in odd rounds and mini-kcm first in even ones; figures are min–max over the rounds, ratios (mini-kcm / upstream) "+
		"taken within each round. %s\n\n",
		r.Started.UTC().Format("2006-01-02 15:04 MST"), r.commit(), r.Finished.Sub(r.Started).Round(time.Second), r.loadCheck())
	if len(r.Rounds) > 0 && len(r.Rounds[0].Report.Workloads) > 0 {
		fmt.Fprintf(&b, "Workload: %s.\n\n", r.Rounds[0].Report.Workloads[0].Description)
	}
	for _, s := range r.settings() {
		r.writeSetting(&b, s)
	}
	return b.String()
}

func (r *ScaleReport) loadCheck() string {
	if r.MaxLoad <= 0 {
		return "No load check (`--max-load=0`): the load average at the start of each run is shown with its order."
	}
	return fmt.Sprintf("A round starting at a 1-minute load average above %g fails the run.", r.MaxLoad)
}

func (r *ScaleReport) commit() string {
	if r.Commit != "" {
		return r.Commit
	}
	return "unknown"
}

// figure is one row of a setting's table.
type figure struct {
	name   string
	format string
	value  func(run *RunResult) (float64, bool)
}

// settings are the rate limit settings of the rounds, in the order they first ran.
func (r *ScaleReport) settings() []Settings {
	var settings []Settings
	for _, round := range r.Rounds {
		if !slices.Contains(settings, round.Settings) {
			settings = append(settings, round.Settings)
		}
	}
	return settings
}

// ReadScaleReport reads a report that WriteFiles wrote as JSON.
func ReadScaleReport(path string) (*ScaleReport, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := &ScaleReport{}
	if err := json.Unmarshal(data, r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// row is one figure of a setting, min–max over its complete rounds.
type row struct {
	figure
	upstream, miniKCM, ratio span
}

// setting gathers one rate limit setting's rounds: the order and load of each, the
// rounds that failed, and every figure over the complete ones (none when no round
// completed).
func (r *ScaleReport) setting(s Settings) (orders, failed []string, runs [][2]*RunResult, rows []row) {
	for _, round := range r.Rounds {
		if round.Settings != s || len(round.Report.Workloads) == 0 {
			continue
		}
		w := round.Report.Workloads[0]
		var order []string
		for _, run := range w.Runs {
			order = append(order, fmt.Sprintf("%s (load %.1f)", run.Implementation, run.LoadAverage[0]))
		}
		orders = append(orders, fmt.Sprintf("round %d: %s", round.Round, strings.Join(order, ", then ")))
		up, mini := w.run(Upstream), w.run(MiniKCM)
		if up == nil || mini == nil || up.Error != "" || mini.Error != "" {
			failed = append(failed, fmt.Sprintf("round %d failed", round.Round))
			continue
		}
		runs = append(runs, [2]*RunResult{up, mini})
	}
	if len(runs) == 0 {
		return orders, failed, nil, nil
	}
	for _, f := range scaleFigures(runs[0][1].Phases) {
		rw := row{figure: f}
		complete := true
		for _, pair := range runs {
			u, okU := f.value(pair[0])
			m, okM := f.value(pair[1])
			if !okU || !okM {
				complete = false
				break
			}
			rw.upstream.add(u)
			rw.miniKCM.add(m)
			if u > 0 {
				rw.ratio.add(m / u)
			}
		}
		if complete {
			rows = append(rows, rw)
		}
	}
	return orders, failed, runs, rows
}

// scaleFigures are the figures of the report: the whole run's, then four of each phase
// but the start.
func scaleFigures(phases []Phase) []figure {
	whole := func(f func(run *RunResult) float64) func(run *RunResult) (float64, bool) {
		return func(run *RunResult) (float64, bool) { return f(run), true }
	}
	figures := []figure{
		{"whole run: CPU (s)", "%.1f", whole(func(run *RunResult) float64 { return run.CPUSeconds })},
		{"whole run: peak RSS (MiB)", "%.0f", whole(func(run *RunResult) float64 { return mib(run.PeakRSSBytes) })},
		{"whole run: peak RssAnon (MiB)", "%.0f", whole(func(run *RunResult) float64 { return mib(run.PeakAnonRSSBytes) })},
		{"whole run: peak RssFile (MiB)", "%.0f", whole(func(run *RunResult) float64 { return mib(run.PeakFileRSSBytes) })},
		{"whole run: writes", "%.0f", whole(func(run *RunResult) float64 { return float64(run.Requests.Writes) })},
		{"whole run: reads", "%.0f", whole(func(run *RunResult) float64 { return float64(run.Requests.Reads) })},
	}
	for _, p := range phases {
		if p.Name == "start" {
			continue
		}
		name := p.Name
		phase := func(f func(p *Phase) float64) func(run *RunResult) (float64, bool) {
			return func(run *RunResult) (float64, bool) {
				if p := run.phase(name); p != nil {
					return f(p), true
				}
				return 0, false
			}
		}
		perObject := func(f func(p *Phase) int) func(p *Phase) float64 {
			return func(p *Phase) float64 { return float64(f(p)) / float64(max(1, p.Objects)) }
		}
		figures = append(figures,
			figure{name + ": converge (s)", "%.1f", phase(func(p *Phase) float64 { return p.ConvergeSeconds })},
			figure{name + ": CPU (s)", "%.1f", phase(func(p *Phase) float64 { return p.CPUSeconds })},
			figure{name + ": writes per object", "%.2f", phase(perObject(func(p *Phase) int { return p.Requests.Writes }))},
			figure{name + ": reads per object", "%.2f", phase(perObject(func(p *Phase) int { return p.Requests.Reads }))},
		)
	}
	return figures
}

func (r *ScaleReport) writeSetting(b *strings.Builder, s Settings) {
	orders, failed, runs, rows := r.setting(s)
	fmt.Fprintf(b, "## `--kube-api-qps=%g --kube-api-burst=%d`, %d workers per controller\n\n%s.", s.QPS, s.Burst, s.ConcurrentSyncs, strings.Join(orders, "; "))
	if len(failed) > 0 {
		fmt.Fprintf(b, " %s.", strings.Join(failed, "; "))
	}
	b.WriteString("\n\n")
	if len(rows) == 0 {
		b.WriteString("No complete round.\n\n")
		return
	}
	b.WriteString("| figure | upstream | mini-kcm | ratio |\n|---|---|---|---|\n")
	for _, rw := range rows {
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", rw.name, rw.upstream.format(rw.format), rw.miniKCM.format(rw.format), rw.ratio.format("%.2f"))
	}
	b.WriteString("\n")
	writeCPUBreakdown(b, runs)
}

// Headline is what the docs quote of the report: per rate limit setting, one line of
// the whole run's ratios (mini-kcm / upstream) and the worst phase's convergence
// ratio, each min–max over the rounds. QuoteScaleHeadlines writes it into the docs,
// and a test keeps every quote equal to its results file.
func (r *ScaleReport) Headline() string {
	var b strings.Builder
	pods, cpus := 0, 0
	if len(r.Rounds) > 0 {
		sizes := r.Rounds[0].Report.Sizes
		pods, cpus = sizes.ScaleDeployments*sizes.ScaleReplicas, r.Rounds[0].Report.Machine.CPUs
	}
	for _, s := range r.settings() {
		_, _, runs, rows := r.setting(s)
		complete := len(runs)
		fmt.Fprintf(&b, "- ")
		if r.Smoke {
			b.WriteString("**smoke run**, ")
		}
		rounds := "rounds"
		if complete == 1 {
			rounds = "round"
		}
		fmt.Fprintf(&b, "%d pods, %d %s at %g/%d, %d cores, `%s`, %s: ", pods, complete, rounds, s.QPS, s.Burst, cpus, r.commit(), r.Started.UTC().Format("2006-01-02"))
		if len(rows) == 0 {
			b.WriteString("no complete round.\n")
			continue
		}
		ratio := func(name string) string {
			for _, rw := range rows {
				if rw.name == name {
					return rw.ratio.format("%.2f") + "×"
				}
			}
			return "–"
		}
		var worst *row
		for i, rw := range rows {
			if strings.HasSuffix(rw.name, ": converge (s)") && rw.ratio.set && (worst == nil || rw.ratio.hi > worst.ratio.hi) {
				worst = &rows[i]
			}
		}
		fmt.Fprintf(&b, "mini-kcm's peak RSS is %s kube-controller-manager's (RssAnon %s), its CPU %s, its writes %s",
			ratio("whole run: peak RSS (MiB)"), ratio("whole run: peak RssAnon (MiB)"), ratio("whole run: CPU (s)"), ratio("whole run: writes"))
		if worst != nil {
			fmt.Fprintf(&b, "; its slowest phase against upstream's converges in %s the time (%s: %s s against %s s)", worst.ratio.format("%.2f")+"×",
				strings.TrimSuffix(worst.name, ": converge (s)"), worst.miniKCM.format(worst.format), worst.upstream.format(worst.format))
		}
		if name, mini, up, ok := biggestSpender(runs); ok {
			fmt.Fprintf(&b, "; in the profiled minute, the biggest spender is the %s: %s of mini-kcm's CPU, %s of upstream's",
				name, mini.format("%.0f")+"%", up.format("%.0f")+"%")
		}
		b.WriteString(".\n")
	}
	return b.String()
}

// The docs quote a results file's headline between these markers, the first naming the
// results JSON by its path from the repository's root.
const (
	headlineBegin = "<!-- scale headline: "
	headlineEnd   = "<!-- end scale headline -->"
)

// QuoteScaleHeadlines rewrites every quote in doc (between headlineBegin, which names a
// results JSON relative to root, and headlineEnd) with that results file's Headline. It
// returns how many quotes it wrote.
func QuoteScaleHeadlines(doc []byte, root string) ([]byte, int, error) {
	return quoteHeadlines(doc, headlineBegin, headlineEnd, func(path string) (string, error) {
		report, err := ReadScaleReport(filepath.Join(root, path))
		if err != nil {
			return "", err
		}
		return report.Headline(), nil
	})
}

// quoteHeadlines rewrites every quote in doc between begin (which names a results file,
// closed by "-->") and end with headline(that file). It returns how many it wrote.
func quoteHeadlines(doc []byte, begin, end string, headline func(path string) (string, error)) ([]byte, int, error) {
	var out strings.Builder
	rest := string(doc)
	quotes := 0
	for {
		i := strings.Index(rest, begin)
		if i < 0 {
			out.WriteString(rest)
			return []byte(out.String()), quotes, nil
		}
		lineEnd := strings.Index(rest[i:], "-->")
		if lineEnd < 0 {
			return nil, quotes, fmt.Errorf("a %q marker is not closed by -->", begin)
		}
		path := strings.TrimSpace(rest[i+len(begin) : i+lineEnd])
		stop := strings.Index(rest[i:], end)
		if stop < 0 {
			return nil, quotes, fmt.Errorf("the quote of %s has no %q after it", path, end)
		}
		text, err := headline(path)
		if err != nil {
			return nil, quotes, fmt.Errorf("the quote of %s: %w", path, err)
		}
		out.WriteString(rest[:i+lineEnd+len("-->")])
		out.WriteString("\n" + text)
		out.WriteString(end)
		rest = rest[i+stop+len(end):]
		quotes++
	}
}
