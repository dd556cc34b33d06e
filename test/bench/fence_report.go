package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// The apiserver fence's window (make bench-fence, issue 48): test/e2e/ha's
// TestAPIServerFenceWindowAfterATakeover, run several times, each run moving a fenced
// Lease between two writers seven times while the old holder writes in a loop; its
// FENCE-WINDOW line says, per takeover, how long after the apiserver answered the Lease
// update it still admitted a write of the old holder (the policy's informer lagging the
// Lease), and until when such admitted writes were answered.

// FenceWindowRun is one run's FENCE-WINDOW line.
type FenceWindowRun struct {
	Takeovers     int     `json:"takeovers"`
	AdmittedAfter []int   `json:"admittedAfter"`
	WindowMicros  []int64 `json:"windowMicroseconds"`
	Completed     []int64 `json:"completedMicroseconds"`
}

// FenceWindowReport is what make bench-fence writes.
type FenceWindowReport struct {
	Commit string           `json:"commit"`
	Date   string           `json:"date"`
	CPUs   int              `json:"cpus"`
	Runs   []FenceWindowRun `json:"runs"`
}

const fenceWindowPrefix = "FENCE-WINDOW "

// ParseFenceWindowLines returns the FENCE-WINDOW lines of go test -v output.
func ParseFenceWindowLines(r io.Reader) ([]FenceWindowRun, error) {
	var out []FenceWindowRun
	scanner := bufio.NewScanner(r)
	scanner.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for scanner.Scan() {
		line := scanner.Text()
		i := strings.Index(line, fenceWindowPrefix)
		if i < 0 {
			continue
		}
		var run FenceWindowRun
		if err := json.Unmarshal([]byte(line[i+len(fenceWindowPrefix):]), &run); err != nil {
			return nil, fmt.Errorf("reading %q: %w", line, err)
		}
		out = append(out, run)
	}
	return out, scanner.Err()
}

// figures are the report's totals: takeovers, those in which a write of the old holder
// received after the takeover was admitted, and the windows' and completions' p50 and
// maximum.
func (r FenceWindowReport) figures() (takeovers, leaky int, windowP50, windowMax, completedP50, completedMax time.Duration) {
	var windows, completed []time.Duration
	for _, run := range r.Runs {
		takeovers += run.Takeovers
		for _, n := range run.AdmittedAfter {
			if n > 0 {
				leaky++
			}
		}
		for _, w := range run.WindowMicros {
			windows = append(windows, time.Duration(w)*time.Microsecond)
		}
		for _, c := range run.Completed {
			completed = append(completed, time.Duration(c)*time.Microsecond)
		}
	}
	p := func(ds []time.Duration, q float64) time.Duration {
		if len(ds) == 0 {
			return 0
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[min(len(ds)-1, int(q*float64(len(ds))))]
	}
	return takeovers, leaky, p(windows, 0.5), p(windows, 1), p(completed, 0.5), p(completed, 1)
}

// Headline is the line the docs quote.
func (r FenceWindowReport) Headline() string {
	takeovers, leaky, wp50, wmax, cp50, cmax := r.figures()
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
	return fmt.Sprintf("- `%s`, %s, %d runs, %d takeovers: a write of the old holder received after the apiserver had answered "+
		"the takeover was admitted in %d of them, at most %s after it (p50 %s); admitted writes were still being answered up "+
		"to %s after it (p50 %s).\n", r.Commit, r.Date, len(r.Runs), takeovers, leaky, ms(wmax), ms(wp50), ms(cmax), ms(cp50))
}

// Markdown renders the report.
func (r FenceWindowReport) Markdown() string {
	var b strings.Builder
	b.WriteString("# The apiserver fence's window (make bench-fence)\n\n")
	fmt.Fprintf(&b, "Commit `%s`, %s, %d CPUs. `TestAPIServerFenceWindowAfterATakeover` (test/e2e/ha), %d runs: a fenced "+
		"Lease moves between two writers seven times a run, the old holder writing in a loop from before each takeover "+
		"until it is refused; from the apiserver's audit log, how long after it answered the Lease update it still "+
		"admitted a write of the old holder (its policy reads the Lease through an informer, which lags the write), and "+
		"until when admitted writes were answered.\n\n", r.Commit, r.Date, r.CPUs, len(r.Runs))
	b.WriteString("| run | takeovers | admitted after the takeover, per takeover | last such write received after (µs) | admitted writes answered until (µs) |\n|---|---|---|---|---|\n")
	for i, run := range r.Runs {
		fmt.Fprintf(&b, "| %d | %d | %v | %v | %v |\n", i+1, run.Takeovers, run.AdmittedAfter, run.WindowMicros, run.Completed)
	}
	b.WriteString("\n" + strings.TrimPrefix(r.Headline(), "- "))
	return b.String()
}

// ReadFenceWindowReport reads a report make bench-fence wrote.
func ReadFenceWindowReport(path string) (FenceWindowReport, error) {
	var r FenceWindowReport
	data, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("reading %s: %w", path, err)
	}
	return r, nil
}

const (
	fenceHeadlineBegin = "<!-- fence window headline: "
	fenceHeadlineEnd   = "<!-- end fence window headline -->"
)

// QuoteFenceWindowHeadlines rewrites every quote of a fence window results file in doc.
func QuoteFenceWindowHeadlines(doc []byte, root string) ([]byte, int, error) {
	return quoteHeadlines(doc, fenceHeadlineBegin, fenceHeadlineEnd, func(path string) (string, error) {
		r, err := ReadFenceWindowReport(filepath.Join(root, path))
		if err != nil {
			return "", err
		}
		return r.Headline(), nil
	})
}
