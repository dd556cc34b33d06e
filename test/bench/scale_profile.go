package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// scaleProfileSeconds is how long the scale workload profiles each controller
// manager's CPU, from the start of its rolling update: the phase that spends most of
// it (about 100 s or more at every scale the workload runs), the same window for both.
const scaleProfileSeconds = 60

// CPUBreakdown is where a controller manager's CPU went in a profiled window: its flat
// CPU summed by the packages that spent it (cpuGroups), and the cumulative CPU of each
// controller's syncs and of the runtime's collector and allocator (cpuRoots), from
// `go tool pprof -top`.
type CPUBreakdown struct {
	// Window names the phase the profile started with, and its length.
	Window string `json:"window"`
	// Summary is pprof's "Duration: …, Total samples = …" line.
	Summary string `json:"summary"`
	// Seconds is the CPU the profile sampled.
	Seconds float64 `json:"seconds"`
	// Groups are the flat CPU of each of cpuGroups, in their order.
	Groups []PackageCPU `json:"groups"`
	// Paths are the cumulative CPU of each of cpuRoots, in their order.
	Paths []PathCPU `json:"paths"`
	// Functions are the ten functions with the most flat CPU, as pprof prints them.
	Functions []string `json:"functions"`
	// Error is why there is no profile, when there is none.
	Error string `json:"error,omitempty"`
}

// cpuGroups sort a profile's functions by what spent their CPU, by the prefixes of
// their packages; the first group a package matches is its group. The controllers'
// own code is mini-kcm's or kube-controller-manager's; everything below it is shared
// by both: client-go, the API types' decoding and encoding, the network stack, Go's
// runtime.
var cpuGroups = []struct {
	name     string
	prefixes []string
}{
	{"controllers and their manager (mini-kcm's, kube-controller-manager's, k8s.io/endpointslice)", []string{
		"github.com/mini-kcm/", "k8s.io/kubernetes/", "k8s.io/endpointslice", "k8s.io/controller-manager", "main"}},
	{"client-go (informers, caches, queues, REST client, rate limiter)", []string{"k8s.io/client-go/"}},
	{"object hashing: go-spew dumps and FNV (DeepHashObject, upstream's and k8s.io/endpointslice's)", []string{
		"github.com/davecgh/go-spew", "hash/"}},
	{"API objects: decoding, encoding, copying (k8s.io/apimachinery, k8s.io/api, protobuf, JSON, reflect)", []string{
		"k8s.io/apimachinery/", "k8s.io/api/", "google.golang.org/protobuf", "github.com/gogo/protobuf", "github.com/golang/protobuf",
		"encoding/", "sigs.k8s.io/", "reflect", "strconv", "unicode", "bytes", "strings", "sort", "slices", "maps", "fmt"}},
	{"network: TLS, HTTP/2, sockets", []string{
		"crypto/", "vendor/golang.org/x/crypto", "golang.org/x/crypto", "net", "golang.org/x/net/", "vendor/golang.org/x/net",
		"internal/poll", "syscall", "bufio", "io", "os"}},
	{"Go runtime: garbage collection, allocation, scheduling, maps", []string{"runtime", "internal/", "sync", "time", "weak", "unique",
		// The runtime's assembly: map hashing, comparisons, write barriers, type equality.
		"aeshashbody", "memhash", "memeqbody", "cmpbody", "indexbytebody", "countbody", "gcWriteBarrier", "callRet", "gogo", "type:"}},
}

// cpuRoots name the functions whose cumulative CPU (theirs and their callees') a
// breakdown shows: each controller's syncs, as mini-kcm and kube-controller-manager
// name them, the informers' decoding, and the runtime's collector and allocator. They
// overlap (allocation happens everywhere), so they do not add up.
var cpuRoots = []struct {
	name      string
	functions []string
}{
	{"EndpointSlice controller's Service syncs", []string{
		"github.com/mini-kcm/mini-kcm/controllers/endpointslice.(*Controller).syncService",
		"k8s.io/kubernetes/pkg/controller/endpointslice.(*Controller).syncService"}},
	{"… of which k8s.io/endpointslice's reconciler (one library, in both)", []string{"k8s.io/endpointslice.(*Reconciler).Reconcile"}},
	{"Endpoints controller's Service syncs", []string{
		"github.com/mini-kcm/mini-kcm/controllers/endpoints.(*Controller).syncService",
		"k8s.io/kubernetes/pkg/controller/endpoint.(*Controller).syncService"}},
	{"ReplicaSet controller's syncs", []string{
		"github.com/mini-kcm/mini-kcm/controllers/replicaset.(*Controller).syncReplicaSet",
		"k8s.io/kubernetes/pkg/controller/replicaset.(*ReplicaSetController).syncReplicaSet"}},
	{"Deployment controller's syncs", []string{
		"github.com/mini-kcm/mini-kcm/controllers/deployment.(*Controller).syncDeployment",
		"k8s.io/kubernetes/pkg/controller/deployment.(*DeploymentController).syncDeployment"}},
	{"watch events decoded (informers)", []string{"k8s.io/apimachinery/pkg/watch.(*StreamWatcher).receive"}},
	{"garbage collection (background marking)", []string{"runtime.gcBgMarkWorker"}},
	{"allocation (mallocgc)", []string{"runtime.mallocgc"}},
}

