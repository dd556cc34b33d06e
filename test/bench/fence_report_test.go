package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The window test's FENCE-WINDOW lines become a report whose headline counts the
// takeovers that let a write of the old holder through, and its worst window.
func TestFenceWindowLinesBecomeAHeadlineWithTheWorstWindow(t *testing.T) {
	output := `=== RUN   TestAPIServerFenceWindowAfterATakeover
    freeze_policy_test.go:222: FENCE-WINDOW {"takeovers":7,"admittedAfter":[0,1,0,0,0,0,0],"windowMicroseconds":[0,3400,0,0,0,0,0],"completedMicroseconds":[900,9800,1200,0,0,0,0]}
--- PASS: TestAPIServerFenceWindowAfterATakeover (3.31s)
=== RUN   TestAPIServerFenceWindowAfterATakeover
    freeze_policy_test.go:222: FENCE-WINDOW {"takeovers":7,"admittedAfter":[0,0,0,0,0,0,2],"windowMicroseconds":[0,0,0,0,0,0,1200],"completedMicroseconds":[0,0,0,0,0,0,2000]}
`
	runs, err := ParseFenceWindowLines(strings.NewReader(output))
	if err != nil || len(runs) != 2 {
		t.Fatalf("parsed %d runs, %v", len(runs), err)
	}
	r := FenceWindowReport{Commit: "abc", Date: "2026-12-07", CPUs: 2, Runs: runs}
	want := "2 runs, 14 takeovers: a write of the old holder received after the apiserver had answered the takeover was admitted in 2 of them, at most 3.4 ms after it (p50 0.0 ms); admitted writes were still being answered up to 9.8 ms after it (p50 0.0 ms)"
	if h := r.Headline(); !strings.Contains(h, want) {
		t.Errorf("headline %q\nwant it to say %q", h, want)
	}
}

// docs/fencing.md quotes make bench-fence's results as Headline renders them from the
// checked-in JSON, so the quote cannot drift from the figures.
func TestTheDocsQuoteTheFenceWindowAsMeasured(t *testing.T) {
	root := filepath.Join("..", "..")
	data, err := os.ReadFile(filepath.Join(root, "docs", "fencing.md"))
	if err != nil {
		t.Fatal(err)
	}
	quoted, n, err := QuoteFenceWindowHeadlines(data, root)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Errorf("docs/fencing.md quotes no make bench-fence headline (a %q marker)", fenceHeadlineBegin)
	}
	if string(quoted) != string(data) {
		t.Error("docs/fencing.md quotes figures other than its results file's: run `go run ./test/bench/cmd/fencebench --render test/bench/results/fence-window.json`")
	}
}
