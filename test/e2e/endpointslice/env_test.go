package endpointslice

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// Timeouts are generous: the machine is small and shared, and no test asserts on
// timing.
const (
	// startTimeout bounds a controller's start: election and cache sync.
	startTimeout = 90 * time.Second
	// convergeTimeout bounds the wait for the controller to reflect a change.
	convergeTimeout = 60 * time.Second

	// managedBy is the managed-by label value of both controllers' slices.
	managedBy = "endpointslice-controller.k8s.io"
	// holdFinalizer keeps a deleted pod terminating: KWOK removes deleted pods only
	// once they have no finalizers.
	holdFinalizer = "e2e.mini-kcm.io/hold"
)

// env is one test's world: a namespace of its own (through the framework) and the
// controller under test.
type env struct {
	*framework.Framework
	t   *testing.T
	ctx context.Context
	// nodes are the fake nodes pods are spread over, each in a zone of its own.
	nodes []string
	// podsCreated counts pods made by newPod, to spread them over the nodes.
	podsCreated int

	// controllerUser is the user the running controller authenticates as, which tells
	// its requests apart in the audit log; replica is set when that is mini-kcm.
	controllerUser string
	replica        *framework.Replica
	// stopController kills the running controller.
	stopController func()
}

// zoneOf is the zone the suite gives a node: "zone-" and the node's index.
func zoneOf(i int) string { return fmt.Sprintf("zone-%d", i) }

// newEnv sets up a test without starting a controller. It labels the fake nodes with
// zones (idempotent across tests), before any controller caches them.
func newEnv(t *testing.T) *env {
	t.Helper()
	f := framework.New(t)
	e := &env{Framework: f, t: t, ctx: f.Context(), nodes: f.ControlPlane.NodeNames()}
	for i, node := range e.nodes {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, corev1.LabelTopologyZone, zoneOf(i))
		if _, err := e.Client.CoreV1().Nodes().Patch(e.ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatalf("labelling node %s with its zone: %v", node, err)
		}
	}
	// Registered after framework.New, so it runs before the framework deletes the
	// namespace's objects.
	t.Cleanup(e.dumpOnFailure)
	return e
}

// start sets up a test and starts the controller under test with extraArgs, which are
// the controller's flags and have the same names in mini-kcm and upstream.
func start(t *testing.T, extraArgs ...string) *env {
	t.Helper()
	e := newEnv(t)
	e.startController(extraArgs...)
	return e
}

// startController starts the controller under test: one mini-kcm replica running only
// the EndpointSlice controller, waiting until it leads and its caches synced; or, against
// upstream, kube-controller-manager with only its endpointslice controller.
func (e *env) startController(extraArgs ...string) {
	e.t.Helper()
	if framework.AgainstUpstream() {
		e.startKubeControllerManager("endpointslice", extraArgs...)
		return
	}
	args := append([]string{"--controllers=endpointslice"}, extraArgs...)
	r := e.StartReplica(framework.ReplicaOptions{Args: args})
	if leader := e.WaitForLeader(startTimeout); leader != r {
		e.t.Fatalf("%s leads, want the replica just started, %s", leader.Name, r.Name)
	}
	r.WaitReady(e.t, startTimeout)
	e.replica, e.controllerUser, e.stopController = r, r.Name, r.Kill
}

// upstreamCounter numbers the kube-controller-manager users of the suite.
var upstreamCounter atomic.Int64

// startKubeControllerManager runs the real kube-controller-manager with the given
// controllers (its --controllers syntax) as a user of its own; it becomes the
// controller under test.
func (e *env) startKubeControllerManager(controllers string, extraArgs ...string) {
	e.t.Helper()
	user := fmt.Sprintf("kube-controller-manager-%d", upstreamCounter.Add(1))
	p := framework.StartKubeControllerManager(e.t, e.ControlPlane, user, controllers, extraArgs...)
	e.replica, e.controllerUser, e.stopController = nil, user, p.Kill
}

// dumpOnFailure logs the namespace's slices and pods when the test failed.
func (e *env) dumpOnFailure() {
	if !e.t.Failed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b strings.Builder
	if list, err := e.Client.DiscoveryV1().EndpointSlices(e.Namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for i := range list.Items {
			s := &list.Items[i]
			fmt.Fprintf(&b, "slice %s: rv=%s labels=%v annotations=%v ports=%s\n", s.Name, s.ResourceVersion, s.Labels, s.Annotations, toJSON(s.Ports))
			for _, ep := range s.Endpoints {
				fmt.Fprintf(&b, "  %s\n", toJSON(ep))
			}
		}
	}
	if pods, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range pods.Items {
			fmt.Fprintf(&b, "pod %s: node=%q phase=%s ip=%s deleting=%v conditions=%s\n",
				p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.PodIP, p.DeletionTimestamp != nil, toJSON(p.Status.Conditions))
		}
	}
	e.t.Logf("---- namespace %s ----\n%s", e.Namespace, b.String())
}

