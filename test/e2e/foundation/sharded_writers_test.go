package foundation

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// outOfRangeMetric counts the objects a replica's shard informers dropped because they
// lie outside the shard (sharding/filter.go).
const outOfRangeMetric = "mini_kcm_shard_out_of_range_objects_total"

// TestShardedReplicasOnAnApiserverThatIgnoresTheShardSelectorKeepOneWriterPerNamespace
// is issue #25's story of an apiserver without the ShardedListAndWatch gate: it sends
// every shard's informers every namespace. Three replicas share six shards of twelve
// tenant namespaces, each with a ReplicaSet of 3, and every ReplicaSet is scaled to 12.
// Each replica drops the other shards' objects itself (its out-of-range counter grows),
// so every namespace ends with exactly 12 pods and stays there; the audit log shows
// no delete per namespace, at most 12 accepted creates (a create whose answer was lost
// may have persisted its pod without a 2xx in the log), and never two replicas writing
// one namespace at once. (Without the client-side filter, every shard synced every namespace: pods
// were created several times over and deleted by different replicas.)
func TestShardedReplicasOnAnApiserverThatIgnoresTheShardSelectorKeepOneWriterPerNamespace(t *testing.T) {
	f := framework.New(t)
	if f.ServerFiltersByShard() {
		t.Fatal("this suite's apiserver filters by shard; the test needs one that ignores shardSelector")
	}
	// FNV-1a crowds names that differ only at their end into one shard; these differ at
	// their start, so that the namespaces spread over the shards and replicas.
	tenants := make([]string, 12)
	for i := range tenants {
		tenants[i] = fmt.Sprintf("t%02d-%s", i, f.Namespace)
		createTenant(t, f, tenants[i], 3)
	}
	// Product defaults but one: the apiserver fence, which the framework turns on for
	// every replica, is off: the framework binds the single leader's policy, and the
	// sharded one (one binding per shard Lease) is proven in test/e2e/sharding.
	replicas := f.StartReplicas(3, framework.ReplicaOptions{Args: []string{"--shards=6", framework.APIServerFenceFlag + "=false"}})
	waitForTenantPods(t, f, tenants, 3)
	for _, ns := range tenants {
		scaleTenant(t, f, ns, 12)
	}
	waitForTenantPods(t, f, tenants, 12)

	for _, r := range replicas {
		framework.Eventually(t, 30*time.Second, func() error {
			m, err := r.Metrics()
			if err != nil {
				return err
			}
			if v, _ := m.Value(outOfRangeMetric, nil); v <= 0 {
				return fmt.Errorf("%s: %s = %v, want > 0: it holds no shard, or cached other shards' objects", r.Name, outOfRangeMetric, v)
			}
			return nil
		})
		if r.Exited() {
			t.Errorf("%s exited; its log:\n%s", r.Name, r.Logs())
		}
	}
	assertEachTenantWrittenByOneReplicaAtATime(t, f, tenants, 12)
}

