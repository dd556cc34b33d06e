package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Targets of issue #17 for 3 replicas sharing 6 shards, against one leader.
const (
	// TargetShareDeviation is how far each replica's cached pods may be from an
	// equal share (±20%).
	TargetShareDeviation = 0.20
	// TargetShardedRSSRatio bounds each replica's peak RSS over the single leader's.
	TargetShardedRSSRatio = 0.4
)

// ShardReport is everything one sharding benchmark run measured.
type ShardReport struct {
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Commit   string    `json:"commit"`
	Machine  Machine   `json:"machine"`
	Scale    float64   `json:"scale"`
	// Namespaces is the number of tenant namespaces, MemoryPods and ThroughputPods the
	// pods of the memory and throughput runs.
	Namespaces     int `json:"namespaces"`
	MemoryPods     int `json:"memoryPods"`
	ThroughputPods int `json:"throughputPods"`
	// Replicas and Shards are the sharded memory run's.
	Replicas int `json:"replicas"`
	Shards   int `json:"shards"`
	// Settings are every replica's rate limit and workers.
	Settings        Settings `json:"settings"`
	RebalancePeriod string   `json:"rebalancePeriod"`
	// Controllers is every replica's --controllers, empty for the default.
	Controllers string `json:"controllers,omitempty"`
	// LeaseDuration, RenewDeadline and RetryPeriod are every replica's election timings.
	LeaseDuration    string `json:"leaseDuration"`
	RenewDeadline    string `json:"renewDeadline"`
	RetryPeriod      string `json:"retryPeriod"`
	RebalanceDefault string `json:"rebalanceThreshold"`

	Memory     []MemoryComparison `json:"memory"`
	Throughput []ThroughputRun    `json:"throughput"`
}

// MemoryComparison is one naming of the namespaces under one leader and under the
// sharded replicas.
type MemoryComparison struct {
	// Naming is "tenant" (tenant-000 …) or "random".
	Naming     string      `json:"naming"`
	Namespaces []string    `json:"namespaces"`
	Runs       []MemoryRun `json:"runs"`
}

// MemoryRun is one configuration on a fresh control plane.
type MemoryRun struct {
	Replicas    int        `json:"replicas"`
	Shards      int        `json:"shards"`
	LoadAverage [3]float64 `json:"loadAverage"`
	Pods        int        `json:"pods"`
	// CreateReadySeconds is the time from the first ReplicaSet's creation until every
	// ReplicaSet reported all its pods Ready.
	CreateReadySeconds float64 `json:"createReadySeconds"`
	// Epoch is the plan's active epoch at the end; Handovers are every epoch's.
	Epoch     int64      `json:"epoch"`
	Handovers []Handover `json:"handovers,omitempty"`
	// NamespacesPerShard and PodsPerShardByPlan are the final plan's shards as the
	// namespaces fall into them.
	NamespacesPerShard []int           `json:"namespacesPerShard,omitempty"`
	PodsPerShardByPlan []int           `json:"podsPerShardByPlan,omitempty"`
	PerReplica         []ReplicaResult `json:"perReplica"`
	// FirstAttemptError is set when the run was tried a second time.
	FirstAttemptError string `json:"firstAttemptError,omitempty"`
	Error             string `json:"error,omitempty"`
}

// ReplicaResult is one replica at the end of a memory run.
type ReplicaResult struct {
	Name string `json:"name"`
	// Shards are the shards whose Lease it holds at the end; with one shard, [0] for the
	// leader.
	Shards []int `json:"shards"`
	// PodsCached is the number of pods the apiserver lists for the selectors of its
	// shards: what its pod informers hold.
	PodsCached int `json:"podsCached"`
	// Coordinator is set on the replica that holds the base Lease and so weighs the
	// namespaces and writes the plan.
	Coordinator bool `json:"coordinator,omitempty"`
	// IdleRSSBytes is its RSS once it held its shards, before any tenant existed.
	IdleRSSBytes int64 `json:"idleRSSBytes"`
	PeakRSSBytes int64 `json:"peakRSSBytes"`
	RSSBytes     int64 `json:"rssBytes"`
	// AnonRSSBytes is the anonymous part of RSSBytes (RssAnon); the rest is file-backed,
	// mostly the binary. Zero in reports from before it was recorded.
	AnonRSSBytes int64 `json:"anonRSSBytes,omitempty"`
	// LiveHeapBytes is the Go heap left by a garbage collection at the end.
	LiveHeapBytes int64   `json:"liveHeapBytes"`
	CPUSeconds    float64 `json:"cpuSeconds"`
}

