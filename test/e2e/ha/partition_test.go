package ha

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// TestPartitionedLeaderStopsBeforeItsLeaseExpiresAndNoTwoReplicasWrite: every replica
// reaches the apiserver through a proxy of its own, at the shipped timings. In the
// middle of a scale-up the leader's proxy blackholes its traffic, as a network
// partition would: its requests hang, its connections stay open. The leader must
// notice on its own and pause (its fence closed) before its Lease can expire, so that
// by the time a standby, still in contact with the apiserver, takes over (within the
// lease duration + 0.5s of the cut), nothing of the old leader writes any more. The
// audit log then shows that no two replicas ever wrote pods, ReplicaSets, Deployments
// or Endpoints in overlapping windows. After the partition heals, the old leader finds
// the Lease taken and stays up as a standby, without a restart, and writes nothing.
//
// With MINI_KCM_E2E_UPSTREAM=1 the same story runs against kube-controller-manager at
// its own defaults (15s/10s/2s), for the side-by-side figures: its slower takeover,
// its exit at the renew deadline and its write windows are logged, not failed; the
// workload's outcome (exactly the pods asked for) is asserted for both.
func TestPartitionedLeaderStopsBeforeItsLeaseExpiresAndNoTwoReplicasWrite(t *testing.T) {
	runPartition(t, implementationTimings())
}

