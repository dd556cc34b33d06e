package sharding

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/sharding"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// shardCount is the test's --shards: two per replica of three.
const shardCount = 6

// TestShardedReplicasShareTheNamespacesWithOneWriterEach is the user story of issue
// #17: three replicas share six shards of twelve tenant namespaces (named so that
// FNV-1a crowds them, which the plan's cuts must follow). Every ReplicaSet gets exactly
// its pods; each replica holds its fair share; a killed replica's shards are taken over
// and the work goes on without a lost or duplicated pod; a new replica takes its share;
// one that stops on SIGTERM hands its shards over at once; and the audit log shows, per
// namespace, never two replicas writing at once.
func TestShardedReplicasShareTheNamespacesWithOneWriterEach(t *testing.T) {
	f := framework.New(t)
	tenants := make([]string, 12)
	for i := range tenants {
		tenants[i] = fmt.Sprintf("%s-t%02d", f.Namespace, i)
		createNamespace(t, f, tenants[i])
	}
	// The first cut is made before the tenants hold any pod; the coordinator's first
	// looks after it (10s, then doubling) move the cuts once they do.
	args := shardedArgs(shardCount)
	replicas := f.StartReplicas(3, args)
	for _, ns := range tenants {
		createReplicaSet(t, f, ns, 3)
	}
	waitForPods(t, f, tenants, 3)
	waitForFairShares(t, f, replicas, 2)
	for _, r := range replicas {
		r.WaitReady(t, 30*time.Second)
		code, body, err := r.Get("/statusz/replica")
		if err != nil || code != 200 || !strings.Contains(body, fmt.Sprintf("%d shards, plan epoch", shardCount)) ||
			!strings.Contains(body, "3 live replicas, fair share 2") {
			t.Errorf("%s /statusz/replica: %d %v\n%s", r.Name, code, err, body)
		}
	}
	// Whether the coordinator recut the plan by now depends on the time its first look
	// took; TestARecutPausesOnlyTheShardsWhoseRangeMoves proves the recuts.
	t.Logf("plan epoch %d once the tenants filled", activeEpoch(t, f).Number)

	// A replica dies: its shards expire and the others take them, three each.
	killed := replicas[0]
	killed.Kill()
	killedAt := time.Now()
	survivors := replicas[1:]
	waitForFairShares(t, f, survivors, 3)
	t.Logf("SIGKILL → every shard held by the survivors: %s (lease %s, retry %s)",
		time.Since(killedAt).Round(10*time.Millisecond), framework.LeaseDuration, framework.RetryPeriod)
	for _, ns := range tenants {
		scaleReplicaSet(t, f, ns, 5)
	}
	waitForPods(t, f, tenants, 5)

	// A new replica joins and gets its share back from the others.
	joined := f.StartReplica(args)
	waitForMembers(t, f, 3)
	seen := time.Now()
	waitForFairShares(t, f, append(survivors, joined), 2)
	t.Logf("new member's Lease seen → fair shares of 2 again: %s", time.Since(seen).Round(10*time.Millisecond))
	for _, ns := range tenants {
		scaleReplicaSet(t, f, ns, 2)
	}
	waitForPods(t, f, tenants, 2)

	// SIGTERM: the replica drains and releases its shards and leaves, and the others
	// take them at once instead of after the Leases expire.
	leaving := survivors[0]
	leaving.Term()
	termAt := time.Now()
	remaining := []*framework.Replica{survivors[1], joined}
	waitForFairShares(t, f, remaining, 3)
	t.Logf("SIGTERM → every shard held by the others: %s", time.Since(termAt).Round(10*time.Millisecond))
	if code, err := leaving.Wait(30 * time.Second); err != nil || code != 0 {
		t.Errorf("%s after SIGTERM: exit code %d, %v; want a graceful exit 0", leaving.Name, code, err)
	}
	for _, ns := range tenants {
		scaleReplicaSet(t, f, ns, 4)
	}
	waitForPods(t, f, tenants, 4)

	// `mini-kcm leader` shows the plan and every shard's holder. The coordinator may
	// recut while the command runs (it looks again soon after a cut), so the output is
	// compared with the plan and holders read before and after it, until they agree.
	framework.Eventually(t, time.Minute, func() error {
		epoch, holders := activeEpoch(t, f), shardLeases(t, f)
		res := framework.RunMiniKCM(t, 20*time.Second, "leader", "--kubeconfig="+f.ControlPlane.KubeconfigPath(),
			"--leader-elect-resource-namespace="+f.LeaseNamespace, "--leader-elect-resource-name="+f.LeaseName)
		if again := activeEpoch(t, f); again.Number != epoch.Number {
			return fmt.Errorf("the plan moved from epoch %d to %d while mini-kcm leader ran", epoch.Number, again.Number)
		}
		if res.ExitCode != 0 || !strings.Contains(res.Output, fmt.Sprintf("Plan: epoch %d, %d shards", epoch.Number, shardCount)) ||
			!strings.Contains(res.Output, "2 live replicas") {
			return fmt.Errorf("mini-kcm leader: exit code %d, output:\n%s", res.ExitCode, res.Output)
		}
		for i, l := range holders {
			if h := ptr.Deref(l.Spec.HolderIdentity, ""); i < shardCount && !strings.Contains(res.Output, h) {
				return fmt.Errorf("mini-kcm leader does not name %s, the holder of shard %d:\n%s", h, i, res.Output)
			}
		}
		return nil
	})

	assertOneWriterAtATime(t, f, tenants)
}