// Handover is one plan epoch: proposed (every shard drains and is released), active,
// and every shard held again. Times count from the start of the workload.
type Handover struct {
	Epoch               int64   `json:"epoch"`
	ProposedAtSeconds   float64 `json:"proposedAtSeconds"`
	ActivatedAtSeconds  float64 `json:"activatedAtSeconds"`
	AllHeldAtSeconds    float64 `json:"allHeldAtSeconds"`
	PauseSeconds        float64 `json:"pauseSeconds"`
	BeforeWorkloadBegan bool    `json:"beforeWorkloadBegan,omitempty"`
}

// ThroughputRun is one --shards value with the replicas on a fresh control plane.
type ThroughputRun struct {
	Replicas    int        `json:"replicas"`
	Shards      int        `json:"shards"`
	LoadAverage [3]float64 `json:"loadAverage"`
	// Pods is the number of pods created by the scale-up.
	Pods int `json:"pods"`
	// CreateReadySeconds is from the scale-up until every ReplicaSet reported all its
	// pods Ready; PodsPerSecond is Pods over it.
	CreateReadySeconds float64 `json:"createReadySeconds"`
	PodsPerSecond      float64 `json:"podsPerSecond"`
	// CreatesPerSecond is the replicas' pod creates over the time from the first one's
	// arrival to the last one's completion, from the audit log.
	CreatesPerSecond float64        `json:"createsPerSecond"`
	CreatesByReplica map[string]int `json:"createsByReplica"`
	// FailedCreates counts the pod creates the apiserver refused, by status code;
	// PodDeletes are the replicas' pod deletes (a scale-up needs none).
	FailedCreates map[string]int `json:"failedCreates,omitempty"`
	PodDeletes    int            `json:"podDeletes"`
	// CountedOutcomes is set when FailedCreates and PodDeletes were counted (reports
	// from before they were have neither).
	CountedOutcomes bool `json:"countedOutcomes,omitempty"`
	// CPU is every process's CPU over the scale-up.
	CPU []ProcessCPU `json:"cpu"`
	// Epoch is the plan's epoch during the run.
	Epoch                 int64       `json:"epoch"`
	APIServerProfile      string      `json:"apiServerProfile,omitempty"`
	APIServerProfileTop   *ProfileTop `json:"apiServerProfileTop,omitempty"`
	APIServerProfileError string      `json:"apiServerProfileError,omitempty"`
	Note                  string      `json:"note,omitempty"`
	// FirstAttemptError is set when the run was tried a second time.
	FirstAttemptError string `json:"firstAttemptError,omitempty"`
	Error             string `json:"error,omitempty"`
}

// ProcessCPU is one process's CPU time over a phase, and the cores that is.
type ProcessCPU struct {
	Process    string  `json:"process"`
	CPUSeconds float64 `json:"cpuSeconds"`
	Cores      float64 `json:"cores"`
}

