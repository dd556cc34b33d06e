package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Targets are the ratios (mini-kcm / upstream) mini-kcm aims for at equal settings.
const (
	TargetConvergeRatio = 1.0
	TargetCPURatio      = 0.7
	TargetRSSRatio      = 0.5
	TargetWritesRatio   = 1.0
	// TargetCeilingRatio is the least share of the plain client's pod creation rate
	// mini-kcm reaches with its rate limit lifted.
	TargetCeilingRatio = 0.8
)

// WriteFiles writes the report as name.json and name.md into dir.
func (r *Report) WriteFiles(dir, name string) error {
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

// ratio is one mini-kcm / upstream comparison that a target applies to.
type ratio struct {
	where string
	value float64
}

// Markdown renders the report: how and where it was measured, the targets with the
// worst ratio found for each, and a table per workload.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# mini-kcm and kube-controller-manager %s side by side\n\n", "v1.37.2")
	fmt.Fprintf(&b, "Measured %s at `%s` (`make bench`, scale %g) in %s, on %d CPUs; load average %s at the start and %s at the end.\n\n",
		r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Commit, r.Scale, r.Finished.Sub(r.Started).Round(time.Second),
		r.Machine.CPUs, formatLoad(r.Machine.LoadAverageStart), formatLoad(r.Machine.LoadAverageEnd))
	fmt.Fprintf(&b, "Both controller managers run `--controllers=%s` (the workloads named for one controller: that controller alone) with `--kube-api-qps=%g --kube-api-burst=%d`, "+
		"%d workers per controller and no leader election (the endpoints-raised workload: `--kube-api-qps=%g --kube-api-burst=%d`; "+
		"the ceiling workload: `--kube-api-qps=%g --kube-api-burst=%d`). "+
		"Each workload runs under upstream, then under mini-kcm, each on a fresh control plane "+
		"(etcd, kube-apiserver, kube-scheduler, KWOK fake nodes). Cells read `upstream / mini-kcm = ratio`; "+
		"a ratio below 1 means mini-kcm uses less. CPU is utime+stime of the process, memory its VmHWM, split into the peaks of RssAnon and RssFile sampled every %v, "+
		"requests are counted in the apiserver's audit log by the controller manager's user, events included. "+
		"A phase ends when the cluster converged and the controller manager made no write for %v (at most %v later). "+
		"Events are shown apart: upstream sends them through each controller's client, sharing its rate limit, and drops "+
		"events when its queue overflows; mini-kcm sends them through a client of their own and drops none.\n\n",
		r.Controllers, r.Settings.QPS, r.Settings.Burst, r.Settings.ConcurrentSyncs, r.RaisedSettings.QPS, r.RaisedSettings.Burst,
		r.LiftedSettings.QPS, r.LiftedSettings.Burst, memorySampleInterval, quietPeriod, maxSettle)
	r.writeFixedCost(&b)

	r.writeTargets(&b)
	for _, w := range r.Workloads {
		writeWorkload(&b, w)
	}
	return b.String()
}

// writeFixedCost states what each controller manager costs before any object: its
// binary's size, which its file-backed RSS follows.
func (r *Report) writeFixedCost(b *strings.Builder) {
	up, mini := r.BinaryBytes[Upstream], r.BinaryBytes[MiniKCM]
	switch {
	case up > 0 && mini > 0:
		fmt.Fprintf(b, "Binary size (MiB): %s.\n\n", cell(mib(up), mib(mini), "%.1f"))
	case mini > 0:
		fmt.Fprintf(b, "mini-kcm binary size: %.1f MiB.\n\n", mib(mini))
	}
}

