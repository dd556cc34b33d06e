package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The outage test's RECOVERY lines, among go test -v's, become a report whose table
// shows each manager's change → first write per outage kind, and whose verdict names
// what missed the target.
func TestRecoveryLinesBecomeATablePerOutageKindAndAVerdict(t *testing.T) {
	output := `=== RUN   TestEveryReplicaActsSoonAfterAnOutageOfTheControlPlane
    outage_test.go:197: RECOVERY {"implementation":"%s","kind":"apiserver-frozen-30s","firstWriteSeconds":%s,"maxListsPerInformer":0,"maxRewatchSeconds":0.08}
    outage_test.go:197:   mini-kcm apiserver-frozen-30s: lists [], watched again after []
    outage_test.go:197: RECOVERY {"implementation":"%s","kind":"etcd-stopped-20s","firstWriteSeconds":%s,"maxListsPerInformer":%s}
    outage_test.go:239: RECOVERY {"implementation":"%s","kind":"all","leaderChanges":%s,"restarts":%s}
--- PASS: TestEveryReplicaActsSoonAfterAnOutageOfTheControlPlane (133.31s)
`
	run := func(impl, frozen, etcd, lists, changes, restarts string) RecoveryRun {
		text := strings.NewReplacer("%s", "\x00").Replace(output)
		for _, v := range []string{impl, frozen, impl, etcd, lists, impl, changes, restarts} {
			text = strings.Replace(text, "\x00", v, 1)
		}
		outages, err := ParseRecoveryLines(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		return RecoveryRun{Implementation: impl, Passed: true, Outages: outages}
	}
	report := RecoveryReport{Commit: "abc", Date: "2026-12-07", CPUs: 2, Runs: []RecoveryRun{
		run("mini-kcm", "0.05", "0.9", "1", "0", "0"),
		run("kube-controller-manager", "0.12", "3.4", "2", "1", "1"),
		run("kube-controller-manager", "0.13", "3.5", "1", "2", "2"),
		run("mini-kcm", "0.04", "0.1", "2", "0", "0"),
	}}
	md := report.Markdown()
	for _, want := range []string{
		"| apiserver-frozen-30s | 0.040–0.050 | 0.120–0.130 | 0.040–0.050 | 0.120–0.130 | 0 | 0.08 |",
		"| etcd-stopped-20s | 0.100–0.900 | 3.400–3.500 | 0.100–0.900 | 3.400–3.500 | 1–2 | – |",
		"| kube-controller-manager | 1–2 | 1–2 |",
		"Missed: etcd-stopped-20s: up to 0.900s; etcd-stopped-20s: 2 lists of one informer.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	if h := report.Headline(); !strings.Contains(h, "apiserver-frozen-30s 0.04–0.05 s against 0.12–0.13 s") {
		t.Errorf("headline %q", h)
	}
}

// docs/high-availability.md quotes make bench-recovery's results as Headline renders
// them from the checked-in JSON, so the quote cannot drift from the figures.
func TestTheDocsQuoteTheRecoveryResultsAsMeasured(t *testing.T) {
	root := filepath.Join("..", "..")
	doc := "docs/high-availability.md"
	data, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		t.Fatal(err)
	}
	quoted, n, err := QuoteRecoveryHeadlines(data, root)
	if err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	if n == 0 {
		t.Errorf("%s quotes no make bench-recovery headline (a %q marker)", doc, recoveryHeadlineBegin)
	}
	if string(quoted) != string(data) {
		t.Errorf("%s quotes figures other than its results file's: run `go run ./test/bench/cmd/recoverybench --render test/bench/results/recovery.json`", doc)
	}
}
