package framework

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mini-kcm/mini-kcm/options"
	"github.com/mini-kcm/mini-kcm/test/controlplane"
)

// The leader election timings of every replica: the product's defaults, which the
// framework does not override, so that every test runs mini-kcm as it ships. A test
// that needs others passes them in ReplicaOptions.Args and says why.
var (
	LeaseDuration = options.NewLeaderElectionOptions().LeaseDuration
	RenewDeadline = options.NewLeaderElectionOptions().RenewDeadline
	RetryPeriod   = options.NewLeaderElectionOptions().RetryPeriod
)

// ReplicaOptions configures replicas started by StartReplica(s).
type ReplicaOptions struct {
	// Args are extra flags. They come after the framework's flags, so a flag given
	// here overrides the framework's value for it.
	Args []string
	// Groups, when not nil, make the replica a certificate user of its own name in
	// these groups (and ReplicaGroup, which the suite's fence policy selects), instead
	// of the identities deploy/ ships (identity.go): for a test of RBAC itself, or of
	// rights the shipped roles do not give. A test that sets it says why.
	Groups []string
	// Kubeconfig is the replica's kubeconfig when the test made it: from
	// ShippedKubeconfig (say, to reach the apiserver through a proxy), or, with Groups,
	// a certificate user's; "" makes one.
	Kubeconfig string
	// User is the name the audit log's By gives the replica's requests under the
	// shipped identity (the kubeconfig's, when the test made it); "" means the
	// replica's Name.
	User string
	// Env are extra environment variables (NAME=value) of the process.
	Env []string
	// Binary is the mini-kcm binary to run; "" means MiniKCMBinary.
	Binary string
}

// Replica is one mini-kcm process with its own user, port and log file.
type Replica struct {
	// Name is unique within the suite, e.g. "mini-kcm-replica-3": the user the
	// replica authenticates as when it is a certificate user (ReplicaOptions.Groups),
	// else what framework.AuditLog names it by.
	Name string
	// Port serves /healthz, /readyz, /livez, /metrics and the rest over HTTPS on
	// 127.0.0.1, with a certificate signed by the control plane's CA.
	Port int
	// Kubeconfig is the replica's own kubeconfig.
	Kubeconfig string
	// Args is the full command line, without the binary.
	Args []string

	process *controlplane.Process
	// scraper reads the HTTPS endpoint as a user in system:masters, which the
	// replica's authorizer allows everything.
	scraper *http.Client
}

// replicaCounter numbers replicas across the suite, so user names and log files never
// repeat.
var replicaCounter atomic.Int64

// StartReplicas starts n replicas with the same options.
func (f *Framework) StartReplicas(n int, opts ReplicaOptions) []*Replica {
	f.t.Helper()
	replicas := make([]*Replica, n)
	for i := range replicas {
		replicas[i] = f.StartReplica(opts)
	}
	return replicas
}

// StartReplica starts one replica with its own user (AddUser), a free port and the
// test's Lease, and kills it when the test ends.
func (f *Framework) StartReplica(opts ReplicaOptions) *Replica {
	f.t.Helper()
	binary := opts.Binary
	if binary == "" {
		binary = MiniKCMBinary(f.t)
	}
	name := fmt.Sprintf("mini-kcm-replica-%d", replicaCounter.Add(1))
	kubeconfig, shipped := opts.Kubeconfig, opts.Groups == nil
	switch {
	case !shipped && kubeconfig == "":
		var err error
		kubeconfig, err = f.ControlPlane.AddUser(name, slices.Concat(opts.Groups, []string{ReplicaGroup})...)
		if err != nil {
			f.t.Fatalf("adding user for %s: %v", name, err)
		}
	case kubeconfig == "":
		kubeconfig = f.ShippedKubeconfig(cmp.Or(opts.User, name))
	}
	port, err := controlplane.FreePort()
	if err != nil {
		f.t.Fatal(err)
	}
	// Serving delegates authentication and authorization as the replica's own user,
	// as a pod does with its ServiceAccount.
	serving, err := f.ControlPlane.ServingFlags(name, port, kubeconfig)
	if err != nil {
		f.t.Fatal(err)
	}
	scraper, err := f.ControlPlane.ScrapeClient("e2e-scraper")
	if err != nil {
		f.t.Fatal(err)
	}
	args := append(append([]string{"--kubeconfig=" + kubeconfig}, serving...),
		"--leader-elect=true",
		"--leader-elect-resource-namespace="+f.LeaseNamespace,
		"--leader-elect-resource-name="+f.LeaseName,
		// Both layers of the write fence, as deploy/ runs mini-kcm (see fence.go).
		APIServerFenceFlag+"=true",
		"--v=2",
	)
	if shipped {
		// As the StatefulSet runs it: each controller writes as its own ServiceAccount.
		args = append(args, "--use-service-account-credentials=true")
	}
	args = append(args, opts.Args...)
	if shipped {
		f.grantShippedLeaseRights(args)
	}
	f.fenceReplica(args)
	var env []string
	if opts.Env != nil {
		env = append(os.Environ(), opts.Env...)
	}
	p, err := controlplane.StartProcess(controlplane.ProcessSpec{
		Name:    name,
		Path:    binary,
		Args:    args,
		Env:     env,
		LogPath: filepath.Join(suite.workDir, name+".log"),
	})
	if err != nil {
		f.t.Fatalf("starting %s: %v", name, err)
	}
	r := &Replica{Name: name, Port: port, Kubeconfig: kubeconfig, Args: args, process: p, scraper: scraper}
	f.replicas = append(f.replicas, r)
	suite.live.Store(r, struct{}{})
	return r
}