// newService returns a ClusterIP Service selecting selector.
func (e *env) newService(name string, selector map[string]string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.Namespace},
		Spec:       corev1.ServiceSpec{Selector: selector, Ports: ports},
	}
}

func servicePort(name string, port int32, target intstr.IntOrString) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port, TargetPort: target, Protocol: corev1.ProtocolTCP}
}

func (e *env) createService(s *corev1.Service) *corev1.Service {
	e.t.Helper()
	created, err := e.Client.CoreV1().Services(e.Namespace).Create(e.ctx, s, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("creating service %s: %v", s.Name, err)
	}
	return created
}

// podOption changes a pod built by newPod.
type podOption func(*corev1.Pod)

// withPorts gives the pod's container these ports.
func withPorts(ports ...corev1.ContainerPort) podOption {
	return func(p *corev1.Pod) { p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, ports...) }
}

// withSidecarPorts adds a restartable init container (a sidecar) with these ports.
func withSidecarPorts(ports ...corev1.ContainerPort) podOption {
	return func(p *corev1.Pod) {
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{
			Name: "sidecar", Image: "registry.k8s.io/pause:3.10",
			RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Ports: ports,
		})
	}
}

// withHostname sets spec.hostname and spec.subdomain.
func withHostname(hostname, subdomain string) podOption {
	return func(p *corev1.Pod) { p.Spec.Hostname, p.Spec.Subdomain = hostname, subdomain }
}

// withFinalizer keeps the pod terminating after it is deleted, until the test ends.
func withFinalizer() podOption {
	return func(p *corev1.Pod) { p.Finalizers = append(p.Finalizers, holdFinalizer) }
}

func tcpPort(name string, number int32) corev1.ContainerPort {
	return corev1.ContainerPort{Name: name, ContainerPort: number, Protocol: corev1.ProtocolTCP}
}

// newPod returns a pod placed on the fake nodes in turn. KWOK runs it: Running, Ready,
// with a pod IP.
func (e *env) newPod(name string, labels map[string]string, opts ...podOption) *corev1.Pod {
	node := e.nodes[e.podsCreated%len(e.nodes)]
	e.podsCreated++
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.Namespace, Labels: labels},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			Containers:                    []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
	for _, opt := range opts {
		opt(p)
	}
	return p
}

// runPods creates pods and waits until KWOK runs them all: Running, Ready, with an IP.
func (e *env) runPods(pods ...*corev1.Pod) {
	e.t.Helper()
	for _, p := range pods {
		if _, err := e.Client.CoreV1().Pods(e.Namespace).Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
			e.t.Fatalf("creating pod %s: %v", p.Name, err)
		}
	}
	framework.EventuallyEvery(e.t, 3*convergeTimeout, 500*time.Millisecond, func() error {
		list, err := e.Client.CoreV1().Pods(e.Namespace).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		running := map[string]bool{}
		for i := range list.Items {
			p := &list.Items[i]
			running[p.Name] = p.Status.Phase == corev1.PodRunning && framework.PodReady(p) && p.Status.PodIP != ""
		}
		for _, p := range pods {
			if !running[p.Name] {
				return fmt.Errorf("pod %s is not running yet", p.Name)
			}
		}
		return nil
	})
}

// setReady writes the pod's Ready and ContainersReady conditions through pods/status,
// as the kubelet does when a readiness probe starts or stops passing.
func (e *env) setReady(name string, ready bool) {
	e.t.Helper()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := e.Client.CoreV1().Pods(e.Namespace).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.NewTime(time.Now().Truncate(time.Second))
		for i := range p.Status.Conditions {
			if c := &p.Status.Conditions[i]; (c.Type == corev1.PodReady || c.Type == corev1.ContainersReady) && c.Status != status {
				c.Status, c.LastTransitionTime = status, now
			}
		}
		_, err = e.Client.CoreV1().Pods(e.Namespace).UpdateStatus(e.ctx, p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.t.Fatalf("setting pod %s ready=%v: %v", name, ready, err)
	}
}

