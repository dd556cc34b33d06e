package bench

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// profileResult is a CPU profile of kube-apiserver, read with `go tool pprof -top`.
type profileResult struct {
	path string
	top  *ProfileTop
	err  error
}

// ProfileTop is what a CPU profile says, in short.
type ProfileTop struct {
	// Summary is pprof's "Duration: …, Total samples = …" line.
	Summary string `json:"summary"`
	// Functions are the functions with the most CPU of their own (flat), as pprof
	// prints them.
	Functions []string `json:"functions"`
	// Packages sum the flat CPU by Go package.
	Packages []PackageCPU `json:"packages"`
	// KubernetesCumulative are the k8s.io functions with the most CPU spent in them and
	// what they called (cum), heaviest first: which of the apiserver's paths (request
	// handlers, watch cache, audit, storage) the CPU went through.
	KubernetesCumulative []string `json:"kubernetesCumulative"`
	// Paths are the CPU spent in and under a few functions that say where an
	// apiserver's work goes (cum, so they overlap: allocation happens inside storage
	// updates), in the order of profilePaths.
	Paths []PathCPU `json:"paths"`
	// cumulative maps every function of the profile to its cumulative CPU in seconds.
	cumulative map[string]float64
}

// PathCPU is the CPU spent in one function and everything it called.
type PathCPU struct {
	Path    string  `json:"path"`
	Seconds float64 `json:"seconds"`
	Percent float64 `json:"percent"`
}

// profilePaths name the functions whose cumulative CPU the report shows.
var profilePaths = []struct{ name, function string }{
	{"garbage collection", "runtime.gcBgMarkWorker"},
	{"allocation", "runtime.mallocgc"},
	{"storage updates (pod status, ReplicaSet status, Leases)", "k8s.io/apiserver/pkg/storage/etcd3.(*store).GuaranteedUpdate"},
	{"storage creates", "k8s.io/apiserver/pkg/storage/etcd3.(*store).Create"},
	{"audit: request objects", "k8s.io/apiserver/pkg/audit.LogRequestObject"},
	{"audit: log writes", "k8s.io/apiserver/plugin/pkg/audit/log.(*backend).ProcessEvents"},
	{"watch cache dispatch", "k8s.io/apiserver/pkg/storage/cacher.(*Cacher).dispatchEvents"},
	{"TLS writes", "crypto/tls.(*Conn).Write"},
}

// PackageCPU is the CPU a package's functions spent themselves.
type PackageCPU struct {
	Package string  `json:"package"`
	Seconds float64 `json:"seconds"`
	Percent float64 `json:"percent"`
}

// profileAPIServer takes a CPU profile of kube-apiserver (its /debug/pprof, which the
// admin user may read) and summarises it with the Go toolchain's pprof.
func (c *shardCluster) profileAPIServer(ctx context.Context, seconds int) profileResult {
	data, err := c.client.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
		Param("seconds", strconv.Itoa(seconds)).Timeout(time.Duration(seconds+60) * time.Second).DoRaw(ctx)
	if err != nil {
		return profileResult{err: fmt.Errorf("profiling kube-apiserver: %w", err)}
	}
	path := filepath.Join(c.logDir, "kube-apiserver-cpu.pprof")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return profileResult{err: err}
	}
	top, err := summarizeProfile(ctx, path)
	return profileResult{path: path, top: top, err: err}
}

// summarizeProfile summarises a CPU profile file with the Go toolchain's pprof.
func summarizeProfile(ctx context.Context, path string) (*ProfileTop, error) {
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=100000", path).Output()
	if err != nil {
		return nil, fmt.Errorf("go tool pprof -top %s: %w", path, err)
	}
	return parsePprofTop(string(out), 10, 10), nil
}

// parsePprofTop reads `go tool pprof -top` output: the summary line, the first
// functions rows as printed and the flat CPU per package, heaviest first.
func parsePprofTop(out string, functions, packages int) *ProfileTop {
	top := &ProfileTop{}
	var total float64
	byPackage := map[string]float64{}
	type cumulative struct {
		seconds float64
		line    string
	}
	var cums []cumulative
	pathCum := map[string]float64{}
	header := false
	for line := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(line, "Duration:") {
			top.Summary = strings.TrimSpace(line)
		}
		if !header {
			header = strings.Contains(line, "flat%") && strings.Contains(line, "cum%")
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 6 {
			continue
		}
		flat, err := time.ParseDuration(fields[0])
		if err != nil {
			continue
		}
		name := strings.Join(fields[5:], " ")
		if len(top.Functions) < functions {
			top.Functions = append(top.Functions, strings.TrimSpace(line))
		}
		byPackage[packageOf(name)] += flat.Seconds()
		cum, err := time.ParseDuration(fields[3])
		if err != nil {
			continue
		}
		if strings.HasPrefix(name, "k8s.io/") {
			cums = append(cums, cumulative{cum.Seconds(), strings.TrimSpace(line)})
		}
		pathCum[name] = cum.Seconds()
		total += flat.Seconds()
	}
	for pkg, seconds := range byPackage {
		top.Packages = append(top.Packages, PackageCPU{Package: pkg, Seconds: seconds, Percent: 100 * seconds / max(total, 1e-9)})
	}
	slices.SortFunc(top.Packages, func(a, b PackageCPU) int { return cmp.Compare(b.Seconds, a.Seconds) })
	top.Packages = top.Packages[:min(packages, len(top.Packages))]
	top.cumulative = pathCum
	for _, p := range profilePaths {
		if seconds, ok := pathCum[p.function]; ok {
			top.Paths = append(top.Paths, PathCPU{Path: p.name, Seconds: seconds, Percent: 100 * seconds / max(total, 1e-9)})
		}
	}
	slices.SortStableFunc(cums, func(a, b cumulative) int { return cmp.Compare(b.seconds, a.seconds) })
	for _, c := range cums[:min(functions, len(cums))] {
		top.KubernetesCumulative = append(top.KubernetesCumulative, c.line)
	}
	return top
}

// packageOf returns the import path of a function name as pprof prints it:
// "k8s.io/apiserver/pkg/storage/cacher.(*Cacher).dispatchEvent" is in
// "k8s.io/apiserver/pkg/storage/cacher", "runtime.mallocgc" in "runtime".
func packageOf(function string) string {
	slash := strings.LastIndexByte(function, '/')
	dot := strings.IndexByte(function[slash+1:], '.')
	if dot < 0 {
		return function
	}
	return function[:slash+1+dot]
}
