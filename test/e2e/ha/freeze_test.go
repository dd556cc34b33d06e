package ha

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// TestFrozenLeaderWritesNothingAfterAStandbyTookOver: the leader is frozen (SIGSTOP,
// as a long GC pause, a CPU-throttled container or a paused VM process would freeze
// it) right before a ReplicaSet is scaled from 3 to 40 pods. A standby takes over
// after the lease duration and creates the 37 pods. Then the old leader resumes
// (SIGCONT) with a stale view: its informers still believe the ReplicaSet has 3 pods
// and want 40. Its write fence must refuse every write it attempts, so the apiserver's
// audit log shows no write of the old identity accepted after the new leader acquired
// the Lease (with the apiserver's half of the fence on too, as deploy/ runs mini-kcm),
// no pod is ever duplicated (never more than 40 active), and the old replica steps
// down soon after resuming: it finds the Lease taken and stays up as a standby.
// mini-kcm runs at its shipped timings.
//
// With MINI_KCM_E2E_UPSTREAM=1 the same story runs against kube-controller-manager at
// its own defaults, which has no fence and exits on a lost Lease: its writes after the
// takeover and its duplicates are logged as the comparison, not failed.
func TestFrozenLeaderWritesNothingAfterAStandbyTookOver(t *testing.T) {
	const (
		name          = "frozen"
		before, after = 3, 40
	)
	timings := implementationTimings()
	f := framework.New(t)
	ctx := f.Context()
	ns := f.Namespace
	census := watchPods(t, f.Client, ns)

	if _, err := f.Client.AppsV1().ReplicaSets(ns).Create(ctx, newReplicaSet(name, before, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	candidates := startCandidates(t, f, "ha-freeze", timings, "replicaset")
	leader := waitForFreezeLeader(t, f, candidates)
	eventually(t, 2*time.Minute, func() error { return replicaSetComplete(ctx, f.Client, ns, name) })
	oldHolder, err := f.Holder()
	if err != nil {
		t.Fatal(err)
	}

	// Freeze the leader, then give it work it will see only when it resumes.
	census.limit("ReplicaSet", name, after)
	frozenAt := time.Now()
	leader.signal(t, syscall.SIGSTOP)
	// A test that fails while the leader is stopped must not leave it stopped.
	t.Cleanup(func() { _ = syscall.Kill(leader.pid, syscall.SIGCONT) })
	if err := scale(ctx, f, "ReplicaSet", name, after); err != nil {
		t.Fatal(err)
	}

	newHolder, took := f.WaitForNewHolder(oldHolder, 2*time.Minute)
	eventually(t, 3*time.Minute, func() error { return replicaSetComplete(ctx, f.Client, ns, name) })
	converged := time.Since(frozenAt)

	resumedAt := time.Now()
	leader.signal(t, syscall.SIGCONT)
	steppedDown, err := leader.stepDown(2*time.Minute, f.LeaseName)
	if err != nil {
		t.Fatalf("the resumed old leader %s did not step down: %v", leader.user, err)
	}
	exitedAfter := time.Since(resumedAt)
	// Anything the old leader sent before it exited has reached the apiserver by now;
	// the new leader repairs whatever it broke.
	time.Sleep(2 * timings.retry)
	eventually(t, 2*time.Minute, func() error { return replicaSetComplete(ctx, f.Client, ns, name) })

	// The audit log: when did the new leader acquire, and what of the old leader's
	// did the apiserver accept after that?
	events := readAudit(t, f.ControlPlane)
	acquired, byUser, ok := acquisitionAfter(events, frozenAt, leader.user, candidates)
	if !ok {
		t.Fatalf("the audit log shows no Lease acquisition by another candidate after the freeze")
	}
	var late []string
	for i := range events {
		e := &events[i]
		if e.By == leader.user && isControllerWrite(e) && e.Code() >= 200 && e.Code() < 300 &&
			e.StageTimestamp.After(acquired) {
			late = append(late, fmt.Sprintf("%s %s %s/%s (%d) at %s", e.Verb, e.Resource(), e.ObjectRef.Namespace,
				e.ObjectRef.Name, e.Code(), e.StageTimestamp.Format(time.StampMicro)))
		}
	}
	all := make([]string, len(candidates))
	for i, c := range candidates {
		all[i] = c.user
	}
	created := requestFilter{users: userSet(all...), namespace: ns, resource: "pods", verb: "create", codes: []int32{201}}.count(events)
	deleted := requestFilter{users: userSet(all...), namespace: ns, resource: "pods", verb: "delete"}.count(events)
	seen := census.podsSeen()
	refused := fenceRefusedWrites(leader.logs())
	// What stepping down cost the apiserver: the old leader's reads of everything but
	// its Lease after it resumed (a standby again, it builds its controllers anew, one
	// initial list per informer).
	relists := map[string]int{}
	for i := range events {
		e := &events[i]
		// A watch is audited when its response starts (it completes only when closed).
		stage := "ResponseComplete"
		if e.Verb == "watch" {
			stage = "ResponseStarted"
		}
		if e.By == leader.user && e.Stage == stage && e.ObjectRef != nil && e.Resource() != "leases" &&
			(e.Verb == "list" || e.Verb == "watch") && e.RequestReceivedTimestamp.After(resumedAt) {
			relists[e.Verb+" "+e.Resource()]++
		}
	}
	t.Logf("HA-NUMBERS freeze implementation=%s timings=%q takeover=%.2fs (new holder %s, user %s) converged=%.2fs after the freeze; "+
		"old leader stepped down %.2fs after SIGCONT (%s), fence refused %s writes; accepted writes of the old leader after the takeover=%d; "+
		"pods ever=%d for %d desired (duplicates %d), created=%d deleted=%d, peak active %s; old leader's lists and watches after SIGCONT %v",
		implementation(), timings, took.Seconds(), newHolder, byUser, converged.Seconds(), exitedAfter.Seconds(), steppedDown, refused,
		len(late), seen, after, seen-after, created, deleted, census.peaks(), relists)
	if len(late) > 0 {
		t.Logf("writes of the old leader %s accepted after the new leader acquired at %s:\n  %s", leader.user,
			acquired.Format(time.StampMicro), strings.Join(late, "\n  "))
	}

	if framework.AgainstUpstream() {
		// Upstream has no fence: the numbers above are the comparison.
		return
	}
	// Both layers of the fence were on: the framework binds deploy/fence's policy to
	// the test's Lease, and the standby's writes were admitted by it.
	if !strings.Contains(leader.logs(), `mode="in-process and apiserver`) {
		t.Errorf("the old leader did not run with both layers of the write fence")
	}
	if !strings.Contains(leader.logs(), "leaderelection lost") {
		t.Errorf("the old leader's log does not say %q", "leaderelection lost")
	}
	if len(late) > 0 {
		t.Errorf("the apiserver accepted %d writes of the frozen leader after a standby took over, want none", len(late))
	}
	census.checkNoViolations()
	if seen != after || deleted != 0 {
		t.Errorf("%d pods ever existed and %d were deleted for %d desired; want exactly %d and none deleted", seen, deleted, after, after)
	}
}

// freezeCandidate is one replica of the controller manager under test, mini-kcm's or
// upstream's.
type freezeCandidate struct {
	// user is its name in the audit log.
	user string
	pid  int
	// member is set for a mini-kcm replica, process for upstream's.
	member  *member
	process *controlplane.Process
}

func (c *freezeCandidate) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(c.pid, sig); err != nil {
		t.Fatalf("sending %v to %s: %v", sig, c.user, err)
	}
}

// stepDown waits until the resumed old leader stepped down and says how: mini-kcm
// logs the lost Lease and stays up as a standby (an exit is an error), upstream exits.
func (c *freezeCandidate) stepDown(timeout time.Duration, leaseName string) (string, error) {
	if c.member == nil {
		code, err := c.process.Wait(timeout)
		return fmt.Sprintf("exited with code %d", code), err
	}
	deadline := time.Now().Add(timeout)
	for {
		if c.member.Exited() {
			code, _ := c.member.Wait(0)
			return "", fmt.Errorf("it exited with code %d; want it to stay up as a standby", code)
		}
		if strings.Contains(c.member.Logs(), "leaderelection lost") {
			if leads, err := c.member.IsLeader(leaseName); err == nil && !leads {
				return "stayed up as a standby", nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no lost Lease in its log, or it still reports leading, after %s", timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// exited reports whether the candidate's process ended, and its exit code.
func (c *freezeCandidate) exited() (bool, int) {
	if c.member != nil {
		if !c.member.Exited() {
			return false, 0
		}
		code, _ := c.member.Wait(0)
		return true, code
	}
	if !c.process.Exited() {
		return false, 0
	}
	code, _ := c.process.Wait(0)
	return true, code
}

func (c *freezeCandidate) logs() string {
	if c.member != nil {
		return c.member.Logs()
	}
	data, err := os.ReadFile(c.process.LogPath())
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", c.process.LogPath(), err)
	}
	return string(data)
}

// implementationTimings are the shipped election timings of the controller manager
// under test: mini-kcm's, or with MINI_KCM_E2E_UPSTREAM=1 kube-controller-manager's.
func implementationTimings() electionTimings {
	if framework.AgainstUpstream() {
		return upstreamTimings
	}
	return defaultTimings
}

// implementation names the controller manager under test in the numbers' log line.
func implementation() string {
	if framework.AgainstUpstream() {
		return "kube-controller-manager"
	}
	return "mini-kcm"
}

// startCandidates starts three replicas named prefix-… with the given election
// timings on the test's Lease, running the controllers named (a --controllers value):
// mini-kcm's, or with MINI_KCM_E2E_UPSTREAM=1 kube-controller-manager's.
func startCandidates(t *testing.T, f *framework.Framework, prefix string, timings electionTimings, controllers string) []*freezeCandidate {
	t.Helper()
	var out []*freezeCandidate
	for i := range 3 {
		user := fmt.Sprintf("%s-%s-%d", prefix, f.Namespace[len(f.Namespace)-5:], i)
		if !framework.AgainstUpstream() {
			m := startMember(t, f, user, memberOptions{timings: timings, args: []string{"--controllers=" + controllers}})
			out = append(out, &freezeCandidate{user: user, pid: m.Pid(), member: m})
			continue
		}
		p := startUpstreamCandidate(t, f, user, timings, controllers)
		out = append(out, &freezeCandidate{user: user, pid: p.Pid(), process: p})
	}
	return out
}

// startUpstreamCandidate runs kube-controller-manager with leader election on the
// test's Lease and only the controllers named, as user.
func startUpstreamCandidate(t *testing.T, f *framework.Framework, user string, timings electionTimings, controllers string) *controlplane.Process {
	t.Helper()
	kubeconfig, err := f.ControlPlane.AddUser(user, "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	path, err := controlplane.Binary(controlplane.KubeControllerManager)
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(f.ControlPlane.Dir(), "logs", user+".log")
	p, err := controlplane.StartProcess(controlplane.ProcessSpec{
		Name: user,
		Path: path,
		Args: append([]string{
			"--kubeconfig=" + kubeconfig,
			"--controllers=" + controllers,
			"--leader-elect=true",
			"--leader-elect-resource-namespace=" + f.LeaseNamespace,
			"--leader-elect-resource-name=" + f.LeaseName,
			"--secure-port=0",
			"--v=2",
		}, timings.args()...),
		LogPath: logPath,
	})
	if err != nil {
		t.Fatalf("starting kube-controller-manager %s: %v", user, err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(p.Pid(), syscall.SIGCONT)
		p.Kill()
		if t.Failed() {
			t.Logf("---- last 40 lines of %s ----\n%s", logPath, controlplane.Tail(logPath, 40))
		}
	})
	return p
}

// waitForFreezeLeader returns the candidate that leads: for mini-kcm the one whose
// metrics say so, for upstream (which serves nothing here) the one whose log says it
// acquired the Lease.
func waitForFreezeLeader(t *testing.T, f *framework.Framework, candidates []*freezeCandidate) *freezeCandidate {
	t.Helper()
	if !framework.AgainstUpstream() {
		var members []*member
		for _, c := range candidates {
			members = append(members, c.member)
		}
		leader := leaderOf(t, f, members, time.Minute)
		for _, c := range candidates {
			if c.member == leader {
				return c
			}
		}
	}
	var leader *freezeCandidate
	framework.Eventually(t, time.Minute, func() error {
		var leaders []string
		for _, c := range candidates {
			if strings.Contains(c.logs(), "Successfully acquired lease") {
				leader = c
				leaders = append(leaders, c.user)
			}
		}
		if len(leaders) != 1 {
			return fmt.Errorf("candidates that acquired the lease: %v, want exactly one", leaders)
		}
		return nil
	})
	return leader
}

// acquisitionAfter returns when the apiserver received the first successful Lease
// write by a candidate other than old after since, and who made it. Standbys write
// the Lease only to acquire it, so that write is the new leader's acquisition.
func acquisitionAfter(events []controlplane.AuditEvent, since time.Time, old string, candidates []*freezeCandidate) (time.Time, string, bool) {
	others := map[string]bool{}
	for _, c := range candidates {
		if c.user != old {
			others[c.user] = true
		}
	}
	var first *controlplane.AuditEvent
	for i := range events {
		e := &events[i]
		if e.Stage != "ResponseComplete" || e.ObjectRef == nil || e.Resource() != "leases" || !others[e.By] ||
			(e.Verb != "update" && e.Verb != "create") || e.Code() >= 300 || e.RequestReceivedTimestamp.Before(since) {
			continue
		}
		// The log is in order of completion, not of arrival.
		if first == nil || e.RequestReceivedTimestamp.Before(first.RequestReceivedTimestamp) {
			first = e
		}
	}
	if first == nil {
		return time.Time{}, "", false
	}
	return first.RequestReceivedTimestamp, first.By, true
}

// fenceRefusedWrites reads the count of refused writes that mini-kcm logs with
// "leaderelection lost", or says that there is none (upstream has no fence).
func fenceRefusedWrites(logs string) string {
	m := regexp.MustCompile(`"leaderelection lost".*fenceRefusedWrites=(\d+)`).FindStringSubmatch(logs)
	if m == nil {
		return "no count of"
	}
	if _, err := strconv.Atoi(m[1]); err != nil {
		return "no count of"
	}
	return m[1]
}