// TestAReplicaRefusesToShardOnAnApiserverThatIgnoresTheSelector is in the foundation
// suite, whose apiserver lacks the gate.

// shardedArgs are the flags of these tests' replicas, then extra: shards shards, the
// ReplicaSet controller only, and no apiserver fence (these tests install no shard
// fence bindings; apiserverfence_test.go does).
func shardedArgs(shards int, extra ...string) framework.ReplicaOptions {
	return framework.ReplicaOptions{Args: append([]string{
		fmt.Sprintf("--shards=%d", shards), "--controllers=replicaset", "--leader-elect-apiserver-fence=false",
	}, extra...)}
}

// createTenants creates n tenant namespaces named after the test's namespace, each
// with a ReplicaSet of replicas pods.
func createTenants(t *testing.T, f *framework.Framework, n int, replicas int32) []string {
	t.Helper()
	return createTenantsNamed(t, f, n, replicas, "%[1]s-t%02[2]d")
}

// createTenantsNamed creates n tenant namespaces named by format, whose arguments are
// the test's namespace and the tenant's number, each with a ReplicaSet of replicas pods.
func createTenantsNamed(t *testing.T, f *framework.Framework, n int, replicas int32, format string) []string {
	t.Helper()
	tenants := make([]string, n)
	for i := range tenants {
		tenants[i] = fmt.Sprintf(format, f.Namespace, i)
		createNamespace(t, f, tenants[i])
		createReplicaSet(t, f, tenants[i], replicas)
	}
	return tenants
}

func createNamespace(t *testing.T, f *framework.Framework, ns string) {
	t.Helper()
	ctx := f.Context()
	if _, err := f.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
}

