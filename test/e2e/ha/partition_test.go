package ha

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// TestPartitionedLeaderStopsBeforeItsLeaseExpiresAndNoTwoReplicasWrite: every replica
// reaches the apiserver through a proxy of its own, at the shipped timings. In the
// middle of a scale-up the leader's proxy blackholes its traffic, as a network
// partition would: its requests hang, its connections stay open. The leader must
// notice on its own and pause (its fence closed) before its Lease can expire, so that
// by the time a standby, still in contact with the apiserver, takes over, nothing of
// the old leader writes any more. The audit log then shows that no two replicas ever
// wrote pods, ReplicaSets, Deployments or Endpoints in overlapping windows. After the
// partition heals, the old leader finds the Lease taken and stays up as a standby,
// without a restart, and writes nothing.
func TestPartitionedLeaderStopsBeforeItsLeaseExpiresAndNoTwoReplicasWrite(t *testing.T) {
	runPartition(t, defaultTimings)
}

// runPartition runs the partition story with the given election timings, which must
// leave room between the renew deadline and the lease duration.
func runPartition(t *testing.T, timings electionTimings) {
	f := framework.New(t)
	ctx := f.Context()
	ns := f.Namespace
	census := watchPods(t, f.Client, ns)

	var members []*member
	var users []string
	for i := range 3 {
		m := startMember(t, f, fmt.Sprintf("ha-partition-%s-%d", ns[len(ns)-5:], i),
			memberOptions{timings: timings, viaProxy: true})
		members = append(members, m)
		users = append(users, m.user)
	}
	leader := leaderOf(t, f, members, time.Minute)
	oldHolder, err := f.Holder()
	if err != nil {
		t.Fatal(err)
	}

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
	partitioned := time.Now()
	leader.proxy.Blackhole()

	// The last renewal that reached the apiserver is in the Lease now; a renewal in
	// flight at the cut either arrived already or never will.
	time.Sleep(500 * time.Millisecond)
	lease, err := f.Client.CoordinationV1().Leases(f.LeaseNamespace).Get(ctx, f.LeaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != oldHolder || lease.Spec.RenewTime == nil {
		t.Fatalf("right after the partition the Lease is %+v, want it still held by %s", lease.Spec, oldHolder)
	}
	expires := lease.Spec.RenewTime.Add(timings.lease)

	// The cut-off leader pauses on its own: its metrics (served locally, not through
	// the proxy) count the pause.
	var paused time.Time
	framework.Eventually(t, time.Minute, func() error {
		if leader.Exited() {
			code, _ := leader.Wait(0)
			t.Fatalf("the cut-off leader %s exited with %d; want it paused, then a standby:\n%s", leader.user, code, leader.Logs())
		}
		m, err := leader.Metrics()
		if err != nil {
			return err
		}
		if v, _ := m.Value("mini_kcm_leader_election_pauses_total", map[string]string{"name": f.LeaseName}); v < 1 {
			return fmt.Errorf("the cut-off leader has not paused")
		}
		paused = time.Now()
		return nil
	})
	margin := expires.Sub(paused)
	if margin <= 0 {
		t.Errorf("the cut-off leader paused at %s, %v after its Lease could expire (%s)",
			paused.Format(time.StampMicro), -margin, expires.Format(time.StampMicro))
	}
	if logs := leader.Logs(); !strings.Contains(logs, "Paused leading") {
		t.Errorf("the cut-off leader's log does not say %q", "Paused leading")
	}

	newHolder, _ := f.WaitForNewHolder(oldHolder, time.Minute)
	tookOver := time.Now()
	next := leaderOf(t, f, members, time.Minute)
	resumed := waitForProgress(t, census, atPartition, 2*time.Minute)
	t.Logf("HA-TAKEOVER partition timings=%q leader-paused=%.2fs (%.2fs before its lease could expire) lease=%.2fs resumed=%.2fs new=%s (%s)",
		timings, paused.Sub(partitioned).Seconds(), margin.Seconds(), tookOver.Sub(partitioned).Seconds(),
		resumed.Sub(partitioned).Seconds(), next.user, newHolder)

	eventually(t, 2*time.Minute, func() error {
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
	if o := overlaps(windows); len(o) > 0 {
		t.Errorf("replicas wrote at the same time: %v", o)
	}
	if len(windows) != 2 || windows[0].user != leader.user || windows[1].user != next.user {
		t.Fatalf("want the cut-off leader's writes, then the new leader's; got %v", windows)
	}
	t.Logf("write windows: %v; the cut-off leader's last write ended %+.2fs from the partition, the new leader's first began %+.2fs from it; gap %.2fs",
		windows, windows[0].last.Sub(partitioned).Seconds(), windows[1].first.Sub(partitioned).Seconds(),
		windows[1].first.Sub(windows[0].last).Seconds())
	all := userSet(users...)
	created := requestFilter{users: all, namespace: ns, resource: "pods", verb: "create", codes: []int32{201}}.count(events)
	deleted := requestFilter{users: all, namespace: ns, resource: "pods", verb: "delete"}.count(events)
	t.Logf("HA-NUMBERS partition pods=%d created=%d duplicates=%d deleted=%d", replicas, created, created-replicas, deleted)
	if created != replicas || deleted != 0 {
		t.Errorf("replicas created %d pods and deleted %d for %d desired; want %d and 0", created, deleted, replicas, replicas)
	}

	// The partition heals; the old leader finds the Lease taken, drains behind its
	// closed fence and stands by, in the same process, and writes nothing.
	leader.proxy.Heal()
	restarted := time.Now()
	framework.Eventually(t, time.Minute, func() error {
		if leader.Exited() {
			code, _ := leader.Wait(0)
			t.Fatalf("the old leader %s exited with %d after the partition healed; want a standby:\n%s", leader.user, code, leader.Logs())
		}
		if !strings.Contains(leader.Logs(), "leaderelection lost") {
			return fmt.Errorf("the old leader has not noticed the takeover yet")
		}
		code, body, err := leader.Get("/readyz?verbose")
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("/readyz %d: %s", code, body)
		}
		return nil
	})
	time.Sleep(3 * timings.retry)
	if now := leaderOf(t, f, members, 10*time.Second); now != next {
		t.Errorf("leadership moved from %s to %s when the partitioned replica came back", next.user, now.user)
	}
	if leads, err := leader.IsLeader(f.LeaseName); err != nil || leads {
		t.Errorf("the old leader leads (%v, %v), want a standby", leads, err)
	}
	// Judged by when the apiserver received each write: a request of the cut-off leader
	// that arrived during the partition may have its response held by the proxy, and
	// its audit stage then completes only when Heal drops the connection, after restarted.
	events = readAudit(t, f.ControlPlane)
	for i := range events {
		e := &events[i]
		if e.User.Username == leader.user && isControllerWrite(e) && e.RequestReceivedTimestamp.After(restarted) {
			t.Errorf("the old leader, a standby again, wrote controller resources: %s %s/%s at %s (%s)", e.Verb, e.ObjectRef.Resource,
				e.ObjectRef.Name, e.RequestReceivedTimestamp.Format(time.StampMicro), describeWrites(events, leader.user))
		}
	}
}
