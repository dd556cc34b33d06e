package framework

import (
	"context"
	"crypto/rand"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/mini-kcm/mini-kcm/sharding"
	"github.com/mini-kcm/mini-kcm/test/controlplane"
)

// Framework is the per-test view of the suite: a namespace of its own, a Lease of its
// own, and the replicas the test started, which are killed when the test ends.
type Framework struct {
	t *testing.T
	// ControlPlane is the suite's control plane.
	ControlPlane *controlplane.ControlPlane
	// Client is an admin client.
	Client kubernetes.Interface
	// Namespace is created for this test; the test's objects go here.
	Namespace string
	// LeaseNamespace and LeaseName locate the Lease the test's replicas elect a leader
	// with: kube-system and a name unique to the test, so that a replica killed by an
	// earlier test cannot hold it.
	LeaseNamespace, LeaseName string

	replicas []*Replica
	// fenced records the Leases the test bound the fence policy to (see fenceReplica),
	// and fenceBindings the bindings, removed when the test ends.
	fenced        map[string]bool
	fenceBindings []string
	// leaseRoles are the Leases (namespace/name) the shipped identity was given the
	// leader-election rules on for this test (grantShippedLeaseRights).
	leaseRoles []string
}

// New sets up a test: a namespace, a Lease name, and a cleanup that dumps the replica
// logs if the test failed, kills the replicas and deletes what the test created.
func New(t *testing.T) *Framework {
	t.Helper()
	cp := ControlPlane(t)
	ns := namespaceName(t.Name())
	f := &Framework{
		t:              t,
		ControlPlane:   cp,
		Client:         cp.Client(),
		Namespace:      ns,
		LeaseNamespace: "kube-system",
		LeaseName:      "mini-kcm-" + ns,
	}
	_, err := f.Client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace %s: %v", ns, err)
	}
	t.Cleanup(f.cleanup)
	return f
}

// Context returns a context that ends when the test does.
func (f *Framework) Context() context.Context { return f.t.Context() }

func (f *Framework) cleanup() {
	for _, r := range f.replicas {
		r.Kill()
		// A race-detector build (make test-e2e) reports races in its log and keeps
		// running; a race is a bug even when the test's assertions passed.
		if logs := r.Logs(); strings.Contains(logs, "WARNING: DATA RACE") {
			f.t.Errorf("replica %s reported a data race; see %s", r.Name, r.LogPath())
		}
	}
	if f.t.Failed() {
		for _, r := range f.replicas {
			f.t.Logf("---- last 80 lines of replica %s (%s) ----\n%s", r.Name, r.LogPath(), controlplane.Tail(r.LogPath(), 80))
		}
	}
	f.deleteFenceBindings()
	f.deleteNamespaceContents()
}

// deleteNamespaceContents deletes the test's objects and Lease. No namespace or
// garbage collector runs, so deleting the namespace alone would leave every object in
// place for the next test's replicas to reconcile.
func (f *Framework) deleteNamespaceContents() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	all := metav1.ListOptions{}
	del := metav1.DeleteOptions{}
	ns := f.Namespace
	f.removeFinalizers(ctx)
	// No kubelet serves pods on nodes KWOK does not manage; grace 0 removes them at once.
	now := metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}
	deletes := []func() error{
		func() error { return f.Client.AppsV1().Deployments(ns).DeleteCollection(ctx, del, all) },
		func() error { return f.Client.AppsV1().ReplicaSets(ns).DeleteCollection(ctx, del, all) },
		func() error { return f.Client.CoreV1().Pods(ns).DeleteCollection(ctx, now, all) },
		func() error { return f.Client.CoreV1().Endpoints(ns).DeleteCollection(ctx, del, all) },
		func() error { return f.Client.DiscoveryV1().EndpointSlices(ns).DeleteCollection(ctx, del, all) },
		func() error { return f.Client.CoreV1().Events(ns).DeleteCollection(ctx, del, all) },
		func() error {
			return f.Client.CoordinationV1().Leases(f.LeaseNamespace).Delete(ctx, f.LeaseName, del)
		},
		func() error { return f.Client.CoreV1().Namespaces().Delete(ctx, ns, del) },
	}
	// Services cannot be deleted as a collection.
	if services, err := f.Client.CoreV1().Services(ns).List(ctx, all); err == nil {
		for _, s := range services.Items {
			_ = f.Client.CoreV1().Services(ns).Delete(ctx, s.Name, del)
		}
	}
	for _, d := range deletes {
		// Best effort: the objects are only noise for later tests, and a failure here
		// must not hide the test's own result.
		_ = d()
	}
}

// removeFinalizers clears the finalizers tests put on pods, ReplicaSets and Deployments
// to hold them terminating; otherwise they would outlive the test and its namespace.
func (f *Framework) removeFinalizers(ctx context.Context) {
	clear := []byte(`{"metadata":{"finalizers":null}}`)
	ns := f.Namespace
	opts := metav1.PatchOptions{}
	if pods, err := f.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, o := range pods.Items {
			if len(o.Finalizers) > 0 {
				_, _ = f.Client.CoreV1().Pods(ns).Patch(ctx, o.Name, types.MergePatchType, clear, opts)
			}
		}
	}
	if rss, err := f.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, o := range rss.Items {
			if len(o.Finalizers) > 0 {
				_, _ = f.Client.AppsV1().ReplicaSets(ns).Patch(ctx, o.Name, types.MergePatchType, clear, opts)
			}
		}
	}
	if ds, err := f.Client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, o := range ds.Items {
			if len(o.Finalizers) > 0 {
				_, _ = f.Client.AppsV1().Deployments(ns).Patch(ctx, o.Name, types.MergePatchType, clear, opts)
			}
		}
	}
}

var invalidNameChars = regexp.MustCompile(`[^a-z0-9]+`)

// namespaceName derives a valid, unique namespace name from a test name.
func namespaceName(testName string) string {
	name := strings.Trim(invalidNameChars.ReplaceAllString(strings.ToLower(testName), "-"), "-")
	if len(name) > 40 {
		name = strings.TrimRight(name[:40], "-")
	}
	return fmt.Sprintf("e2e-%s-%s", name, strings.ToLower(rand.Text()[:5]))
}

// Eventually calls check until it returns nil, failing the test with the last error
// if it does not within timeout.
func Eventually(t testing.TB, timeout time.Duration, check func() error) {
	t.Helper()
	EventuallyEvery(t, timeout, 100*time.Millisecond, check)
}

// EventuallyEvery is Eventually with a poll interval of its own, for checks that list
// hundreds of objects and would load the apiserver at Eventually's 100ms.
func EventuallyEvery(t testing.TB, timeout, interval time.Duration, check func() error) {
	t.Helper()
	if err := poll(timeout, interval, check); err != nil {
		t.Fatal(err)
	}
}

// PodReady reports whether a pod's Ready condition is True, as the controllers read it.
func PodReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// poll calls check every interval until it returns nil or timeout passes, returning
// the last error then.
func poll(timeout, interval time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still failing after %v: %w", timeout, err)
		}
		time.Sleep(interval)
	}
}

// ServerFiltersByShard asks the suite's apiserver whether it filters lists by
// shardSelector (sharding.ServerFilters), with a Service of the test's own to probe with,
// in case the apiserver has not created default/kubernetes yet.
func (f *Framework) ServerFiltersByShard() bool {
	f.t.Helper()
	probe := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "shard-probe"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := f.Client.CoreV1().Services(f.Namespace).Create(f.Context(), probe, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	filters, err := sharding.ServerFilters(f.Context(), f.Client)
	if err != nil {
		f.t.Fatal(err)
	}
	return filters
}
