package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sampleReport() *Report {
	run := func(impl Implementation, cpu float64, rss int64, converge, writes, eventWrites float64) RunResult {
		return RunResult{
			Implementation:   impl,
			CPUSeconds:       cpu,
			PeakRSSBytes:     rss,
			PeakAnonRSSBytes: rss / 2,
			PeakFileRSSBytes: rss / 4,
			Requests:         RequestCounts{Writes: 1200, EventWrites: 100, ByVerbResource: map[string]int{"create pods": 1000, "list pods": 1}},
			Phases: []Phase{
				{Name: "start", ConvergeSeconds: 1, Requests: RequestCounts{Writes: 5}},
				{Name: "create to Ready", Objects: 1000, ConvergeSeconds: converge, CPUSeconds: cpu - 1,
					Requests: RequestCounts{Writes: int(writes), EventWrites: int(eventWrites), Reads: 2}, PodsPerSecond: 25},
				{Name: "all pods Ready again", Objects: 100, FromLastChange: true, ConvergeSeconds: converge / 1000},
			},
		}
	}
	return &Report{
		Commit:      "abc123",
		Scale:       1,
		Settings:    Settings{QPS: 20, Burst: 30, ConcurrentSyncs: 5},
		Controllers: "deployment-controller,replicaset-controller",
		BinaryBytes: map[Implementation]int64{Upstream: 120 << 20, MiniKCM: 30 << 20},
		Workloads: []WorkloadResult{
			{Name: "replicaset-1x1000", Description: "one ReplicaSet", Runs: []RunResult{
				run(Upstream, 10, 100<<20, 50, 1100, 50),
				run(MiniKCM, 5, 40<<20, 55, 1000, 100),
			}},
			{Name: "ceiling", Description: "plain client", Runs: []RunResult{
				{Implementation: MiniKCM, PeakRSSBytes: 64 << 20, PeakAnonRSSBytes: 40 << 20, PeakFileRSSBytes: 20 << 20, Phases: []Phase{{Name: "create to Ready, rate limit lifted", Objects: 1000,
					PodsPerSecond: 300, CeilingPodsPerSecond: 400}}},
				{Implementation: Upstream, Error: "upstream exited\nlog tail"},
			}},
		},
	}
}

func TestMarkdownShowsWorstRatioPerTargetAndFixedCost(t *testing.T) {
	md := sampleReport().Markdown()
	for _, want := range []string{
		"| time to converge (per phase) | ≤ 1.00 | 1.10 | replicaset-1x1000: create to Ready | **no** |",
		"| controller CPU (per workload) | ≤ 0.70 | 0.50 | replicaset-1x1000 | yes |",
		"| peak RSS (per workload) | ≤ 0.50 | 0.40 | replicaset-1x1000 | yes |",
		"| apiserver writes, events included (per phase) | ≤ 1.00 | 0.91 | replicaset-1x1000: create to Ready | yes |",
		"| apiserver writes, events excluded (per phase) | ≤ 1.00 | 0.86 | replicaset-1x1000: create to Ready | yes |",
		"| pod creation, rate limit lifted, vs plain client | ≥ 0.80 | 0.75 | ceiling: create to Ready, rate limit lifted | **no** |",
		"| create to Ready | 1000 | 50.0 / 55.0 = 1.10 | 9.00 / 4.00 = 0.44 | 1.10 / 1.00 = 0.91 | 0.05 / 0.10 = 2.00 | 0.00 / 0.00 = 1.00 | 25 / 25 = 1.00 |",
		"| all pods Ready again ¹ | 100 | 0.05 / 0.06 = 1.10 |",
		"Peak RSS (MiB): 100 / 40 = 0.40; sampled peaks: RssAnon (heap, stacks) 50 / 20 = 0.40, RssFile (mostly the binary) 25 / 10 = 0.40.",
		"Binary size (MiB): 120.0 / 30.0 = 0.25.",
		"run `--controllers=deployment-controller,replicaset-controller`",
		"| create pods | 1000 | 1000 |",
		"**upstream failed:** `upstream exited`",
		"mini-kcm alone:",
		"Whole run: CPU 0.00s, peak RSS 64 MiB (sampled peaks: RssAnon 40, RssFile 20 MiB).",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "list pods") {
		t.Error("the writes table lists a read")
	}
}

func TestWriteFilesWritesMatchingJSONAndMarkdown(t *testing.T) {
	dir := t.TempDir()
	r := sampleReport()
	if err := r.WriteFiles(dir, "latest"); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "latest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var decoded Report
	if err := json.Unmarshal(data, &decoded); err != nil {
		t.Fatal(err)
	}
	if len(decoded.Workloads) != 2 || decoded.Workloads[0].Runs[1].PeakRSSBytes != 40<<20 ||
		decoded.Workloads[0].Runs[1].PeakFileRSSBytes != 10<<20 || decoded.BinaryBytes[MiniKCM] != 30<<20 {
		t.Errorf("JSON does not round-trip: %+v", decoded.Workloads)
	}
	md, err := os.ReadFile(filepath.Join(dir, "latest.md"))
	if err != nil {
		t.Fatal(err)
	}
	if string(md) != r.Markdown() {
		t.Error("latest.md differs from Markdown()")
	}
}

func TestFailedListsFailedRuns(t *testing.T) {
	got := sampleReport().Failed()
	if len(got) != 1 || got[0] != "ceiling under upstream: upstream exited" {
		t.Errorf("Failed() = %q", got)
	}
}