func createReplicaSet(t *testing.T, f *framework.Framework, ns string, replicas int32) {
	t.Helper()
	labels := map[string]string{"app": "tenant"}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: ns},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}
	if _, err := f.Client.AppsV1().ReplicaSets(ns).Create(f.Context(), rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func scaleReplicaSet(t *testing.T, f *framework.Framework, ns string, replicas int32) {
	t.Helper()
	framework.Eventually(t, 30*time.Second, func() error {
		rs, err := f.Client.AppsV1().ReplicaSets(ns).Get(f.Context(), "tenant", metav1.GetOptions{})
		if err != nil {
			return err
		}
		rs.Spec.Replicas = ptr.To(replicas)
		_, err = f.Client.AppsV1().ReplicaSets(ns).Update(f.Context(), rs, metav1.UpdateOptions{})
		return err
	})
}

// waitForPods waits until every tenant has exactly want live pods and its ReplicaSet
// says so, then checks that it stays so: a second writer would create or delete more.
func waitForPods(t *testing.T, f *framework.Framework, tenants []string, want int) {
	t.Helper()
	check := func() error {
		for _, ns := range tenants {
			pods, err := f.Client.CoreV1().Pods(ns).List(f.Context(), metav1.ListOptions{})
			if err != nil {
				return err
			}
			live := 0
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil {
					live++
				}
			}
			rs, err := f.Client.AppsV1().ReplicaSets(ns).Get(f.Context(), "tenant", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if live != want || rs.Status.Replicas != int32(want) || rs.Status.ObservedGeneration != rs.Generation {
				return fmt.Errorf("namespace %s: %d live pods, status.replicas %d (generation %d observed %d), want %d",
					ns, live, rs.Status.Replicas, rs.Generation, rs.Status.ObservedGeneration, want)
			}
		}
		return nil
	}
	framework.Eventually(t, 2*time.Minute, check)
	time.Sleep(2 * framework.RetryPeriod)
	if err := check(); err != nil {
		t.Fatalf("after converging: %v", err)
	}
}

// shardLeases returns the test's shard Leases by shard.
func shardLeases(t *testing.T, f *framework.Framework) map[int]coordinationv1.Lease {
	t.Helper()
	list, err := f.Client.CoordinationV1().Leases(f.LeaseNamespace).List(f.Context(), metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(sharding.Labels(f.LeaseName, sharding.RoleShard)).String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]coordinationv1.Lease{}
	for _, l := range list.Items {
		if i, ok := sharding.ShardOf(f.LeaseName, l.Name); ok {
			out[i] = l
		}
	}
	return out
}

// waitForFairShares waits until every shard is held, each by one of replicas, and each
// replica holds share shards.
func waitForFairShares(t *testing.T, f *framework.Framework, replicas []*framework.Replica, share int) {
	t.Helper()
	if shardCount != share*len(replicas) {
		t.Fatalf("%d shards cannot be shared %d each by %d replicas", shardCount, share, len(replicas))
	}
	waitForFairSharesOf(t, f, replicas, shardCount)
}

// waitForFairSharesOf waits until each of count shards is held by one of replicas, and
// each replica holds its fair share: ceil(count / replicas) or one fewer.
func waitForFairSharesOf(t *testing.T, f *framework.Framework, replicas []*framework.Replica, count int) {
	t.Helper()
	framework.EventuallyEvery(t, time.Minute, 50*time.Millisecond, func() error {
		// Only the given replicas' current processes count as holders: a killed
		// replica's identity stays on its shard Leases until they expire.
		names := map[string]string{}
		for _, r := range replicas {
			if r.Exited() {
				return fmt.Errorf("%s exited", r.Name)
			}
			id, err := r.Identity()
			if err != nil {
				return err
			}
			names[id] = r.Name
		}
		held := map[string][]int{}
		for i, l := range shardLeases(t, f) {
			if i >= count {
				continue
			}
			h := ptr.Deref(l.Spec.HolderIdentity, "")
			if h == "" {
				return fmt.Errorf("shard %d is not held", i)
			}
			if names[h] == "" {
				return fmt.Errorf("shard %d is held by %s, none of the live replicas %v", i, h, names)
			}
			held[names[h]] = append(held[names[h]], i)
		}
		if len(held) != len(replicas) {
			return fmt.Errorf("holders %v, want %d replicas", held, len(replicas))
		}
		share := (count + len(replicas) - 1) / len(replicas)
		for h, s := range held {
			if len(s) != share && len(s) != share-1 {
				return fmt.Errorf("%s holds shards %v, want %d or %d", h, s, share-1, share)
			}
		}
		return nil
	})
}

// waitForMembers waits until n membership Leases were renewed within their duration
// (one clock: every process of the test runs on this machine).
func waitForMembers(t *testing.T, f *framework.Framework, n int) {
	t.Helper()
	framework.EventuallyEvery(t, time.Minute, 50*time.Millisecond, func() error {
		list, err := f.Client.CoordinationV1().Leases(f.LeaseNamespace).List(f.Context(), metav1.ListOptions{
			LabelSelector: labels.SelectorFromSet(sharding.Labels(f.LeaseName, sharding.RoleMember)).String(),
		})
		if err != nil {
			return err
		}
		live := 0
		for _, l := range list.Items {
			d := time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, 0)) * time.Second
			if l.Spec.RenewTime != nil && time.Since(l.Spec.RenewTime.Time) < d {
				live++
			}
		}
		if live != n {
			return fmt.Errorf("%d live membership Leases, want %d", live, n)
		}
		return nil
	})
}

func activeEpoch(t *testing.T, f *framework.Framework) sharding.Epoch {
	t.Helper()
	l, err := f.Client.CoordinationV1().Leases(f.LeaseNamespace).Get(f.Context(), sharding.PlanLeaseName(f.LeaseName), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	active, _, err := sharding.PlanOf(l)
	if err != nil || active == nil {
		t.Fatalf("plan Lease: active %v, err %v", active, err)
	}
	return *active
}

// assertOneWriterAtATime reads the audit log: per namespace, the spans of time in
// which the replicas' shard terms wrote (first to last accepted write of one holder's
// term, which its user agent names: "shard 3, epoch 2, term …") never overlap. A
// namespace that moved from one replica to another and back has three terms, one after
// the other; two replicas working on it at once would have overlapping ones. Then each
// accepted write is judged against the shard Leases' history in the same log: made
// while its replica held its shard's Lease, under the epoch label the Lease carried,
// for a namespace in that epoch's range (framework.AssertShardWritesByHolders).
func assertOneWriterAtATime(t *testing.T, f *framework.Framework, tenants []string) {
	t.Helper()
	events, err := framework.AuditLog(f.ControlPlane)
	if err != nil {
		t.Fatal(err)
	}
	spans := framework.ShardTermSpans(t, events, tenants)
	for _, ns := range tenants {
		if len(spans[ns]) == 0 {
			t.Errorf("namespace %s: no replica's write in the audit log", ns)
			continue
		}
		framework.AssertTermsDoNotOverlap(t, ns, spans[ns])
	}
	framework.AssertShardWritesByHolders(t, events, framework.ShardScope{
		LeaseNamespace: f.LeaseNamespace, LeaseName: f.LeaseName, Namespaces: tenants,
	})
}

// termSpans reads the audit log and returns, per tenant namespace and writer, the span
// of the accepted writes of the replicas' shard terms.
func termSpans(t *testing.T, f *framework.Framework, tenants []string) map[string]map[string]*framework.TermSpan {
	t.Helper()
	events, err := framework.AuditLog(f.ControlPlane)
	if err != nil {
		t.Fatal(err)
	}
	return framework.ShardTermSpans(t, events, tenants)
}
