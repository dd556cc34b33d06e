//go:build long

package ha

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// The failover measurements of issue 14, run by make test-long (go test -tags long -run
// Long). They assert behaviour only (the new leader writes after it acquired, the old
// one is gone, nothing is lost) and log the numbers with the prefix HA-NUMBERS:
//
//   - SIGKILL of the leader to the new leader's first write, with a 1000-pod scale-up in
//     flight, over failoverRuns runs, at the default timings and at upstream's;
//   - during those runs, the Lease renewals as the apiserver saw them: the longest gap
//     between two renewals of one holder against the renew deadline, their latency,
//     and any lease lost without a kill;
//   - standby and leader RSS;
//   - acquire to first write with 10 000 pods cached, warm standby against cold.

// failoverRuns is how many SIGKILLs a measurement takes its median over.
const failoverRuns = 5

func TestLongSIGKILLToFirstWriteUnderAScaleUpAtDefaultTimings(t *testing.T) {
	measureSIGKILLToFirstWrite(t, defaultTimings)
}

func TestLongSIGKILLToFirstWriteUnderAScaleUpAtUpstreamTimings(t *testing.T) {
	measureSIGKILLToFirstWrite(t, upstreamTimings)
}

// measureSIGKILLToFirstWrite: three warm replicas; in each run a new ReplicaSet is
// scaled to 1000 pods, and once its first 100 exist the leader is SIGKILLed. The new
// leader's first write is read from the audit log. The killed replica is restarted, as
// a kubelet would, and the run's ReplicaSet and pods are deleted before the next run.
func measureSIGKILLToFirstWrite(t *testing.T, timings electionTimings) {
	f := framework.New(t)
	ctx := f.Context()
	ns := f.Namespace
	var members []*member
	for i := range 3 {
		members = append(members, startMember(t, f, fmt.Sprintf("ha-kill-%s-%d", ns[len(ns)-5:], i),
			memberOptions{timings: timings}))
	}
	leader := leaderOf(t, f, members, time.Minute)
	waitForWarmStandbys(t, members, leader)

	var toAcquire, toFirstWrite []time.Duration
	var leaderRSS, standbyRSS []float64
	for run := range failoverRuns {
		name := fmt.Sprintf("run-%d", run)
		if _, err := f.Client.AppsV1().ReplicaSets(ns).Create(ctx, newReplicaSet(name, 1000, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 2*time.Minute, func() error {
			pods, err := f.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
			if err != nil {
				return err
			}
			if len(pods.Items) < 100 {
				return fmt.Errorf("%d pods of %s, waiting for 100", len(pods.Items), name)
			}
			return nil
		})
		for _, m := range members {
			if rss, err := residentMiB(m.Pid()); err == nil {
				if m == leader {
					leaderRSS = append(leaderRSS, rss)
				} else {
					standbyRSS = append(standbyRSS, rss)
				}
			}
		}
		holder, err := f.Holder()
		if err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		leader.Kill()
		f.WaitForNewHolder(holder, time.Minute)
		next := leaderOf(t, f, members, time.Minute)
		acquired := leaseAcquireTime(t, f)
		var firstWrite time.Time
		eventually(t, time.Minute, func() error {
			firstWrite = firstControllerWriteAfter(readAudit(t, f.ControlPlane), next.user, killed)
			if firstWrite.IsZero() {
				return fmt.Errorf("no write by the new leader %s yet", next.user)
			}
			return nil
		})
		if firstWrite.Before(acquired) {
			t.Errorf("run %d: the new leader %s wrote at %s, before it acquired at %s", run, next.user,
				firstWrite.Format(time.StampMicro), acquired.Format(time.StampMicro))
		}
		toAcquire = append(toAcquire, acquired.Sub(killed))
		toFirstWrite = append(toFirstWrite, firstWrite.Sub(killed))
		t.Logf("HA-NUMBERS sigkill run=%d timings=%q kill-to-acquire=%.2fs kill-to-first-write=%.2fs acquire-to-first-write=%.0fms",
			run, timings, acquired.Sub(killed).Seconds(), firstWrite.Sub(killed).Seconds(),
			float64(firstWrite.Sub(acquired).Microseconds())/1000)

		// Clean up for the next run: the killed replica comes back as a standby, and
		// the run's pods go (without a garbage collector, deleting the ReplicaSet
		// leaves them).
		for _, m := range members {
			if m == leader {
				m.restart(t, f)
			}
		}
		leader = next
		if err := f.Client.AppsV1().ReplicaSets(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := f.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)},
			metav1.ListOptions{LabelSelector: "app=" + name}); err != nil {
			t.Fatal(err)
		}
		waitForWarmStandbys(t, members, leader)
	}

	events := readAudit(t, f.ControlPlane)
	var users []string
	for _, m := range members {
		users = append(users, m.user)
	}
	renewals := leaseRenewals(events, f.LeaseName, users)
	t.Logf("HA-NUMBERS sigkill timings=%q runs=%d kill-to-acquire p50=%.2fs [%s] kill-to-first-write p50=%.2fs [%s]",
		timings, failoverRuns, median(toAcquire).Seconds(), seconds(toAcquire), median(toFirstWrite).Seconds(), seconds(toFirstWrite))
	t.Logf("HA-NUMBERS renewals timings=%q %s", timings, renewals.summary(timings.renew))
	t.Logf("HA-NUMBERS rss leader=%.0fMiB standby=%.0fMiB ratio=%.2f (medians over runs, just before each kill)",
		medianFloat(leaderRSS), medianFloat(standbyRSS), medianFloat(standbyRSS)/medianFloat(leaderRSS))
	for _, lost := range renewals.lostWithoutKill(failoverRuns) {
		t.Errorf("a holder lost the lease without being killed: %s", lost)
	}
}

