// Command podmem measures what one cached pod costs in the shared informers of
// mini-kcm and of kube-controller-manager, without a cluster: it decodes realistic pods
// (the bench-scale workload's: labels, owner references, node names, KWOK's statuses,
// managedFields; see pods.go) from their protobuf encoding, as a watch delivers them,
// through each one's decoder and cache transform, adds them to the pod informer's
// indexer with each one's indexes, and reads the heap after a forced collection:
//
//   - objects: the decoded and transformed pods themselves;
//   - store: the indexer's items and keys (a store without indexes);
//   - each index: what that index adds to such a store;
//   - decode garbage and add garbage: what decoding and transforming, and adding to
//     the indexer, allocated per pod beyond what stays.
//
// mini-kcm's pipeline is the product's own: caches/cachetrim's Decoder and Trimmer for the
// registry's declared pod fields, caches.Transform, and the indexes the
// registry's controllers add to the shared pod informer when they are built. Upstream's
// is what kube-controller-manager v1.37 runs for the same controllers: client-go's
// whole protobuf decoding, its informers' transform that drops managedFields, and the
// namespace and controller-ref indexes. mini-kcm-interned adds the interning transform
// of caches/cacheintern after the product's.
//
// Each implementation runs in a process of its own, so that their heaps do not mix:
//
//	go run ./test/bench/cmd/podmem --pods 30000 --out test/bench/results --name podmem
//
// The report quotes `go tool pprof -top` of each one's heap profile after the pods
// were cached (in use) and of everything allocated while caching them.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
)

// implementations are the pipelines podmem measures, in the report's order.
var implementations = []string{"upstream", "mini-kcm", "mini-kcm-interned"}

func main() {
	var (
		shape    podShape
		impls    = flag.String("implementations", strings.Join(implementations, ","), "the pipelines to measure, each in a process of its own")
		impl     = flag.String("implementation", "", "measure this one pipeline in this process and print its figures as JSON (used by the parent process)")
		out      = flag.String("out", "", "directory for <name>.md and <name>.json; empty writes none")
		profiles = flag.String("profiles", "", "directory for the heap profiles (default: a new temporary directory)")
		name     = flag.String("name", "podmem", "base name of the result files")
		rate     = flag.Int("mem-profile-rate", 4096, "runtime.MemProfileRate: bytes allocated per sample of the heap profiles")
	)
	flag.IntVar(&shape.pods, "pods", 30000, "pods to cache")
	flag.IntVar(&shape.deployments, "deployments", 100, "Deployments the pods belong to")
	flag.IntVar(&shape.replicaSetsPerDeployment, "replicasets-per-deployment", 3, "ReplicaSets of each Deployment that own pods")
	flag.IntVar(&shape.nodes, "nodes", 100, "KWOK nodes the pods run on")
	flag.Parse()
	if shape.pods < 1 || shape.deployments < 1 || shape.replicaSetsPerDeployment < 1 || shape.nodes < 1 {
		fail(fmt.Errorf("--pods, --deployments, --replicasets-per-deployment and --nodes must be at least 1"))
	}
	if *impl != "" {
		runtime.MemProfileRate = *rate
		m, err := measure(*impl, shape, *profiles)
		if err != nil {
			fail(err)
		}
		if err := json.NewEncoder(os.Stdout).Encode(m); err != nil {
			fail(err)
		}
		return
	}

	self, err := os.Executable()
	if err != nil {
		fail(err)
	}
	report := report{Shape: shapeJSON{shape.pods, shape.deployments, shape.replicaSetsPerDeployment, shape.nodes},
		Command: "go run ./test/bench/cmd/podmem " + strings.Join(os.Args[1:], " "), Date: time.Now().UTC().Format(time.RFC3339),
		GoVersion: runtime.Version(), PodStructBytes: int(unsafe.Sizeof(corev1.Pod{}))}
	profileDir := *profiles
	if profileDir == "" {
		if profileDir, err = os.MkdirTemp("", "podmem-"); err != nil {
			fail(err)
		}
	}
	if err := os.MkdirAll(profileDir, 0o755); err != nil {
		fail(err)
	}
	fmt.Fprintf(os.Stderr, "heap profiles in %s\n", profileDir)
	for _, impl := range strings.Split(*impls, ",") {
		args := append([]string{"--implementation", impl, "--profiles", profileDir, "--mem-profile-rate", fmt.Sprint(*rate)}, os.Args[1:]...)
		cmd := exec.Command(self, args...)
		cmd.Stderr = os.Stderr
		output, err := cmd.Output()
		if err != nil {
			fail(fmt.Errorf("measuring %s: %w", impl, err))
		}
		var m measurement
		if err := json.Unmarshal(output, &m); err != nil {
			fail(fmt.Errorf("reading the figures of %s: %w", impl, err))
		}
		m.InuseTop = pprofTop(m.InuseProfile, "inuse_space", m.BaseProfile)
		m.AllocTop = pprofTop(m.InuseProfile, "alloc_space", m.BaseProfile)
		report.Implementations = append(report.Implementations, m)
	}
	fmt.Print(report.markdown())
	if *out != "" {
		if err := report.write(*out, *name); err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "podmem:", err)
	os.Exit(1)
}

// pprofTop returns `go tool pprof -top` of profile for the sample index, less base:
// what caching the pods added.
func pprofTop(profile, sampleIndex, base string) string {
	cmd := exec.Command("go", "tool", "pprof", "-top", "-nodecount=20", "-sample_index="+sampleIndex, "-base="+base, profile)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Sprintf("go tool pprof failed: %v: %s", err, stderr.String())
	}
	// Keep the summary and the table, not the header naming the files.
	var lines []string
	for _, line := range strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n") {
		if strings.HasPrefix(line, "File:") || strings.HasPrefix(line, "Build ID:") || strings.HasPrefix(line, "Type:") || strings.HasPrefix(line, "Time:") {
			continue
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

// heapAfterGC returns the live heap after two forced collections (the second frees
// what the first's finalizers released).
func heapAfterGC() (live, totalAlloc, mallocs uint64) {
	runtime.GC()
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, ms.TotalAlloc, ms.Mallocs
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func profilePath(dir, impl, what string) string {
	return filepath.Join(dir, fmt.Sprintf("podmem-%s-%s.pprof", impl, what))
}
