package bench

import (
	"fmt"
	"time"
)

// Report is everything one benchmark run measured; it is written as JSON and rendered
// as Markdown.
type Report struct {
	// Started and Finished bound the run.
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Commit is the mini-kcm commit measured (git describe).
	Commit string `json:"commit"`
	// Machine describes where the numbers come from.
	Machine Machine `json:"machine"`
	// Scale multiplied the default workload sizes into Sizes.
	Scale float64 `json:"scale"`
	Sizes Sizes   `json:"sizes"`
	// Settings are the rate limits and worker counts of both controller managers.
	Settings Settings `json:"settings"`
	// LiftedSettings are used by the ceiling workload.
	LiftedSettings Settings `json:"liftedSettings"`
	// RaisedSettings are used by the endpoints-raised workload.
	RaisedSettings Settings `json:"raisedSettings"`
	// Controllers is the --controllers value of both controller managers in every
	// workload that names none of its own (benchedControllers).
	Controllers string `json:"controllers,omitempty"`
	// BinaryBytes is the size of each controller manager's binary.
	BinaryBytes map[Implementation]int64 `json:"binaryBytes,omitempty"`
	// Workloads are in the order they ran.
	Workloads []WorkloadResult `json:"workloads"`
}

// Machine describes the host and how busy it was.
type Machine struct {
	CPUs int `json:"cpus"`
	// LoadAverage is the 1, 5 and 15 minute load average when the run started and
	// when it finished; other work on a shared machine makes the numbers noisy.
	LoadAverageStart [3]float64 `json:"loadAverageStart"`
	LoadAverageEnd   [3]float64 `json:"loadAverageEnd"`
}

// WorkloadResult holds one workload's runs, one per controller manager.
type WorkloadResult struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Runs are in the order they ran (upstream first by default).
	Runs []RunResult `json:"runs"`
}

// RunResult is one workload under one controller manager, on a fresh control plane.
type RunResult struct {
	Implementation Implementation `json:"implementation"`
	Settings       Settings       `json:"settings"`
	// LoadAverage is the machine's load average (1, 5, 15 minutes) when the run began.
	LoadAverage [3]float64 `json:"loadAverage"`
	// Phases are in order; the first is the start of the controller manager.
	Phases []Phase `json:"phases"`
	// CPUSeconds is the controller manager's CPU time over the whole run, start-up
	// included.
	CPUSeconds float64 `json:"cpuSeconds"`
	// PeakRSSBytes is the controller manager's resident-memory high-water mark.
	PeakRSSBytes int64 `json:"peakRSSBytes"`
	// PeakAnonRSSBytes and PeakFileRSSBytes are the highest RssAnon (heap, stacks) and
	// RssFile (mostly the binary's pages) sampled over the run; zero in reports from
	// before they were recorded.
	PeakAnonRSSBytes int64 `json:"peakAnonRSSBytes,omitempty"`
	PeakFileRSSBytes int64 `json:"peakFileRSSBytes,omitempty"`
	// Requests are all requests of the controller manager in the run.
	Requests RequestCounts `json:"requests"`
	// CPUProfile is where the controller manager's CPU went in a profiled window, for
	// the workloads that profile one (scale).
	CPUProfile *CPUBreakdown `json:"cpuProfile,omitempty"`
	// Error is set when the run failed; its phases are then incomplete.
	Error string `json:"error,omitempty"`
}

// Phase is one step of a workload, from the benchmark's action until the cluster has
// converged and the controller manager has gone quiet.
type Phase struct {
	Name string `json:"name"`
	// Objects is the number of objects the phase converges (pods created, deleted or
	// flipped, or Endpoints written), the denominator of the per-object numbers.
	Objects int `json:"objects"`
	// FromLastChange marks phases whose time to converge counts from the end of the
	// benchmark's action rather than its start: the action (thousands of pod status
	// patches) takes seconds itself, the same for both controller managers.
	FromLastChange bool `json:"fromLastChange,omitempty"`
	// ConvergeSeconds is the time from the action (its end if FromLastChange) until the
	// cluster converged: until the benchmark's caches saw the change that completed it.
	ConvergeSeconds float64 `json:"convergeSeconds"`
	// CPUSeconds is the controller manager's CPU time in the phase.
	CPUSeconds float64 `json:"cpuSeconds"`
	// PeakRSSBytes is the controller manager's memory high-water mark at the phase end.
	PeakRSSBytes int64 `json:"peakRSSBytes"`
	// Requests are the controller manager's requests in the phase.
	Requests RequestCounts `json:"requests"`
	// PodsPerSecond is the pod creation rate, for phases that create pods in bulk:
	// pod creates divided by the time from the first one's arrival at the apiserver
	// to the last one's completion.
	PodsPerSecond float64 `json:"podsPerSecond,omitempty"`
	// CeilingPodsPerSecond is the rate of a plain client-go program with no rate limit
	// creating the same pods against the same control plane (ceiling workload only).
	CeilingPodsPerSecond float64 `json:"ceilingPodsPerSecond,omitempty"`
}

// Failed lists "workload under implementation: error" for every failed run.
func (r *Report) Failed() []string {
	var failed []string
	for _, w := range r.Workloads {
		for _, run := range w.Runs {
			if run.Error != "" {
				failed = append(failed, fmt.Sprintf("%s under %s: %s", w.Name, run.Implementation, firstLine(run.Error)))
			}
		}
	}
	return failed
}