// groupOf returns the name of package pkg's group in cpuGroups, or "other".
func groupOf(pkg string) string {
	for _, g := range cpuGroups {
		for _, prefix := range g.prefixes {
			if pkg == prefix || strings.HasPrefix(pkg, prefix) && (strings.HasSuffix(prefix, "/") || pkg[len(prefix)] == '/' || pkg[len(prefix)] == '.') {
				return g.name
			}
		}
	}
	return "other"
}

// startCPUProfile starts a CPU profile of the run's controller manager over seconds
// from now, through its /debug/pprof (which the benchmark's controller managers allow
// without credentials). The returned function waits for the profile, keeps it in the
// run's log directory and summarises it; it never fails the run, a profile that could
// not be taken says why in its Error.
func (e *env) startCPUProfile(ctx context.Context, window string, seconds int) func() *CPUBreakdown {
	done := make(chan *CPUBreakdown, 1)
	go func() {
		b, err := e.profileCPU(ctx, window, seconds)
		if err != nil {
			e.cfg.Logf("   profiling %s's CPU: %v", e.kcm.impl, err)
			b = &CPUBreakdown{Window: window, Error: err.Error()}
		}
		done <- b
	}()
	return func() *CPUBreakdown { return <-done }
}

func (e *env) profileCPU(ctx context.Context, window string, seconds int) (*CPUBreakdown, error) {
	if e.kcm.debugURL == "" {
		return nil, fmt.Errorf("%s serves no /debug/pprof", e.kcm.impl)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(seconds)*time.Second+time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%sprofile?seconds=%d", e.kcm.debugURL, seconds), nil)
	if err != nil {
		return nil, err
	}
	client, err := e.cp.ScrapeClient("bench-profiler")
	if err != nil {
		return nil, err
	}
	// The scrape client's 10 s timeout is far shorter than the profile; ctx bounds it.
	client.Timeout = 0
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %sprofile: status %d", e.kcm.debugURL, resp.StatusCode)
	}
	if err != nil {
		return nil, err
	}
	path := CPUProfilePath(e.logDir, e.kcm.impl)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return nil, err
	}
	return BreakdownOfProfile(ctx, path, window)
}

// CPUProfilePath is where a run whose logs are in logDir keeps impl's CPU profile.
func CPUProfilePath(logDir string, impl Implementation) string {
	return filepath.Join(logDir, string(impl)+"-cpu.pprof")
}

// BreakdownOfProfile summarises the CPU profile at path, taken over window, with the
// Go toolchain's pprof. scalebench --reprofile uses it to summarise a run's kept
// profiles again.
func BreakdownOfProfile(ctx context.Context, path, window string) (*CPUBreakdown, error) {
	// Every node: pprof drops the small ones by default, and their flat CPU would be
	// missing from the groups.
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=1000000", "-nodefraction=0", "-edgefraction=0", path).Output()
	if err != nil {
		return nil, fmt.Errorf("go tool pprof -top %s: %w", path, err)
	}
	b := breakdownOf(string(out))
	b.Window = window
	return b, nil
}