// deletePod deletes a pod the way a user does.
func (e *env) deletePod(name string) {
	e.t.Helper()
	if err := e.Client.CoreV1().Pods(e.Namespace).Delete(e.ctx, name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatalf("deleting pod %s: %v", name, err)
	}
}

// slicesOf returns the Service's slices managed by an EndpointSlice controller.
func (e *env) slicesOf(service string) []discoveryv1.EndpointSlice {
	e.t.Helper()
	selector := discoveryv1.LabelServiceName + "=" + service + "," + discoveryv1.LabelManagedBy + "=" + managedBy
	list, err := e.Client.DiscoveryV1().EndpointSlices(e.Namespace).List(e.ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		e.t.Fatal(err)
	}
	return list.Items
}

// describe renders the endpoints of slices as sorted lines, one per endpoint and port:
// "<pod> ready=<r> serving=<s> terminating=<t> <port name>:<port>/<protocol>", or "-"
// for the port of a slice without ports. Addresses, nodes and zones are checked where a
// test is about them.
func describe(slices []discoveryv1.EndpointSlice) []string {
	var lines []string
	for _, s := range slices {
		for _, ep := range s.Endpoints {
			head := fmt.Sprintf("%s ready=%v serving=%v terminating=%v", ep.TargetRef.Name,
				ptr.Deref(ep.Conditions.Ready, false), ptr.Deref(ep.Conditions.Serving, false), ptr.Deref(ep.Conditions.Terminating, false))
			if len(s.Ports) == 0 {
				lines = append(lines, head+" -")
			}
			for _, p := range s.Ports {
				lines = append(lines, fmt.Sprintf("%s %s:%d/%s", head, ptr.Deref(p.Name, ""), ptr.Deref(p.Port, 0), ptr.Deref(p.Protocol, "")))
			}
		}
	}
	sort.Strings(lines)
	return lines
}

// waitForEndpoints waits until the Service's slices describe exactly want (see
// describe), and returns them.
func (e *env) waitForEndpoints(service string, want ...string) []discoveryv1.EndpointSlice {
	e.t.Helper()
	sort.Strings(want)
	var got []discoveryv1.EndpointSlice
	framework.EventuallyEvery(e.t, convergeTimeout, 500*time.Millisecond, func() error {
		got = e.slicesOf(service)
		if len(got) == 0 {
			return fmt.Errorf("service %s has no slices yet", service)
		}
		if lines := describe(got); !slices.Equal(lines, want) {
			return fmt.Errorf("service %s's slices list\n  %s\nwant\n  %s", service, strings.Join(lines, "\n  "), strings.Join(want, "\n  "))
		}
		return nil
	})
	return got
}

// auditMark returns the current length of the audit log, in events; writes counted from
// it are those made afterwards. The log is only ever appended to.
func (e *env) auditMark() int {
	e.t.Helper()
	events, err := framework.AuditLog(e.ControlPlane)
	if err != nil {
		e.t.Fatal(err)
	}
	return len(events)
}

// sliceWritesSince returns the EndpointSlice writes in the test's namespace that user
// made after mark, as "verb name (HTTP code)", leaving out the slices of the Services
// in except.
func (e *env) sliceWritesSince(mark int, user string, except ...string) []string {
	e.t.Helper()
	events, err := framework.AuditLog(e.ControlPlane)
	if err != nil {
		e.t.Fatal(err)
	}
	var writes []string
	for _, ev := range events[mark:] {
		if !isSliceWrite(ev, user, e.Namespace) {
			continue
		}
		if slices.ContainsFunc(except, func(s string) bool { return strings.HasPrefix(ev.ObjectRef.Name, s+"-") }) {
			continue
		}
		writes = append(writes, fmt.Sprintf("%s %s (HTTP %d)", ev.Verb, ev.ObjectRef.Name, ev.Code()))
	}
	return writes
}

// isSliceWrite reports whether an audit event is a write to an EndpointSlice in
// namespace by user. A create names no object yet; it is reported with an empty name.
func isSliceWrite(ev controlplane.AuditEvent, user, namespace string) bool {
	if ev.By != user || ev.Resource() != "endpointslices" || ev.ObjectRef.Namespace != namespace {
		return false
	}
	switch ev.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// settle waits long enough for a controller to act on an event, where the test must
// show that it did not. It is never an assertion on speed: every negative check is
// followed by, or preceded by, a positive one that proves the controller was running.
func settle() { time.Sleep(3 * time.Second) }

// toJSON renders v for failure messages.
func toJSON(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(data)
}