// createTenant creates a namespace with a ReplicaSet "tenant" of replicas pods, and
// removes both at the end: no namespace controller runs on this control plane, so the
// ReplicaSet and its pods go first, lest the suite's later replicas sync them in a
// namespace that never finishes terminating.
func createTenant(t *testing.T, f *framework.Framework, ns string, replicas int32) {
	t.Helper()
	ctx := f.Context()
	if _, err := f.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = f.Client.AppsV1().ReplicaSets(ns).Delete(ctx, "tenant", metav1.DeleteOptions{})
		_ = f.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = f.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	})
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
	if _, err := f.Client.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func scaleTenant(t *testing.T, f *framework.Framework, ns string, replicas int32) {
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

// waitForTenantPods waits until every tenant has exactly want pods, none of them being
// deleted, and a ReplicaSet status that says so; then checks it every 250ms for 5s: a
// second writer would create or delete more in that time.
func waitForTenantPods(t *testing.T, f *framework.Framework, tenants []string, want int) {
	t.Helper()
	check := func() error {
		for _, ns := range tenants {
			pods, err := f.Client.CoreV1().Pods(ns).List(f.Context(), metav1.ListOptions{})
			if err != nil {
				return err
			}
			deleting := 0
			for _, p := range pods.Items {
				if p.DeletionTimestamp != nil {
					deleting++
				}
			}
			rs, err := f.Client.AppsV1().ReplicaSets(ns).Get(f.Context(), "tenant", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(pods.Items) != want || deleting > 0 || rs.Status.Replicas != int32(want) || rs.Status.ObservedGeneration != rs.Generation {
				return fmt.Errorf("namespace %s: %d pods (%d being deleted), status.replicas %d (generation %d observed %d), want %d",
					ns, len(pods.Items), deleting, rs.Status.Replicas, rs.Generation, rs.Status.ObservedGeneration, want)
			}
		}
		return nil
	}
	framework.Eventually(t, time.Minute, check)
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		if err := check(); err != nil {
			t.Fatalf("after converging to %d pods per namespace: %v", want, err)
		}
	}
}

// assertEachTenantWrittenByOneReplicaAtATime reads the audit log (with the framework's
// shard term spans, as test/e2e/sharding's assertOneWriterAtATime): per tenant
// namespace, the replicas' accepted writes created exactly pods pods and deleted none, and the spans of time in
// which each shard term wrote (first to last write of one term, which the user agent
// names: "shard 3, epoch 2, term …") never overlap. Two replicas acting on one
// namespace at once would have overlapping spans.
func assertEachTenantWrittenByOneReplicaAtATime(t testing.TB, f *framework.Framework, tenants []string, pods int) {
	t.Helper()
	events, err := framework.AuditLog(f.ControlPlane)
	if err != nil {
		t.Fatal(err)
	}
	// A create is accepted (2xx), or attempted with an outcome the client never learnt
	// (its context ended, by a timeout or by the fence, while the apiserver persisted
	// the pod anyway: the audit log then records no 2xx although the pod exists).
	accepted, attempted, deleted := map[string]int{}, map[string]int{}, map[string]int{}
	for _, e := range events {
		if e.Stage != "ResponseComplete" || e.ObjectRef == nil || !strings.HasPrefix(e.By, "mini-kcm-replica-") ||
			!slices.Contains(tenants, e.ObjectRef.Namespace) || e.Resource() != "pods" {
			continue
		}
		switch {
		case e.Verb == "create" && e.Code() < 300:
			accepted[e.ObjectRef.Namespace]++
			attempted[e.ObjectRef.Namespace]++
		case e.Verb == "create" && e.Code() != 409 && e.Code() != 403 && e.Code() != 422:
			attempted[e.ObjectRef.Namespace]++
		case (e.Verb == "delete" || e.Verb == "deletecollection") && e.Code() < 300:
			deleted[e.ObjectRef.Namespace]++
		}
	}
	spans := framework.ShardTermSpans(t, events, tenants)
	writers := map[string]bool{}
	for _, byWriter := range spans {
		for _, s := range byWriter {
			writers[strings.Fields(s.Writer)[0]] = true
		}
	}
	if len(writers) < 2 {
		t.Errorf("only %v wrote to the tenant namespaces; the test needs them spread over several replicas", slices.Sorted(maps.Keys(writers)))
	}
	for _, ns := range tenants {
		// What exists is what counts: exactly pods, stable (waitForTenantPods), and none
		// deleted. A second writer shows as a pod too many, a delete, or accepted creates
		// beyond pods; every pod must come from a create the log saw.
		list, err := f.Client.CoreV1().Pods(ns).List(f.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		persisted := len(list.Items)
		if persisted != pods || deleted[ns] != 0 || accepted[ns] > pods || attempted[ns] < pods {
			t.Errorf("namespace %s: %d pods persisted, the replicas' creates %d accepted and %d with an unknown outcome, %d deletes; "+
				"want %d pods, at most %d accepted, every pod from a create, no delete",
				ns, persisted, accepted[ns], attempted[ns]-accepted[ns], deleted[ns], pods, pods)
		}
		if accepted[ns] < pods {
			t.Logf("namespace %s: %d of %d pods were created by a request whose answer the replica never got (persisted all the same)",
				ns, pods-accepted[ns], pods)
		}
		framework.AssertTermsDoNotOverlap(t, ns, spans[ns])
	}
	// And each accepted write came from the replica that held its shard's Lease when
	// the apiserver received it, under that Lease's label, for a namespace in its range.
	framework.AssertShardWritesByHolders(t, events, framework.ShardScope{
		LeaseNamespace: f.LeaseNamespace, LeaseName: f.LeaseName, Namespaces: tenants,
	})
}