// ReadShardReport reads a report that WriteFiles wrote as JSON and summarises its
// kube-apiserver profiles anew where their files are still there, so that a report
// can be rendered again after the renderer changed.
func ReadShardReport(ctx context.Context, path string) (*ShardReport, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := &ShardReport{}
	if err := json.Unmarshal(data, r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for i := range r.Throughput {
		t := &r.Throughput[i]
		if _, err := os.Stat(t.APIServerProfile); t.APIServerProfile == "" || err != nil {
			continue
		}
		if top, err := summarizeProfile(ctx, t.APIServerProfile); err == nil {
			t.APIServerProfileTop = top
		}
	}
	return r, nil
}

// WriteFiles writes the report as name.json and name.md into dir.
func (r *ShardReport) WriteFiles(dir, name string) error {
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

// Failed lists "run: error" for every failed run.
func (r *ShardReport) Failed() []string {
	var failed []string
	for _, m := range r.Memory {
		for _, run := range m.Runs {
			if run.Error != "" {
				failed = append(failed, fmt.Sprintf("memory %s %dx%d: %s", m.Naming, run.Replicas, run.Shards, firstLine(run.Error)))
			}
		}
	}
	for _, run := range r.Throughput {
		if run.Error != "" {
			failed = append(failed, fmt.Sprintf("throughput %dx%d: %s", run.Replicas, run.Shards, firstLine(run.Error)))
		}
	}
	return failed
}

// Markdown renders the report.
func (r *ShardReport) Markdown() string {
	var b strings.Builder
	b.WriteString("# Sharded mini-kcm against one leader (issue #17)\n\n")
	fmt.Fprintf(&b, "Measured %s at `%s` (`test/bench/cmd/shardbench`, scale %g: %d pods in the memory runs, %d in the throughput runs) in %s, on %d CPUs; load average %s at the start and %s at the end. "+
		"Every replica runs mini-kcm's default controllers with leader election on (`--leader-elect-lease-duration=%s --leader-elect-renew-deadline=%s --leader-elect-retry-period=%s`), `--kube-api-qps=%g --kube-api-burst=%d`, "+
		"%d workers per controller and `--shard-rebalance-period=%s` (threshold: the default, %s)%s, against a fresh control plane per run "+
		"(etcd, kube-apiserver with `--feature-gates=ShardedListAndWatch=true` and its audit log, kube-scheduler, KWOK with fake nodes). "+
		"CPU is utime+stime of each process, memory its VmHWM (peak), VmRSS (at the end) and RssAnon (its anonymous part at the end: without the binary's file-backed pages, which replicas on one node share), from /proc. "+
		"Pods cached per replica: the pods the apiserver lists for the shard selectors of the shards the replica holds at the end "+
		"(the holders of the shard Leases, matched to the identity each replica logs), which is what its informers list and watch: "+
		"client-go v0.37's informer metrics (queued items, processing latency, store resourceVersion) have no item count.\n\n",
		r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Commit, r.Scale, r.MemoryPods, r.ThroughputPods, r.Finished.Sub(r.Started).Round(time.Second),
		r.Machine.CPUs, formatLoad(r.Machine.LoadAverageStart), formatLoad(r.Machine.LoadAverageEnd),
		r.LeaseDuration, r.RenewDeadline, r.RetryPeriod, r.Settings.QPS, r.Settings.Burst, r.Settings.ConcurrentSyncs, r.RebalancePeriod, r.RebalanceDefault, controllersNote(r.Controllers))
	r.writeShardTargets(&b)
	for _, m := range r.Memory {
		writeMemory(&b, m)
	}
	if len(r.Throughput) > 0 {
		r.writeThroughput(&b)
	}
	return b.String()
}

// shareDeviation is the worst relative distance of a replica's cached pods from an
// equal share of the pods.
func (m MemoryRun) shareDeviation() (float64, string) {
	var worst float64
	var where string
	if m.Pods == 0 || len(m.PerReplica) == 0 {
		return math.NaN(), ""
	}
	fair := float64(m.Pods) / float64(len(m.PerReplica))
	for _, rep := range m.PerReplica {
		if d := math.Abs(float64(rep.PodsCached)-fair) / fair; d >= worst {
			worst, where = d, rep.Name
		}
	}
	return worst, where
}

func (m MemoryComparison) single() *MemoryRun {
	for i := range m.Runs {
		if m.Runs[i].Shards == 1 && m.Runs[i].Error == "" {
			return &m.Runs[i]
		}
	}
	return nil
}

func (m MemoryComparison) sharded() *MemoryRun {
	for i := range m.Runs {
		if m.Runs[i].Shards > 1 && m.Runs[i].Error == "" {
			return &m.Runs[i]
		}
	}
	return nil
}

func (r *ShardReport) writeShardTargets(b *strings.Builder) {
	b.WriteString("## Targets\n\n| target | measured | met |\n|---|---|---|\n")
	for _, m := range r.Memory {
		single, sharded := m.single(), m.sharded()
		if sharded == nil {
			fmt.Fprintf(b, "| %s names: each replica within ±%.0f%% of 1/%d of the pods | no complete sharded run | |\n",
				m.Naming, 100*TargetShareDeviation, r.Replicas)
			continue
		}
		dev, where := sharded.shareDeviation()
		fmt.Fprintf(b, "| %s names: each replica within ±%.0f%% of 1/%d of the pods | worst %s: %.0f%% off (pods per replica: %s) | %s |\n",
			m.Naming, 100*TargetShareDeviation, len(sharded.PerReplica), where, 100*dev, podsPerReplica(sharded), yesNo(dev <= TargetShareDeviation))
		if single == nil || len(single.PerReplica) == 0 {
			continue
		}
		leader := single.PerReplica[0].PeakRSSBytes
		worst := slices.MaxFunc(sharded.PerReplica, func(a, b ReplicaResult) int { return cmp.Compare(a.PeakRSSBytes, b.PeakRSSBytes) })
		ratio := float64(worst.PeakRSSBytes) / float64(leader)
		endWorst := slices.MaxFunc(sharded.PerReplica, func(a, b ReplicaResult) int { return cmp.Compare(a.RSSBytes, b.RSSBytes) })
		fmt.Fprintf(b, "| %s names: each replica's peak RSS ≤ %.1f× the single leader's | worst %s: %.0f / %.0f MiB = %.2f (RSS at the end: %.2f) | %s |\n",
			m.Naming, TargetShardedRSSRatio, worst.Name, mib(worst.PeakRSSBytes), mib(leader), ratio,
			float64(endWorst.RSSBytes)/float64(single.PerReplica[0].RSSBytes), yesNo(ratio <= TargetShardedRSSRatio))
		if lead := single.PerReplica[0]; lead.IdleRSSBytes > 0 && lead.PeakRSSBytes > lead.IdleRSSBytes {
			growth := func(r ReplicaResult) float64 {
				return float64(r.PeakRSSBytes-r.IdleRSSBytes) / float64(lead.PeakRSSBytes-lead.IdleRSSBytes)
			}
			var parts []string
			for _, rep := range sharded.PerReplica {
				parts = append(parts, fmt.Sprintf("%s %.2f", rep.Name, growth(rep)))
			}
			fmt.Fprintf(b, "| %s names (report): peak RSS above the RSS before the tenants, over the single leader's (%.0f − %.0f MiB) | %s | |\n",
				m.Naming, mib(lead.PeakRSSBytes), mib(lead.IdleRSSBytes), strings.Join(parts, ", "))
		}
		if lead := single.PerReplica[0]; lead.AnonRSSBytes > 0 {
			var parts []string
			for _, rep := range sharded.PerReplica {
				parts = append(parts, fmt.Sprintf("%s %.2f", rep.Name, float64(rep.AnonRSSBytes)/float64(lead.AnonRSSBytes)))
			}
			fmt.Fprintf(b, "| %s names (report): anonymous RSS at the end (RssAnon, without the binary's file pages), over the single leader's (%.0f MiB) | %s | |\n",
				m.Naming, mib(lead.AnonRSSBytes), strings.Join(parts, ", "))
		}
	}
	if len(r.Throughput) > 0 {
		var rates []string
		for _, t := range r.Throughput {
			if t.Error == "" {
				rates = append(rates, fmt.Sprintf("%d shards: %.0f", t.Shards, t.PodsPerSecond))
			}
		}
		fmt.Fprintf(b, "| throughput with N shards (report) | pods/s created and Ready: %s | |\n", strings.Join(rates, ", "))
	}
	b.WriteString("\n")
}

func controllersNote(controllers string) string {
	if controllers == "" {
		return ""
	}
	return " and `--controllers=" + controllers + "` instead of the default controllers"
}

func podsPerReplica(m *MemoryRun) string {
	var parts []string
	for _, rep := range m.PerReplica {
		parts = append(parts, fmt.Sprint(rep.PodsCached))
	}
	return strings.Join(parts, ", ")
}

func writeMemory(b *strings.Builder, m MemoryComparison) {
	title := "tenant-000 … tenant-NNN"
	if m.Naming == "random" {
		title = "randomly named namespaces"
	}
	fmt.Fprintf(b, "## Memory: %d namespaces, %s\n\n", len(m.Namespaces), title)
	if m.Naming == "random" && len(m.Namespaces) > 0 {
		fmt.Fprintf(b, "Ten random letters each (e.g. %s).\n\n", strings.Join(m.Namespaces[:min(4, len(m.Namespaces))], ", "))
	}
	b.WriteString("| run | replica | shards held | pods cached | share of pods | RSS before the tenants (MiB) | peak RSS (MiB) | RSS at the end (MiB) | of which anonymous (MiB) | live heap at the end (MiB) | CPU (s) |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, run := range m.Runs {
		label := fmt.Sprintf("%d replica(s), --shards=%d", run.Replicas, run.Shards)
		if run.Error != "" {
			fmt.Fprintf(b, "| %s | failed: %s | | | | | | | | | |\n", label, firstLine(run.Error))
			continue
		}
		for _, rep := range run.PerReplica {
			name := rep.Name
			if rep.Coordinator {
				name += " (coordinator)"
			}
			idle := "n/a"
			if rep.IdleRSSBytes > 0 {
				idle = fmt.Sprintf("%.0f", mib(rep.IdleRSSBytes))
			}
			anon := "n/a"
			if rep.AnonRSSBytes > 0 {
				anon = fmt.Sprintf("%.0f", mib(rep.AnonRSSBytes))
			}
			fmt.Fprintf(b, "| %s | %s | %s | %d | %.1f%% | %s | %.0f | %.0f | %s | %.0f | %.1f |\n", label, name, intsString(rep.Shards),
				rep.PodsCached, 100*float64(rep.PodsCached)/float64(max(run.Pods, 1)), idle, mib(rep.PeakRSSBytes), mib(rep.RSSBytes),
				anon, mib(rep.LiveHeapBytes), rep.CPUSeconds)
		}
	}
	b.WriteString("\n")
	for _, run := range m.Runs {
		if run.Error != "" {
			continue
		}
		fmt.Fprintf(b, "- %d replica(s), `--shards=%d`: %d pods created and Ready in %.1fs; load average at the start %s.",
			run.Replicas, run.Shards, run.Pods, run.CreateReadySeconds, formatLoad(run.LoadAverage))
		if run.FirstAttemptError != "" {
			fmt.Fprintf(b, " (Second attempt; the first failed: %s)", firstLine(run.FirstAttemptError))
		}
		if run.Shards > 1 {
			fmt.Fprintf(b, " Plan epoch at the end: %d; namespaces per shard %s, pods per shard %s.",
				run.Epoch, intsString(run.NamespacesPerShard), intsString(run.PodsPerShardByPlan))
			for _, h := range run.Handovers {
				when := fmt.Sprintf("proposed %.1fs after the tenants were created", h.ProposedAtSeconds)
				if h.BeforeWorkloadBegan {
					when = "the first cut, before the tenants existed"
				}
				pause := "not all held again"
				if h.PauseSeconds >= 0 {
					pause = fmt.Sprintf("%.1fs from proposal until every shard was held again (active after %.1fs)", h.PauseSeconds, h.ActivatedAtSeconds-h.ProposedAtSeconds)
				}
				fmt.Fprintf(b, " Epoch %d: %s; %s.", h.Epoch, when, pause)
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

func intsString(v []int) string {
	parts := make([]string, len(v))
	for i, n := range v {
		parts[i] = fmt.Sprint(n)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// throughputColumns are the processes shown in the throughput table, in order.
var throughputColumns = []string{"kube-apiserver", "etcd", "kwok", "kube-scheduler", allReplicas, benchProcess}

func (r *ShardReport) writeThroughput(b *strings.Builder) {
	fmt.Fprintf(b, "## Throughput: %d pods over %d tenant namespaces, %d replicas, by --shards\n\n", r.ThroughputPods, r.Namespaces, r.Replicas)
	b.WriteString("Each tenant's ReplicaSet starts at one pod; once the plan has settled on them (no handover for two rebalance periods), " +
		"every ReplicaSet is scaled up at once. Pods/s: the new pods over the time until every ReplicaSet reported them all Ready; " +
		"creates/s: the replicas' pod creates as the audit log times them. CPU in cores (CPU seconds per second) over the scale-up.\n\n")
	b.WriteString("| shards | pods | create + Ready (s) | pods/s | creates/s | " + strings.Join(throughputColumns, " | ") + " | all | load average at the start |\n")
	b.WriteString("|---" + strings.Repeat("|---", 5+len(throughputColumns)+1) + "|\n")
	for _, t := range r.Throughput {
		if t.Error != "" {
			fmt.Fprintf(b, "| %d | failed: %s |%s\n", t.Shards, firstLine(t.Error), strings.Repeat(" |", 4+len(throughputColumns)+1))
			continue
		}
		cores := map[string]float64{}
		var all float64
		for _, p := range t.CPU {
			cores[p.Process] = p.Cores
			if p.Process != allReplicas {
				all += p.Cores
			}
		}
		fmt.Fprintf(b, "| %d | %d | %.1f | %.0f | %.0f |", t.Shards, t.Pods, t.CreateReadySeconds, t.PodsPerSecond, t.CreatesPerSecond)
		for _, col := range throughputColumns {
			fmt.Fprintf(b, " %.2f |", cores[col])
		}
		fmt.Fprintf(b, " %.2f | %s |\n", all, formatLoad(t.LoadAverage))
	}
	b.WriteString("\n")
	for _, t := range r.Throughput {
		if t.Error != "" {
			continue
		}
		fmt.Fprintf(b, "- `--shards=%d` (plan epoch %d): pod creates by replica %s", t.Shards, t.Epoch, formatCounts(t.CreatesByReplica))
		if len(t.FailedCreates) > 0 {
			fmt.Fprintf(b, " (refused, by status code: %s)", formatCounts(t.FailedCreates))
		}
		if t.CountedOutcomes {
			fmt.Fprintf(b, "; pod deletes %d", t.PodDeletes)
		}
		if t.Note != "" {
			fmt.Fprintf(b, "; %s", t.Note)
		}
		if t.FirstAttemptError != "" {
			fmt.Fprintf(b, "; second attempt, the first failed: %s", firstLine(t.FirstAttemptError))
		}
		switch {
		case t.APIServerProfileTop != nil:
			var paths []string
			for _, p := range t.APIServerProfileTop.Paths {
				paths = append(paths, fmt.Sprintf("%s %.2fs (%.0f%%)", p.Path, p.Seconds, p.Percent))
			}
			var pkgs []string
			for _, p := range t.APIServerProfileTop.Packages[:min(3, len(t.APIServerProfileTop.Packages))] {
				pkgs = append(pkgs, fmt.Sprintf("%s %.1fs (%.0f%%)", p.Package, p.Seconds, p.Percent))
			}
			fmt.Fprintf(b, ". kube-apiserver CPU profile (%s): flat CPU by package %s; in and under (overlapping): %s",
				t.APIServerProfileTop.Summary, strings.Join(pkgs, ", "), strings.Join(paths, ", "))
		case t.APIServerProfileError != "":
			fmt.Fprintf(b, ". No kube-apiserver profile: %s", firstLine(t.APIServerProfileError))
		}
		b.WriteString(".\n")
	}
	b.WriteString("\n")
}

func formatCounts(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "(none)"
	}
	return strings.Join(parts, ", ")
}

// formatShares renders CPU shares for progress messages.
func formatShares(cpu []ProcessCPU) string {
	var parts []string
	for _, p := range cpu {
		parts = append(parts, fmt.Sprintf("%s %.2f", p.Process, p.Cores))
	}
	return strings.Join(parts, ", ")
}
