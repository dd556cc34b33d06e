package ha

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// electionTimings are the three leader election durations of a replica.
type electionTimings struct {
	lease, renew, retry time.Duration
}

var (
	// defaultTimings are the product's (4s/2s/0.5s), which the framework runs every
	// replica at; a member at these timings gets no election flags at all.
	defaultTimings = electionTimings{lease: framework.LeaseDuration, renew: framework.RenewDeadline, retry: framework.RetryPeriod}
	// upstreamTimings are kube-controller-manager's defaults, for side-by-side runs.
	upstreamTimings = electionTimings{lease: 15 * time.Second, renew: 10 * time.Second, retry: 2 * time.Second}
)

func (e electionTimings) args() []string {
	if e == defaultTimings {
		return nil
	}
	return []string{
		"--leader-elect-lease-duration=" + e.lease.String(),
		"--leader-elect-renew-deadline=" + e.renew.String(),
		"--leader-elect-retry-period=" + e.retry.String(),
	}
}

func (e electionTimings) String() string {
	return fmt.Sprintf("lease %v/renew %v/retry %v", e.lease, e.renew, e.retry)
}

// member is a mini-kcm replica with a user of the test's choosing, so that the audit
// log can be read per replica, optionally reaching the apiserver through a Proxy.
type member struct {
	*framework.Replica
	// user is the name the replica authenticates as, and so its name in the audit log.
	user string
	// proxy, when set, carries all of the replica's traffic to the apiserver.
	proxy *Proxy
	// args are the flags that StartReplica appends to the framework's, kept for restarts.
	args []string
	// env are the extra environment variables, kept for restarts.
	env []string
	// earlier are the processes this member ran before its restarts.
	earlier []*framework.Replica
}

// memberOptions configures startMember.
type memberOptions struct {
	timings electionTimings
	// groups of the user; nil means system:masters.
	groups []string
	// viaProxy routes the replica through a Proxy of its own.
	viaProxy bool
	// args are extra flags.
	args []string
	// env are extra environment variables (NAME=value).
	env []string
}

// startMember starts a replica as user (unique within the suite).
func startMember(t *testing.T, f *framework.Framework, user string, opts memberOptions) *member {
	t.Helper()
	groups := opts.groups
	if groups == nil {
		groups = []string{"system:masters"}
	}
	// The suite's fence policy applies to the replicas' group (see framework.ReplicaGroup).
	kubeconfig, err := f.ControlPlane.AddUser(user, slices.Concat(groups, []string{framework.ReplicaGroup})...)
	if err != nil {
		t.Fatal(err)
	}
	m := &member{user: user}
	if opts.viaProxy {
		u, err := url.Parse(f.ControlPlane.APIServerURL())
		if err != nil {
			t.Fatal(err)
		}
		if m.proxy, err = StartProxy(u.Host); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.proxy.Close)
		kubeconfig = kubeconfigWithServer(t, kubeconfig, m.proxy.URL())
	}
	m.args = append([]string{"--kubeconfig=" + kubeconfig}, opts.timings.args()...)
	m.args = append(m.args, opts.args...)
	m.env = opts.env
	m.Replica = f.StartReplica(framework.ReplicaOptions{Args: m.args, Env: m.env})
	return m
}

// restart starts the member again with the same user, kubeconfig and flags, as a
// kubelet restarts a container that exited. The old process must have exited.
func (m *member) restart(t *testing.T, f *framework.Framework) {
	t.Helper()
	if !m.Exited() {
		t.Fatalf("restarting %s, which is still running", m.user)
	}
	m.earlier = append(m.earlier, m.Replica)
	m.Replica = f.StartReplica(framework.ReplicaOptions{Args: m.args, Env: m.env})
}

// allLogs returns the logs of every process the member ran.
func (m *member) allLogs() string {
	var b strings.Builder
	for _, r := range append(m.earlier, m.Replica) {
		b.WriteString(r.Logs())
	}
	return b.String()
}

// kubeconfigWithServer writes a copy of the kubeconfig at path whose clusters point at
// server; the certificates stay, so TLS still verifies the apiserver (its certificate
// is valid for 127.0.0.1, whatever the port).
func kubeconfigWithServer(t *testing.T, path, server string) string {
	t.Helper()
	config, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, cluster := range config.Clusters {
		cluster.Server = server
	}
	out := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := clientcmd.WriteToFile(*config, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// leaderOf waits for the leader and returns the member it is.
func leaderOf(t *testing.T, f *framework.Framework, members []*member, timeout time.Duration) *member {
	t.Helper()
	r := f.WaitForLeader(timeout)
	for _, m := range members {
		if m.Replica == r {
			return m
		}
	}
	t.Fatalf("the leader %s is none of the test's members", r.Name)
	return nil
}

// cpuSeconds returns the user and system CPU time the process has used so far, from
// /proc/<pid>/stat (fields 14 and 15, in clock ticks of 1/100 s on Linux).
func cpuSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may contain spaces; the fields after it are plain.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	// fields[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad utime or stime", pid)
	}
	return (utime + stime) / 100, nil
}