// Kill sends SIGKILL, as a node failure or OOM kill would, and waits for the exit.
func (r *Replica) Kill() {
	r.process.Kill()
	suite.live.Delete(r)
}

// Term sends SIGTERM, as the kubelet does on pod deletion. It does not wait.
func (r *Replica) Term() {
	if err := r.process.Signal(syscall.SIGTERM); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
	}
}

// Wait waits up to timeout for the replica to exit and returns its exit code (-1 if a
// signal killed it).
func (r *Replica) Wait(timeout time.Duration) (int, error) {
	code, err := r.process.Wait(timeout)
	if err == nil {
		suite.live.Delete(r)
	}
	return code, err
}

// Exited reports whether the process has exited.
func (r *Replica) Exited() bool { return r.process.Exited() }

// Pid returns the process id.
func (r *Replica) Pid() int { return r.process.Pid() }

// LogPath returns the file holding the replica's stdout and stderr.
func (r *Replica) LogPath() string { return r.process.LogPath() }

// Logs returns everything the replica wrote so far.
func (r *Replica) Logs() string {
	data, err := os.ReadFile(r.LogPath())
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", r.LogPath(), err)
	}
	return string(data)
}

// identityInLog is the leader-election identity in mini-kcm's "Run mode" line.
var identityInLog = regexp.MustCompile(`"Run mode" .*identity="([^"]+)"`)

// Identity returns the leader-election identity of the replica's current process, as
// its last "Run mode" log line names it (a restarted replica has a new one).
func (r *Replica) Identity() (string, error) {
	m := identityInLog.FindAllStringSubmatch(r.Logs(), -1)
	if len(m) == 0 {
		return "", fmt.Errorf("%s has not logged its identity (no \"Run mode\" line in %s)", r.Name, r.LogPath())
	}
	return m[len(m)-1][1], nil
}

// URL returns the HTTPS address of path (e.g. "/readyz?verbose") on the replica.
func (r *Replica) URL(path string) string {
	return "https://127.0.0.1:" + strconv.Itoa(r.Port) + path
}

// Get requests path (e.g. "/readyz?verbose") from the replica's HTTPS endpoint as a
// user in system:masters and returns the status code and body.
func (r *Replica) Get(path string) (int, string, error) {
	return r.GetWith(r.scraper, path)
}

// GetWith requests path from the replica's HTTPS endpoint with client, e.g. one
// without a client certificate or with another user's.
func (r *Replica) GetWith(client *http.Client, path string) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL(path), nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("%s: GET %s: %w", r.Name, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// WaitReady waits until the replica's /readyz answers 200, failing the test with the
// verbose answer if it does not within timeout: a leader is then ready once its caches
// synced, so everything a test does afterwards is seen by a running controller.
func (r *Replica) WaitReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, func() error {
		code, body, err := r.Get("/readyz?verbose")
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("%s /readyz returned %d:\n%s%s", r.Name, code, body, r.failureReasons("/readyz", body))
		}
		return nil
	})
}

// failureReasons asks endpoint/<check> for the reason of every check that a verbose
// answer of endpoint lists as failed: the root path withholds them.
func (r *Replica) failureReasons(endpoint, body string) string {
	var reasons strings.Builder
	for line := range strings.SplitSeq(body, "\n") {
		name, failed := strings.CutPrefix(line, "[-]")
		if !failed {
			continue
		}
		name, _, _ = strings.Cut(name, " ")
		if _, reason, err := r.Get(endpoint + "/" + name); err == nil {
			fmt.Fprintf(&reasons, "%s/%s: %s\n", endpoint, name, strings.TrimSpace(reason))
		}
	}
	return reasons.String()
}

// Metrics scrapes /metrics.
func (r *Replica) Metrics() (Metrics, error) {
	code, body, err := r.Get("/metrics")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("%s: /metrics returned %d: %s", r.Name, code, body)
	}
	return ParseMetrics(body)
}

// IsLeader reports whether the replica says it leads: leader_election_master_status
// is 1 for the test's Lease.
func (r *Replica) IsLeader(leaseName string) (bool, error) {
	m, err := r.Metrics()
	if err != nil {
		return false, err
	}
	v, ok := m.Value("leader_election_master_status", map[string]string{"name": leaseName})
	return ok && v == 1, nil
}

// Result is the outcome of a mini-kcm run that was expected to end by itself.
type Result struct {
	// ExitCode is the process exit code.
	ExitCode int
	// Output is stdout and stderr combined.
	Output string
}

// RunMiniKCM runs the mini-kcm binary with exactly args and waits up to timeout for it
// to exit, e.g. to check that bad flags are rejected. Failing to exit in time fails
// the test.
func RunMiniKCM(t testing.TB, timeout time.Duration, args ...string) Result {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "mini-kcm.log")
	p, err := controlplane.StartProcess(controlplane.ProcessSpec{
		Name: "mini-kcm", Path: MiniKCMBinary(t), Args: args, LogPath: logPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	code, err := p.Wait(timeout)
	if err != nil {
		p.Kill()
		t.Fatalf("mini-kcm %q: %v; output:\n%s", args, err, controlplane.Tail(logPath, 40))
	}
	output, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	return Result{ExitCode: code, Output: string(output)}
}