// runPartition runs the partition story with the given election timings, which must
// leave room between the renew deadline and the lease duration. It logs one line of
// figures, HA-NUMBERS partition.
func runPartition(t *testing.T, timings electionTimings) {
	f := framework.New(t)
	ctx := f.Context()
	ns := f.Namespace
	census := watchPods(t, f.Client, ns)
	upstream := framework.AgainstUpstream()

	proxied := startProxiedCandidates(t, f, "ha-partition", timings, allControllers)
	candidates := plainCandidates(proxied)
	var users []string
	for _, c := range candidates {
		users = append(users, c.user)
	}
	leader := waitForFreezeLeader(t, f, candidates)
	var proxy *Proxy
	for _, c := range proxied {
		if c.freezeCandidate == leader {
			proxy = c.proxy
		}
	}
	before, err := f.Client.CoordinationV1().Leases(f.LeaseNamespace).Get(ctx, f.LeaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	oldHolder := ptr.Deref(before.Spec.HolderIdentity, "")

	const replicas = 150
	census.limit("Deployment", "web", replicas)
	if _, err := f.Client.AppsV1().Deployments(ns).Create(ctx, newDeployment("web", replicas, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Client.CoreV1().Services(ns).Create(ctx, newService("web", map[string]string{"app": "web"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Cut the leader off while it is busy creating pods.
	waitForActivePods(t, census, 30, 2*time.Minute)
	atPartition := census.activeCount("")
	acquiredBefore := acquisitions(candidates)
	partitioned := time.Now()
	proxy.Blackhole()

	// The last renewal that reached the apiserver is in the Lease now; a renewal in
	// flight at the cut either arrived already or never will.
	time.Sleep(500 * time.Millisecond)
	lease, err := f.Client.CoordinationV1().Leases(f.LeaseNamespace).Get(ctx, f.LeaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(lease.Spec.HolderIdentity, "") != oldHolder || lease.Spec.RenewTime == nil {
		t.Fatalf("right after the partition the Lease is %+v, want it still held by %s", lease.Spec, oldHolder)
	}
	expires := lease.Spec.RenewTime.Add(timings.lease)

	// Two things happen on their own, in an order the test does not choose: the
	// cut-off leader stops (mini-kcm pauses, as its metrics, served locally and not
	// through the proxy, count; kube-controller-manager exits), and a standby takes
	// the Lease. Both are timed from the cut.
	var stopped, tookOver time.Time
	var newHolder, how string
	deadline := time.Now().Add(2 * time.Minute)
	for stopped.IsZero() || tookOver.IsZero() {
		if tookOver.IsZero() {
			if h, err := f.Holder(); err == nil && h != "" && h != oldHolder {
				newHolder, tookOver = h, time.Now()
			}
		}
		if stopped.IsZero() {
			if gone, code := leader.exited(); gone {
				if !upstream {
					t.Fatalf("the cut-off leader %s exited with %d; want it paused, then a standby:\n%s", leader.user, code, leader.logs())
				}
				stopped, how = time.Now(), fmt.Sprintf("exited with %d", code)
			} else if !upstream {
				if m, err := leader.member.Metrics(); err == nil {
					if v, _ := m.Value("mini_kcm_leader_election_pauses_total", map[string]string{"name": f.LeaseName}); v >= 1 {
						stopped, how = time.Now(), "paused"
					}
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("2m after the cut: the cut-off leader stopped: %v, the Lease moved to %q: %v", !stopped.IsZero(), newHolder, !tookOver.IsZero())
		}
		time.Sleep(20 * time.Millisecond)
	}
	margin := expires.Sub(stopped)
	took := tookOver.Sub(partitioned)
	next := leaderSince(t, f, candidates, acquiredBefore)
	resumed := waitForProgress(t, census, atPartition, 3*time.Minute)

	eventually(t, 3*time.Minute, func() error {
		return allOf(
			func() error { return deploymentComplete(ctx, f.Client, ns, "web") },
			func() error { return endpointsMatchPods(ctx, f.Client, ns, "web", map[string]string{"app": "web"}) },
		)
	})
	census.checkNoViolations()

	// Split brain is two replicas writing in the same period: from each replica's first
	// write to its last, no two may share a moment.
	events := readAudit(t, f.ControlPlane)
	windows := writeWindows(events, users)
	acquired, _, ok := acquisitionAfter(events, partitioned, leader.user, candidates)
	if !ok {
		t.Fatalf("the audit log shows no Lease acquisition by another candidate after the cut")
	}
	lastWrite, late := acceptedWrites(events, leader.user, acquired)
	all := userSet(users...)
	created := requestFilter{users: all, namespace: ns, resource: "pods", verb: "create", codes: []int32{201}}.count(events)
	deleted := requestFilter{users: all, namespace: ns, resource: "pods", verb: "delete"}.count(events)

	// The partition heals; mini-kcm's old leader finds the Lease taken, drains behind
	// its closed fence and stands by, in the same process, and writes nothing.
	proxy.Heal()
	healed := time.Now()
	if !upstream {
		framework.Eventually(t, time.Minute, func() error {
			if gone, code := leader.exited(); gone {
				t.Fatalf("the old leader %s exited with %d after the partition healed; want a standby:\n%s", leader.user, code, leader.logs())
			}
			if !strings.Contains(leader.logs(), "leaderelection lost") {
				return fmt.Errorf("the old leader has not noticed the takeover yet")
			}
			code, body, err := leader.member.Get("/readyz?verbose")
			if err != nil {
				return err
			}
			if code != http.StatusOK {
				return fmt.Errorf("/readyz %d: %s", code, body)
			}
			return nil
		})
	}
	time.Sleep(3 * timings.retry)
	if now := leaderSince(t, f, candidates, acquiredBefore); now != next {
		t.Errorf("leadership moved from %s to %s when the partitioned replica came back", next.user, now.user)
	}
	after, err := f.Client.CoordinationV1().Leases(f.LeaseNamespace).Get(ctx, f.LeaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	changes := ptr.Deref(after.Spec.LeaseTransitions, 0) - ptr.Deref(before.Spec.LeaseTransitions, 0)
	exits := exitedCandidates(candidates, nil)

	t.Logf("HA-NUMBERS partition implementation=%s timings=%q cut→new-holder=%.2fs (new %s, %s) old-leader=%s %.2fs after the cut "+
		"(%.2fs before its Lease could expire), its last accepted write %+.2fs from the cut; its writes accepted after the new holder took the Lease=%d; "+
		"leader-changes=%d exits=%d %v; progress resumed %.2fs after the cut; pods=%d created=%d duplicates=%d deleted=%d; write windows %v",
		implementation(), timings, took.Seconds(), next.user, newHolder, how, stopped.Sub(partitioned).Seconds(), margin.Seconds(),
		lastWrite.Sub(partitioned).Seconds(), len(late), changes, len(exits), exits, resumed.Sub(partitioned).Seconds(),
		replicas, created, created-replicas, deleted, windows)
	if len(late) > 0 {
		t.Logf("writes of the cut-off leader %s accepted after the new holder acquired at %s:\n  %s", leader.user,
			acquired.Format(time.StampMicro), strings.Join(late, "\n  "))
	}

	// Whichever manager runs, the workload ends with exactly the pods asked for.
	if created != replicas || deleted != 0 {
		t.Errorf("replicas created %d pods and deleted %d for %d desired; want %d and 0", created, deleted, replicas, replicas)
	}
	// Judged by when the apiserver received each write: a request of the cut-off leader
	// that arrived during the partition may have its response held by the proxy, and
	// its audit stage then completes only when Heal drops the connection, after healed.
	events = readAudit(t, f.ControlPlane)
	for i := range events {
		e := &events[i]
		if e.By == leader.user && isControllerWrite(e) && e.RequestReceivedTimestamp.After(healed) {
			t.Errorf("the old leader wrote controller resources after the partition healed: %s %s/%s at %s (%s)", e.Verb, e.ObjectRef.Resource,
				e.ObjectRef.Name, e.RequestReceivedTimestamp.Format(time.StampMicro), describeWrites(events, leader.user))
		}
	}
	if upstream {
		return // the figures above are the comparison
	}
	if margin <= 0 {
		t.Errorf("the cut-off leader paused at %s, %v after its Lease could expire (%s)",
			stopped.Format(time.StampMicro), -margin, expires.Format(time.StampMicro))
	}
	if !strings.Contains(leader.logs(), "Paused leading") {
		t.Errorf("the cut-off leader's log does not say %q", "Paused leading")
	}
	// The standbys, in contact all along, take the Lease a lease duration after the
	// last renewal they saw, which was at most a retry period before the cut; half a
	// second covers that at the defaults, as for a SIGKILL.
	if bound := timings.lease + 500*time.Millisecond; took > bound {
		t.Errorf("the Lease named a new holder %v after the cut, over %v", took, bound)
	}
	if len(late) > 0 {
		t.Errorf("the apiserver accepted %d writes of the cut-off leader after the new holder took the Lease, want none", len(late))
	}
	if o := overlaps(windows); len(o) > 0 {
		t.Errorf("replicas wrote at the same time: %v", o)
	}
	if len(windows) != 2 || windows[0].user != leader.user || windows[1].user != next.user {
		t.Errorf("want the cut-off leader's writes, then the new leader's; got %v", windows)
	}
	if changes != 1 || len(exits) > 0 {
		t.Errorf("the Lease changed hands %d times and %d replicas exited (%v); want 1 and none", changes, len(exits), exits)
	}
	if leads, err := leader.member.IsLeader(f.LeaseName); err != nil || leads {
		t.Errorf("the old leader leads (%v, %v), want a standby", leads, err)
	}
}
