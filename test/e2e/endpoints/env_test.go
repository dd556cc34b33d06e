package endpoints

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// Timeouts are generous: the machine is small and shared, and no test asserts on
// timing.
const (
	// startTimeout bounds a replica's election and cache sync.
	startTimeout = 90 * time.Second
	// convergeTimeout bounds the wait for the controller to reflect a change.
	convergeTimeout = 60 * time.Second
)

// env is one test's world: a namespace of its own (through the framework) and the
// mini-kcm replica running the endpoints controller for it.
type env struct {
	*framework.Framework
	t   *testing.T
	ctx context.Context
	// replica leads and runs the endpoints controller; its user name tells its requests
	// apart in the audit log.
	replica *framework.Replica
	// nodes are the fake nodes pods are spread over.
	nodes []string
	// podsCreated counts pods made by newPod, to spread them over the nodes.
	podsCreated int
}

// start sets up a test with one mini-kcm replica running only the endpoints
// controller, with extraArgs appended to its flags.
func start(t *testing.T, extraArgs ...string) *env {
	t.Helper()
	e := newEnv(t)
	e.startReplica(extraArgs...)
	return e
}

// newEnv sets up a test without starting mini-kcm, for tests that prepare objects a
// starting controller must find.
func newEnv(t *testing.T) *env {
	t.Helper()
	f := framework.New(t)
	e := &env{Framework: f, t: t, ctx: f.Context(), nodes: f.ControlPlane.NodeNames()}
	// Registered after framework.New, so they run before the framework deletes the
	// namespace's objects: first the dump, then the release of held pods.
	t.Cleanup(e.releaseHeldPods)
	t.Cleanup(e.dumpOnFailure)
	return e
}

// startReplica starts a mini-kcm replica running only the endpoints controller and
// waits until it leads and its caches synced (/readyz), so that everything the test
// does afterwards is seen by a running controller.
func (e *env) startReplica(extraArgs ...string) {
	e.t.Helper()
	args := append([]string{"--controllers=endpoints"}, extraArgs...)
	r := e.StartReplica(framework.ReplicaOptions{Args: args})
	if leader := e.WaitForLeader(startTimeout); leader != r {
		e.t.Fatalf("%s leads, want the replica just started, %s", leader.Name, r.Name)
	}
	r.WaitReady(e.t, startTimeout)
	e.replica = r
}

// dumpOnFailure logs the namespace's Services, Endpoints and pods when the test failed;
// the framework adds the replica's log.
func (e *env) dumpOnFailure() {
	if !e.t.Failed() {
		return
	}
	ctx, cancel := cleanupContext()
	defer cancel()
	var b strings.Builder
	if services, err := e.Client.CoreV1().Services(e.Namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for _, s := range services.Items {
			fmt.Fprintf(&b, "service %s: type=%s clusterIP=%s selector=%v publishNotReady=%v ports=%s labels=%v\n",
				s.Name, s.Spec.Type, s.Spec.ClusterIP, s.Spec.Selector, s.Spec.PublishNotReadyAddresses, toJSON(s.Spec.Ports), s.Labels)
		}
	}
	if list, err := e.Client.CoreV1().Endpoints(e.Namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for i := range list.Items {
			ep := &list.Items[i]
			fmt.Fprintf(&b, "endpoints %s: rv=%s labels=%v annotations=%v\n", ep.Name, ep.ResourceVersion, ep.Labels, ep.Annotations)
			for _, line := range describe(ep) {
				fmt.Fprintf(&b, "  %s\n", line)
			}
		}
	}
	if pods, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for i, p := range pods.Items {
			if i == 50 {
				fmt.Fprintf(&b, "... and %d more pods\n", len(pods.Items)-i)
				break
			}
			fmt.Fprintf(&b, "pod %s: node=%q phase=%s ready=%v ip=%s deleting=%v labels=%v\n",
				p.Name, p.Spec.NodeName, p.Status.Phase, framework.PodReady(&p), p.Status.PodIP, p.DeletionTimestamp != nil, p.Labels)
		}
	}
	e.t.Logf("---- namespace %s ----\n%s", e.Namespace, b.String())
}

// releaseHeldPods removes holdFinalizer from every pod of the namespace, so that the
// framework's cleanup can delete them.
func (e *env) releaseHeldPods() {
	ctx, cancel := cleanupContext()
	defer cancel()
	pods, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Logf("listing pods to release: %v", err)
		return
	}
	for _, p := range pods.Items {
		if slices.Contains(p.Finalizers, holdFinalizer) {
			patch := []byte(`{"metadata":{"finalizers":null}}`)
			if _, err := e.Client.CoreV1().Pods(e.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				e.t.Logf("releasing pod %s: %v", p.Name, err)
			}
		}
	}
}

// cleanupContext bounds calls made during cleanup, after the test's own context ended.
func cleanupContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// toJSON renders v for failure messages.
func toJSON(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(data)
}

// settle waits long enough for the controller to act on an event, where the test must
// show that it did not. It is never an assertion on how fast the controller is: every
// negative check is followed by a positive one that proves the controller was running.
func settle() { time.Sleep(2 * time.Second) }