func (r *Report) writeTargets(b *strings.Builder) {
	var converge, cpu, rss, writes, controllerWrites, ceiling []ratio
	for _, w := range r.Workloads {
		up, mini := w.run(Upstream), w.run(MiniKCM)
		if mini != nil && mini.Error == "" {
			for _, p := range mini.Phases {
				if p.CeilingPodsPerSecond > 0 && p.PodsPerSecond > 0 {
					ceiling = append(ceiling, ratio{w.Name + ": " + p.Name, p.PodsPerSecond / p.CeilingPodsPerSecond})
				}
			}
		}
		if up == nil || mini == nil || up.Error != "" || mini.Error != "" {
			continue
		}
		cpu = append(cpu, ratio{w.Name, mini.CPUSeconds / up.CPUSeconds})
		rss = append(rss, ratio{w.Name, float64(mini.PeakRSSBytes) / float64(up.PeakRSSBytes)})
		for _, mp := range mini.Phases {
			up := up.phase(mp.Name)
			if up == nil || mp.Name == "start" {
				continue
			}
			where := w.Name + ": " + mp.Name
			converge = append(converge, ratio{where, mp.ConvergeSeconds / up.ConvergeSeconds})
			if up.Requests.Writes > 0 {
				writes = append(writes, ratio{where, float64(mp.Requests.Writes) / float64(up.Requests.Writes)})
			}
			if upWrites := up.Requests.Writes - up.Requests.EventWrites; upWrites > 0 {
				controllerWrites = append(controllerWrites, ratio{where, float64(mp.Requests.Writes-mp.Requests.EventWrites) / float64(upWrites)})
			}
		}
	}
	b.WriteString("## Targets\n\n| measure | target | worst ratio | where | met |\n|---|---|---|---|---|\n")
	row := func(measure string, target float64, ratios []ratio, higherIsBetter bool) {
		if len(ratios) == 0 {
			fmt.Fprintf(b, "| %s | | no complete runs | | |\n", measure)
			return
		}
		worst := slices.MaxFunc(ratios, func(a, b ratio) int {
			if higherIsBetter {
				return cmp.Compare(b.value, a.value)
			}
			return cmp.Compare(a.value, b.value)
		})
		met := worst.value <= target
		op := "≤"
		if higherIsBetter {
			met, op = worst.value >= target, "≥"
		}
		fmt.Fprintf(b, "| %s | %s %.2f | %.2f | %s | %s |\n", measure, op, target, worst.value, worst.where, yesNo(met))
	}
	row("time to converge (per phase)", TargetConvergeRatio, converge, false)
	row("controller CPU (per workload)", TargetCPURatio, cpu, false)
	row("peak RSS (per workload)", TargetRSSRatio, rss, false)
	row("apiserver writes, events included (per phase)", TargetWritesRatio, writes, false)
	row("apiserver writes, events excluded (per phase)", TargetWritesRatio, controllerWrites, false)
	row("pod creation, rate limit lifted, vs plain client", TargetCeilingRatio, ceiling, true)
	b.WriteString("\n")
}

func writeWorkload(b *strings.Builder, w WorkloadResult) {
	fmt.Fprintf(b, "## %s\n\n%s.\n\n", w.Name, w.Description)
	up, mini := w.run(Upstream), w.run(MiniKCM)
	for _, run := range w.Runs {
		if run.Error != "" {
			fmt.Fprintf(b, "**%s failed:** `%s`\n\n", run.Implementation, firstLine(run.Error))
		}
	}
	if up == nil || mini == nil || up.Error != "" || mini.Error != "" {
		for _, run := range w.Runs {
			if len(run.Phases) > 0 {
				writeSingleRun(b, run)
			}
		}
		return
	}
	b.WriteString("| phase | objects | time to converge (s) | CPU (s) | writes per object | of which events | reads per object | pods/s |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, mp := range mini.Phases {
		p := mp
		upPhase := up.phase(mp.Name)
		if upPhase == nil {
			continue
		}
		name, convergeFormat := p.Name, "%.1f"
		if p.FromLastChange {
			// Sub-second lags, which a tenth of a second would blur.
			name, convergeFormat = name+" ¹", "%.2f"
		}
		perObject := func(n int, objects int) float64 {
			if objects == 0 {
				return float64(n)
			}
			return float64(n) / float64(objects)
		}
		objects := fmt.Sprint(p.Objects)
		if p.Objects == 0 {
			objects = "(totals)"
		}
		rate := ""
		if p.PodsPerSecond > 0 || upPhase.PodsPerSecond > 0 {
			rate = cell(upPhase.PodsPerSecond, p.PodsPerSecond, "%.0f")
			if p.CeilingPodsPerSecond > 0 {
				rate += fmt.Sprintf("; plain client %.0f", p.CeilingPodsPerSecond)
			}
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", name, objects,
			cell(upPhase.ConvergeSeconds, p.ConvergeSeconds, convergeFormat),
			cell(upPhase.CPUSeconds, p.CPUSeconds, "%.2f"),
			cell(perObject(upPhase.Requests.Writes, upPhase.Objects), perObject(p.Requests.Writes, p.Objects), "%.2f"),
			cell(perObject(upPhase.Requests.EventWrites, upPhase.Objects), perObject(p.Requests.EventWrites, p.Objects), "%.2f"),
			cell(perObject(upPhase.Requests.Reads, upPhase.Objects), perObject(p.Requests.Reads, p.Objects), "%.2f"),
			rate)
	}
	fmt.Fprintf(b, "| **whole run** | | | %s | | | | |\n\n", cell(up.CPUSeconds, mini.CPUSeconds, "%.2f"))
	fmt.Fprintf(b, "Peak RSS (MiB): %s%s. Load average at the start: upstream %s, mini-kcm %s.\n\n",
		cell(mib(up.PeakRSSBytes), mib(mini.PeakRSSBytes), "%.0f"), rssSplit(up, mini), formatLoad(up.LoadAverage), formatLoad(mini.LoadAverage))
	if slices.ContainsFunc(mini.Phases, func(p Phase) bool { return p.FromLastChange }) {
		b.WriteString("¹ Time to converge from the benchmark's last pod status patch, which came seconds after the first.\n\n")
	}
	fmt.Fprintf(b, "Writes by request, whole run:\n\n| request | upstream | mini-kcm |\n|---|---|---|\n")
	keys := map[string]int{}
	for k := range up.Requests.ByVerbResource {
		keys[k] = 0
	}
	for k := range mini.Requests.ByVerbResource {
		keys[k] = 0
	}
	for _, k := range sortedKeys(keys) {
		verb, _, _ := strings.Cut(k, " ")
		if !isWrite(verb) {
			continue
		}
		fmt.Fprintf(b, "| %s | %d | %d |\n", k, up.Requests.ByVerbResource[k], mini.Requests.ByVerbResource[k])
	}
	b.WriteString("\n")
}