// TestLongAcquireToFirstWriteWith10000PodsCachedWarmAgainstCold: 10 000 Running pods
// (bound to the fake nodes directly, so that the scheduler is not the bottleneck), then
// for warm and cold standbys in turn: two replicas, the leader SIGKILLed, a ReplicaSet
// scaled at once, and the time from the new leader's acquire to its first write.
func TestLongAcquireToFirstWriteWith10000PodsCachedWarmAgainstCold(t *testing.T) {
	f := framework.New(t)
	ctx := f.Context()
	ns := f.Namespace
	total := 10000
	if n, err := strconv.Atoi(os.Getenv("HA_CACHED_PODS")); err == nil && n > 0 {
		total = n
	}
	createBoundPods(t, f, total)
	t.Logf("created %d Running pods", total)

	for _, warm := range []bool{true, false} {
		mode := map[bool]string{true: "warm", false: "cold"}[warm]
		name := "probe-" + mode
		if _, err := f.Client.AppsV1().ReplicaSets(ns).Create(ctx, newReplicaSet(name, 0, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var members []*member
		for i := range 2 {
			members = append(members, startMember(t, f, fmt.Sprintf("ha-%s-%s-%d", mode, ns[len(ns)-5:], i), memberOptions{
				timings: defaultTimings,
				args:    []string{"--leader-elect-warm-standby=" + strconv.FormatBool(warm)},
			}))
		}
		leader := leaderOf(t, f, members, 2*time.Minute)
		if warm {
			waitForWarmStandbys(t, members, leader)
		} else {
			// A cold standby has nothing to wait for; let the leader sync its own
			// caches so that the two runs kill a leader in the same state.
			eventually(t, 5*time.Minute, func() error { return expectReady(leader) })
		}
		var rss []string
		for _, m := range members {
			if v, err := residentMiB(m.Pid()); err == nil {
				rss = append(rss, fmt.Sprintf("%s=%.0fMiB", map[bool]string{true: "leader", false: "standby"}[m == leader], v))
			}
		}
		holder, err := f.Holder()
		if err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		leader.Kill()
		if err := scale(ctx, f, "ReplicaSet", name, 5); err != nil {
			t.Fatal(err)
		}
		f.WaitForNewHolder(holder, time.Minute)
		next := leaderOf(t, f, members, time.Minute)
		acquired := leaseAcquireTime(t, f)
		var firstWrite time.Time
		eventually(t, 5*time.Minute, func() error {
			firstWrite = firstControllerWriteAfter(readAudit(t, f.ControlPlane), next.user, killed)
			if firstWrite.IsZero() {
				return fmt.Errorf("no write by the new leader %s yet", next.user)
			}
			return nil
		})
		if firstWrite.Before(acquired) {
			t.Errorf("%s: the new leader wrote before it acquired", mode)
		}
		// The freshness barrier's path: warm (the caches had the predecessor's last
		// write), cold (it could not show that and started fresh informers), or none (a
		// cold standby has no barrier to pass).
		path := "none"
		if metrics, err := next.Metrics(); err == nil {
			for _, p := range []string{"warm", "cold"} {
				if v, ok := metrics.Value("mini_kcm_leader_election_takeover_total", map[string]string{"path": p}); ok && v > 0 {
					path = p
				}
			}
		}
		if warm && path != "warm" {
			t.Errorf("the warm standby took over on the %s path at %d cached pods; the barrier fell back", path, total)
		}
		t.Logf("HA-NUMBERS cached-pods=%d standby=%s takeover-path=%s acquire-to-first-write=%.0fms kill-to-first-write=%.2fs rss-before-kill: %s",
			total, mode, path, float64(firstWrite.Sub(acquired).Microseconds())/1000, firstWrite.Sub(killed).Seconds(), strings.Join(rss, " "))
		eventually(t, 2*time.Minute, func() error { return replicaSetComplete(ctx, f.Client, ns, name) })
		for _, m := range members {
			if !m.Exited() {
				m.Kill()
			}
		}
	}
}

// createBoundPods creates n pods bound to the fake nodes, 16 at a time.
func createBoundPods(t *testing.T, f *framework.Framework, n int) {
	t.Helper()
	nodes := f.ControlPlane.NodeNames()
	if len(nodes) == 0 {
		t.Fatal("the control plane has no fake nodes")
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				pod := &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cached-%05d", i), Labels: map[string]string{"app": "cached"}},
					Spec:       podTemplate(nil).Spec,
				}
				pod.Spec.NodeName = nodes[i%len(nodes)]
				if _, err := f.Client.CoreV1().Pods(f.Namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
}

// waitForWarmStandbys waits until every member but the leader answers /readyz, which a
// warm standby does once its informers synced.
func waitForWarmStandbys(t *testing.T, members []*member, leader *member) {
	t.Helper()
	for _, m := range members {
		if m != leader {
			eventually(t, 5*time.Minute, func() error { return expectReady(m) })
		}
	}
}

func expectReady(m *member) error {
	code, body, err := m.Get("/readyz?verbose")
	if err != nil {
		return err
	}
	if code != 200 {
		return fmt.Errorf("%s is not ready: %s", m.user, body)
	}
	return nil
}

// leaseAcquireTime reads when the current holder acquired the test's Lease (by its own
// clock, which is this machine's).
func leaseAcquireTime(t *testing.T, f *framework.Framework) time.Time {
	t.Helper()
	lease, err := f.Client.CoordinationV1().Leases(f.LeaseNamespace).Get(f.Context(), f.LeaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Spec.AcquireTime == nil {
		t.Fatalf("lease %s/%s has no acquire time", f.LeaseNamespace, f.LeaseName)
	}
	return lease.Spec.AcquireTime.Time
}

// firstControllerWriteAfter returns when the apiserver received user's first controller
// write after since, or zero.
func firstControllerWriteAfter(events []controlplane.AuditEvent, user string, since time.Time) time.Time {
	var first time.Time
	for i := range events {
		e := &events[i]
		at := e.RequestReceivedTimestamp
		if e.By == user && isControllerWrite(e) && at.After(since) && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first
}

// renewalStats are the successful updates of the Lease, as the apiserver logged them.
type renewalStats struct {
	// gaps are the times between two successive successful updates by the same holder.
	gaps []time.Duration
	// latencies are the apiserver's times to answer one update.
	latencies []time.Duration
	// holders lists the holder of each successful update, in order.
	holders []string
}

func leaseRenewals(events []controlplane.AuditEvent, lease string, users []string) renewalStats {
	var s renewalStats
	lastByUser := map[string]time.Time{}
	var last string
	for i := range events {
		e := &events[i]
		if e.Stage != "ResponseComplete" || e.ObjectRef == nil || e.ObjectRef.Resource != "leases" ||
			e.ObjectRef.Name != lease || e.Verb != "update" || e.Code() != 200 || !slices.Contains(users, e.By) {
			continue
		}
		u := e.By
		if prev, ok := lastByUser[u]; ok && last == u {
			s.gaps = append(s.gaps, e.RequestReceivedTimestamp.Sub(prev))
		}
		lastByUser[u], last = e.RequestReceivedTimestamp, u
		s.latencies = append(s.latencies, e.StageTimestamp.Sub(e.RequestReceivedTimestamp))
		if len(s.holders) == 0 || s.holders[len(s.holders)-1] != u {
			s.holders = append(s.holders, u)
		}
	}
	return s
}

func (s renewalStats) summary(renewDeadline time.Duration) string {
	return fmt.Sprintf("updates=%d holders=%d gap p50=%s p99=%s max=%s (renew deadline %s) apiserver-latency p50=%s p99=%s max=%s",
		len(s.latencies), len(s.holders), median(s.gaps), percentile(s.gaps, 99), percentile(s.gaps, 100), renewDeadline,
		median(s.latencies), percentile(s.latencies, 99), percentile(s.latencies, 100))
}

// lostWithoutKill reports holder changes beyond the kills: the first holder and one
// per kill are expected.
func (s renewalStats) lostWithoutKill(kills int) []string {
	if extra := len(s.holders) - (kills + 1); extra > 0 {
		return []string{fmt.Sprintf("%d holder changes for %d kills: %v", len(s.holders)-1, kills, s.holders)}
	}
	return nil
}

// residentMiB returns the process's resident set size (VmRSS) in MiB.
func residentMiB(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kib / 1024, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no VmRSS", pid)
}

func median(ds []time.Duration) time.Duration { return percentile(ds, 50) }

func medianFloat(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	sorted := slices.Clone(vs)
	slices.Sort(sorted)
	return sorted[len(sorted)/2]
}

func seconds(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = fmt.Sprintf("%.2f", d.Seconds())
	}
	return strings.Join(parts, " ")
}
