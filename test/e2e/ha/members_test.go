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
	// user is the replica's name in the audit log (framework.AuditLog's By): the
	// certificate user it authenticates as with groups, else the name its token of the
	// shipped ServiceAccount is attributed to.
	user string
	// proxy, when set, carries all of the replica's traffic to the apiserver.
	proxy *Proxy
	// opts start the member, again at each restart.
	opts framework.ReplicaOptions
	// earlier are the processes this member ran before its restarts.
	earlier []*framework.Replica
}

// memberOptions configures startMember.
type memberOptions struct {
	timings electionTimings
	// groups, when not nil, make the member a certificate user in these groups
	// instead of the identity deploy/ ships (see framework.ReplicaOptions.Groups).
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
	var kubeconfig string
	if opts.groups == nil {
		kubeconfig = f.ShippedKubeconfig(user)
	} else {
		// The suite's fence policy applies to the replicas' group (see framework.ReplicaGroup).
		var err error
		if kubeconfig, err = f.ControlPlane.AddUser(user, slices.Concat(opts.groups, []string{framework.ReplicaGroup})...); err != nil {
			t.Fatal(err)
		}
	}
	m := &member{user: user}
	args := append(opts.timings.args(), opts.args...)
	if opts.viaProxy {
		u, err := url.Parse(f.ControlPlane.APIServerURL())
		if err != nil {
			t.Fatal(err)
		}
		if m.proxy, err = StartProxy(u.Host); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.proxy.Close)
		// The controllers' and the election's traffic only: serving's delegated
		// authentication keeps the direct kubeconfig, as it did when the framework made
		// it, so that its quiet watch is not among the connections a test cuts.
		args = append([]string{"--kubeconfig=" + kubeconfigWithServer(t, kubeconfig, m.proxy.URL())}, args...)
	}
	m.opts = framework.ReplicaOptions{
		Args:       args,
		Env:        opts.env,
		Groups:     opts.groups,
		Kubeconfig: kubeconfig,
		User:       user,
	}
	m.Replica = f.StartReplica(m.opts)
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
	m.Replica = f.StartReplica(m.opts)
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