// writeSingleRun lists the phases of a run that has no counterpart to compare with.
func writeSingleRun(b *strings.Builder, run RunResult) {
	fmt.Fprintf(b, "%s alone:\n\n| phase | objects | time to converge (s) | CPU (s) | writes | reads | pods/s |\n|---|---|---|---|---|---|---|\n", run.Implementation)
	for _, p := range run.Phases {
		fmt.Fprintf(b, "| %s | %d | %.1f | %.2f | %d | %d | %.0f |\n", p.Name, p.Objects, p.ConvergeSeconds, p.CPUSeconds,
			p.Requests.Writes, p.Requests.Reads, p.PodsPerSecond)
	}
	fmt.Fprintf(b, "\nWhole run: CPU %.2fs, peak RSS %.0f MiB%s.\n\n", run.CPUSeconds, mib(run.PeakRSSBytes), rssSplit(nil, &run))
}

// rssSplit renders the sampled peaks of RssAnon and RssFile of mini's run, side by side
// with up's when up is not nil; empty for runs that did not record them.
func rssSplit(up, mini *RunResult) string {
	if mini.PeakAnonRSSBytes == 0 {
		return ""
	}
	if up == nil {
		return fmt.Sprintf(" (sampled peaks: RssAnon %.0f, RssFile %.0f MiB)", mib(mini.PeakAnonRSSBytes), mib(mini.PeakFileRSSBytes))
	}
	if up.PeakAnonRSSBytes == 0 {
		return ""
	}
	return fmt.Sprintf("; sampled peaks: RssAnon (heap, stacks) %s, RssFile (mostly the binary) %s",
		cell(mib(up.PeakAnonRSSBytes), mib(mini.PeakAnonRSSBytes), "%.0f"),
		cell(mib(up.PeakFileRSSBytes), mib(mini.PeakFileRSSBytes), "%.0f"))
}

// run returns the workload's run under impl, or nil.
func (w WorkloadResult) run(impl Implementation) *RunResult {
	for i := range w.Runs {
		if w.Runs[i].Implementation == impl {
			return &w.Runs[i]
		}
	}
	return nil
}

// phase returns the run's phase called name, or nil.
func (r *RunResult) phase(name string) *Phase {
	for i := range r.Phases {
		if r.Phases[i].Name == name {
			return &r.Phases[i]
		}
	}
	return nil
}

// cell formats "upstream / mini-kcm = ratio".
func cell(up, mini float64, format string) string {
	s := fmt.Sprintf(format+" / "+format, up, mini)
	if up > 0 {
		s += fmt.Sprintf(" = %.2f", mini/up)
	}
	return s
}

func mib(bytes int64) float64 { return float64(bytes) / (1 << 20) }

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
