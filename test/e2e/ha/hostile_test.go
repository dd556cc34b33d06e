package ha

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// hostileQPS and hostileBurst size the replicaset controller's client in the hostile
// objects test: enough to keep a 500-pod burst within seconds, low enough that the
// rate limit, not the machine, is what bounds it.
const (
	hostileQPS   = 50
	hostileBurst = 100
	// burstReplicas is upstream's cap on pods created or deleted in one sync.
	burstReplicas = 500
)

// TestHostileAndOddObjectsGetUpstreamOutcomesWithoutPanicsOrHotLoops feeds a leader
// what users get wrong or do on purpose: ReplicaSets fighting over the same pods, pods
// owned by kinds mini-kcm does not know, a ReplicaSet asking for 100 000 pods, and
// objects deleted while they are being synced. Each gets upstream's outcome; no replica
// logs a panic, and during an idle period the leader writes nothing and uses little CPU.
func TestHostileAndOddObjectsGetUpstreamOutcomesWithoutPanicsOrHotLoops(t *testing.T) {
	runHostileObjects(t, 30*time.Second)
}

func runHostileObjects(t *testing.T, idle time.Duration) {
	f := framework.New(t)
	ctx := f.Context()
	ns := f.Namespace
	census := watchPods(t, f.Client, ns)
	// The shipped election timings and a standby: nothing here is about failover, and
	// the load of a 500-pod burst on a busy shared machine must not cost the Lease.
	var members []*member
	for i := range 2 {
		members = append(members, startMember(t, f, fmt.Sprintf("ha-hostile-%s-%d", ns[len(ns)-5:], i), memberOptions{timings: defaultTimings,
			args: []string{fmt.Sprintf("--kube-api-qps=%d", hostileQPS), fmt.Sprintf("--kube-api-burst=%d", hostileBurst)}}))
	}
	leaderOf(t, f, members, time.Minute)
	users := userSet(members[0].user, members[1].user)
	leaderPodWrites := func() int {
		events := readAudit(t, f.ControlPlane)
		n := 0
		for i := range events {
			e := &events[i]
			if users[e.By] && isControllerWrite(e) && e.Resource() == "pods" && e.ObjectRef.Namespace == ns {
				n++
			}
		}
		return n
	}

	t.Run("ReplicaSets with the same selector each keep their own pods", func(t *testing.T) {
		for _, name := range []string{"fight-a", "fight-b"} {
			rs := newReplicaSet(name, 3, nil)
			rs.Spec.Selector.MatchLabels = map[string]string{"fight": "yes"}
			rs.Spec.Template.Labels = map[string]string{"fight": "yes"}
			// One more than desired for a moment: the orphan below is adopted first and
			// deleted after, as upstream does.
			census.limit("ReplicaSet", name, 4)
			if _, err := f.Client.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// An orphan both select: exactly one adopts it, and then has one pod too many.
		orphan := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "fight-orphan", Labels: map[string]string{"fight": "yes"}},
			Spec: podTemplate(nil).Spec}
		if _, err := f.Client.CoreV1().Pods(ns).Create(ctx, orphan, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, func() error {
			return allOf(
				func() error { return replicaSetComplete(ctx, f.Client, ns, "fight-a") },
				func() error { return replicaSetComplete(ctx, f.Client, ns, "fight-b") },
				func() error { return onlyControlledActivePods(ctx, f.Client, ns, "fight=yes", 6) },
			)
		})
		// Settled means settled: no more pod writes once both are complete.
		before := leaderPodWrites()
		time.Sleep(3 * time.Second)
		if after := leaderPodWrites(); after != before {
			t.Errorf("the leader kept writing pods after both ReplicaSets settled: %d writes in 3s", after-before)
		}
	})

	t.Run("pods controlled by unknown kinds or stale owners are left alone", func(t *testing.T) {
		widget := metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Widget", Name: "w", UID: uuid.NewUUID(), Controller: ptr.To(true)}
		staleRS := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "foreign", UID: uuid.NewUUID(), Controller: ptr.To(true)}
		notController := widget
		notController.Controller = ptr.To(false)
		foreign := map[string]metav1.OwnerReference{
			"foreign-widget":      widget,
			"foreign-stale-owner": staleRS,
		}
		for name, ref := range map[string]metav1.OwnerReference{"foreign-widget": widget, "foreign-stale-owner": staleRS, "foreign-not-controller": notController} {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "foreign"},
				OwnerReferences: []metav1.OwnerReference{ref}}, Spec: podTemplate(nil).Spec}
			if _, err := f.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// The ReplicaSet comes after the pods, so the orphan is normally adopted instead of
		// a new pod; if the pod informer lags behind the ReplicaSet informer, one pod is
		// created, the orphan adopted and one deleted, as upstream would.
		census.limit("ReplicaSet", "foreign", 3)
		rs, err := f.Client.AppsV1().ReplicaSets(ns).Create(ctx, newReplicaSet("foreign", 2, nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Upstream: only a controller reference counts. The pod with a non-controller
		// reference is an orphan and is adopted; the other two belong to someone else.
		eventually(t, time.Minute, func() error { return replicaSetComplete(ctx, f.Client, ns, "foreign") })
		adopted, err := f.Client.CoreV1().Pods(ns).Get(ctx, "foreign-not-controller", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ref := metav1.GetControllerOf(adopted); ref == nil || ref.UID != rs.UID || len(adopted.OwnerReferences) != 2 {
			t.Errorf("the pod with a non-controller owner reference was not adopted next to it: %+v", adopted.OwnerReferences)
		}
		for name, ref := range foreign {
			pod, err := f.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if len(pod.OwnerReferences) != 1 || pod.OwnerReferences[0].UID != ref.UID || pod.DeletionTimestamp != nil {
				t.Errorf("%s was touched: owners %+v, deletion %v", name, pod.OwnerReferences, pod.DeletionTimestamp)
			}
		}
		events := readAudit(t, f.ControlPlane)
		for name := range foreign {
			for _, verb := range []string{"patch", "update", "delete"} {
				filter := requestFilter{users: users, namespace: ns, resource: "pods", verb: verb}
				if n := countNamed(events, filter, name); n > 0 {
					t.Errorf("the leader sent %d %s requests for %s, which it does not control", n, verb, name)
				}
			}
		}
	})

	t.Run("a 100000-replica ReplicaSet is bounded by the burst and the rate limit and starves no one", func(t *testing.T) {
		// A short window, not a quota: the leader works on the huge ReplicaSet until the
		// test scales it to 0. Upstream creates at most 500 pods in one sync and does not
		// abandon a sync when the spec changes, so exactly one burst is expected.
		census.limit("ReplicaSet", "small", 3)
		if _, err := f.Client.AppsV1().ReplicaSets(ns).Create(ctx, newReplicaSet("huge", 100000, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		hugeStarted := time.Now()
		eventually(t, time.Minute, func() error {
			if n := census.podsSeenBy("ReplicaSet/huge"); n < 20 {
				return fmt.Errorf("%d pods of the huge ReplicaSet so far", n)
			}
			return nil
		})
		// Another ReplicaSet created now must not wait for the huge one.
		smallCreated := time.Now()
		if _, err := f.Client.AppsV1().ReplicaSets(ns).Create(ctx, newReplicaSet("small", 3, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := scale(ctx, f, "ReplicaSet", "huge", 0); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, func() error { return replicaSetComplete(ctx, f.Client, ns, "small") })
		smallTook := time.Since(smallCreated)
		eventually(t, 2*time.Minute, func() error { return replicaSetComplete(ctx, f.Client, ns, "huge") })
		hugeTook := time.Since(hugeStarted)

		created := census.podsSeenBy("ReplicaSet/huge")
		creates := createTimes(readAudit(t, f.ControlPlane), users, ns, hugeStarted)
		// The token bucket lets burst requests through at once and then qps a second, so
		// n creates take at least (n-burst)/qps. Requests bunch up on their way to the
		// apiserver on a busy machine, so shorter windows seen there say little.
		var span time.Duration
		if len(creates) > 0 {
			span = creates[len(creates)-1].Sub(creates[0])
		}
		least := time.Duration(float64(len(creates)-hostileBurst) / hostileQPS * float64(time.Second))
		waited := 0.0
		if m, err := leaderOf(t, f, members, time.Minute).Metrics(); err == nil {
			for _, s := range m["rest_client_rate_limiter_duration_seconds_sum"] {
				waited += s.Value
			}
		}
		t.Logf("HA-NUMBERS hostile huge-replicaset created=%d (burst %d) creates=%d over %.1fs (rate limit allows no less than %.1fs) rate-limiter-wait=%.0fs small-converged=%.1fs huge-back-to-0=%.1fs",
			created, burstReplicas, len(creates), span.Seconds(), least.Seconds(), waited, smallTook.Seconds(), hugeTook.Seconds())
		if created == 0 || created > burstReplicas {
			t.Errorf("the huge ReplicaSet got %d pods before its scale-down was seen, want 1 to %d (one burst)", created, burstReplicas)
		}
		if span < least-time.Second {
			t.Errorf("%d pod creates within %v, faster than the client's rate limit allows (%d/s, burst %d)", len(creates), span, hostileQPS, hostileBurst)
		}
	})

	t.Run("objects deleted while being synced", func(t *testing.T) {
		// A ReplicaSet deleted in the middle of its first burst: its sync ends with the
		// burst; no garbage collector runs here, so its pods stay as orphans of a gone
		// owner, and nothing creates more or touches them.
		if _, err := f.Client.AppsV1().ReplicaSets(ns).Create(ctx, newReplicaSet("doomed", 200, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, func() error {
			if n := census.podsSeenBy("ReplicaSet/doomed"); n < 5 {
				return fmt.Errorf("%d pods of the doomed ReplicaSet so far", n)
			}
			return nil
		})
		if err := f.Client.AppsV1().ReplicaSets(ns).Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		atDelete := census.podsSeenBy("ReplicaSet/doomed")
		settled := waitUntilStable(t, func() int { return census.podsSeenBy("ReplicaSet/doomed") }, 3*time.Second, time.Minute)
		t.Logf("HA-NUMBERS hostile deleted-replicaset pods-at-delete=%d pods-in-the-end=%d (replicas 200)", atDelete, settled)
		if settled > 200 {
			t.Errorf("%d pods for a deleted ReplicaSet of 200", settled)
		}

		// A Service deleted right after its creation: its Endpoints are removed, or never
		// written.
		if _, err := f.Client.CoreV1().Services(ns).Create(ctx, newService("gone", map[string]string{"app": "small"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := f.Client.CoreV1().Services(ns).Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, func() error {
			_, err := f.Client.CoreV1().Endpoints(ns).Get(ctx, "gone", metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("endpoints of the deleted service: %v", err)
			}
			return nil
		})

		// Pods deleted under a ReplicaSet are replaced, never one too many.
		pods, err := f.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=small"})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if err := f.Client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, time.Minute, func() error { return replicaSetComplete(ctx, f.Client, ns, "small") })
		if n := census.podsSeenBy("ReplicaSet/small"); n != 6 {
			t.Errorf("%d pods were ever created for small (3, then 3 replacements), want 6", n)
		}
		// The Deployment controller on a Deployment deleted before its first sync.
		if _, err := f.Client.AppsV1().Deployments(ns).Create(ctx, newDeployment("fleeting", 5, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := f.Client.AppsV1().Deployments(ns).Delete(ctx, "fleeting", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	census.checkNoViolations()

	// Let everything settle, then watch the leader do nothing. A replica that exited
	// under the load is a defect: a lost Lease makes a standby, not an exit.
	for _, m := range members {
		if m.Exited() {
			code, _ := m.Wait(0)
			t.Fatalf("%s exited with %d under the load of this test; want it running:\n%s", m.user, code, m.Logs())
		}
	}
	leader := leaderOf(t, f, members, time.Minute)
	pid := leader.Pid()
	time.Sleep(5 * time.Second)
	cpuBefore, err := cpuSeconds(pid)
	if err != nil {
		t.Fatal(err)
	}
	metricsBefore, err := leader.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	idleFrom := time.Now()
	time.Sleep(idle)
	idleTo := time.Now()
	cpuAfter, err := cpuSeconds(pid)
	if err != nil {
		t.Fatal(err)
	}
	metricsAfter, err := leader.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	events := readAudit(t, f.ControlPlane)
	writes, byKind := 0, map[string]int{}
	for i := range events {
		e := &events[i]
		if users[e.By] && isControllerWrite(e) && e.RequestReceivedTimestamp.After(idleFrom) && e.RequestReceivedTimestamp.Before(idleTo) {
			writes++
			byKind[e.Verb+" "+e.Resource()]++
		}
	}
	adds := 0.0
	for _, queue := range []string{"replicaset", "deployment", "endpoint"} {
		before, _ := metricsBefore.Value("workqueue_adds_total", map[string]string{"name": queue})
		after, _ := metricsAfter.Value("workqueue_adds_total", map[string]string{"name": queue})
		adds += after - before
	}
	cpu := cpuAfter - cpuBefore
	t.Logf("HA-NUMBERS hostile idle=%v cpu=%.2fs (%.1f%% of one core) controller-writes=%d %v queue-adds=%.0f",
		idle, cpu, 100*cpu/idle.Seconds(), writes, byKind, adds)
	// A race-detector build renewing its Lease every second, with informers holding a
	// few hundred objects, needs a few percent of a core; a hot loop needs all of it.
	if cpu > 0.1*idle.Seconds() {
		t.Errorf("the idle leader used %.2f CPU seconds in %v: more than 10%% of a core", cpu, idle)
	}
	if writes > 0 {
		t.Errorf("the idle leader wrote %d times: %v", writes, byKind)
	}
	if adds > 5 {
		t.Errorf("%.0f work queue adds while idle", adds)
	}

	if leader.Exited() || leader.Pid() != pid {
		t.Fatalf("the leader exited while idle")
	}
	for _, m := range members {
		if strings.Contains(m.allLogs(), "panic") {
			t.Errorf("the log of %s mentions a panic:\n%s", m.user, controlplane.Tail(m.LogPath(), 60))
		}
	}
}

// onlyControlledActivePods reports why the active pods matching selector are not
// exactly want, each controlled by some owner.
func onlyControlledActivePods(ctx context.Context, client kubernetes.Interface, ns, selector string, want int) error {
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return err
	}
	active := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		if !isActive(p) {
			continue
		}
		active++
		if metav1.GetControllerOf(p) == nil {
			return fmt.Errorf("pod %s has no controller", p.Name)
		}
	}
	if active != want {
		return fmt.Errorf("%d active pods match %s, want %d", active, selector, want)
	}
	return nil
}

// countNamed counts the events that filter selects for the object name.
func countNamed(events []controlplane.AuditEvent, filter requestFilter, name string) int {
	var named []controlplane.AuditEvent
	for _, e := range events {
		if e.ObjectRef != nil && e.ObjectRef.Name == name {
			named = append(named, e)
		}
	}
	return filter.count(named)
}

// createTimes returns when the apiserver received the pod creates of users in ns since
// from, sorted.
func createTimes(events []controlplane.AuditEvent, users map[string]bool, ns string, from time.Time) []time.Time {
	var times []time.Time
	for i := range events {
		e := &events[i]
		if e.Stage == "ResponseComplete" && users[e.By] && e.Verb == "create" && e.Resource() == "pods" &&
			e.ObjectRef.Namespace == ns && !e.RequestReceivedTimestamp.Before(from) {
			times = append(times, e.RequestReceivedTimestamp)
		}
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	return times
}

// waitUntilStable waits until value has not changed for quiet and returns it.
func waitUntilStable(t *testing.T, value func() int, quiet, timeout time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last, since := value(), time.Now()
	for time.Since(since) < quiet {
		if time.Now().After(deadline) {
			t.Fatalf("still changing after %v (now %d)", timeout, last)
		}
		time.Sleep(200 * time.Millisecond)
		if v := value(); v != last {
			last, since = v, time.Now()
		}
	}
	return last
}