// breakdownOf reads `go tool pprof -top` output into a CPUBreakdown.
func breakdownOf(out string) *CPUBreakdown {
	top := parsePprofTop(out, 10, 1<<30)
	b := &CPUBreakdown{Summary: top.Summary, Functions: top.Functions}
	byGroup := map[string]float64{}
	for _, p := range top.Packages {
		byGroup[groupOf(p.Package)] += p.Seconds
		b.Seconds += p.Seconds
	}
	names := []string{}
	for _, g := range cpuGroups {
		names = append(names, g.name)
	}
	for _, g := range append(names, "other") {
		b.Groups = append(b.Groups, PackageCPU{Package: g, Seconds: byGroup[g], Percent: 100 * byGroup[g] / max(b.Seconds, 1e-9)})
	}
	for _, root := range cpuRoots {
		cum := 0.0
		for _, f := range root.functions {
			cum += top.cumulative[f]
		}
		b.Paths = append(b.Paths, PathCPU{Path: root.name, Seconds: cum, Percent: 100 * cum / max(b.Seconds, 1e-9)})
	}
	return b
}

// writeCPUBreakdown renders, for one rate limit setting, where each controller
// manager's CPU went in the profiled window: each group's share, min–max over the
// rounds.
func writeCPUBreakdown(b *strings.Builder, runs [][2]*RunResult) {
	profiled, failed := profiledRounds(runs)
	for _, f := range failed {
		fmt.Fprintf(b, "A round's CPU profile failed: %s\n\n", f)
	}
	if len(profiled) == 0 {
		return
	}
	window := profiled[len(profiled)-1][1].Window
	fmt.Fprintf(b, "Where the CPU went: a CPU profile of each controller manager over %s (share of the profile's samples, and seconds; min–max over %d round(s)): "+
		"first the CPU each group of packages spent itself (flat), then the CPU spent in and under each controller's syncs, the informers' decoding and the runtime's collector and allocator (cumulative, so these overlap).\n\n", window, len(profiled))
	b.WriteString("| spent in | upstream | mini-kcm | upstream (s) | mini-kcm (s) |\n|---|---|---|---|---|\n")
	rows := map[string]*[4]span{}
	var order []string
	add := func(name string, up, mini float64, upPct, miniPct float64) {
		r, ok := rows[name]
		if !ok {
			r = &[4]span{}
			rows[name] = r
			order = append(order, name)
		}
		r[0].add(upPct)
		r[1].add(miniPct)
		r[2].add(up)
		r[3].add(mini)
	}
	for _, pair := range profiled {
		add("all sampled CPU", pair[0].Seconds, pair[1].Seconds, 100, 100)
		for i, g := range pair[1].Groups {
			if i < len(pair[0].Groups) {
				add(g.Package, pair[0].Groups[i].Seconds, g.Seconds, pair[0].Groups[i].Percent, g.Percent)
			}
		}
		for i, p := range pair[1].Paths {
			if i < len(pair[0].Paths) {
				add("cumulative: "+p.Path, pair[0].Paths[i].Seconds, p.Seconds, pair[0].Paths[i].Percent, p.Percent)
			}
		}
	}
	for _, name := range order {
		r := rows[name]
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", name, r[0].format("%.0f")+"%", r[1].format("%.0f")+"%", r[2].format("%.1f"), r[3].format("%.1f"))
	}
	b.WriteString("\n")
}

// profiledRounds returns the CPU breakdowns (upstream's, mini-kcm's) of the complete
// rounds where both profiles were taken, and why each round's failed, where one did.
func profiledRounds(runs [][2]*RunResult) (profiled [][2]*CPUBreakdown, failed []string) {
	for _, pair := range runs {
		up, mini := pair[0].CPUProfile, pair[1].CPUProfile
		if up == nil || mini == nil {
			continue
		}
		if up.Error != "" || mini.Error != "" {
			failed = append(failed, strings.TrimSpace(up.Error+" "+mini.Error))
			continue
		}
		profiled = append(profiled, [2]*CPUBreakdown{up, mini})
	}
	return profiled, failed
}

// biggestSpender is the controller whose syncs took the most of mini-kcm's profiled
// CPU (the largest of cpuRoots naming a controller), with its share of each controller
// manager's profile over the rounds.
func biggestSpender(runs [][2]*RunResult) (name string, mini, up span, ok bool) {
	profiled, _ := profiledRounds(runs)
	best := -1.0
	for _, pair := range profiled {
		for _, p := range pair[1].Paths {
			if strings.HasSuffix(p.Path, "syncs") && p.Seconds > best {
				best, name = p.Seconds, p.Path
			}
		}
	}
	if name == "" {
		return "", span{}, span{}, false
	}
	for _, pair := range profiled {
		for i, p := range pair[1].Paths {
			if p.Path == name && i < len(pair[0].Paths) {
				mini.add(p.Percent)
				up.add(pair[0].Paths[i].Percent)
			}
		}
	}
	return name, mini, up, true
}
