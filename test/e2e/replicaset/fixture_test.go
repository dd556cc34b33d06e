package replicaset

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

const (
	// controllerName is the ReplicaSet controller's name: the source component of its
	// events and the suffix of its client's user agent.
	controllerName = "replicaset-controller"

	// holdFinalizer keeps a pod (or ReplicaSet) in place after its deletion until the
	// test removes it, as a real finalizer of some other controller would.
	holdFinalizer = "e2e.mini-kcm.io/hold"

	// timeout bounds every wait for the controller to converge. It is generous: the
	// machine is small and shared, and the tests assert outcomes, not speed.
	timeout = 90 * time.Second
)

// env is one test's world: its namespace, an admin client, and the ReplicaSet
// controller that runs for it (a mini-kcm replica, or upstream's, see framework.AgainstUpstream).
type env struct {
	t *testing.T
	f *framework.Framework
	// client is an admin client of the test harness (its requests are not the
	// controller's in the audit log).
	client kubernetes.Interface
	// ns is the test's namespace; everything the test creates lives there.
	ns string
	// controller is the mini-kcm replica running the ReplicaSet controller; nil
	// until startController, and when the suite runs against upstream.
	controller *framework.Replica
	// controllerUser is the user the controller authenticates as, which tells its
	// requests apart in the audit log.
	controllerUser string
	// stopController stops the controller, whichever runs; nil until startController.
	stopController func()
}

// newEnv sets up a namespace for the test without starting the controller, for tests
// whose objects must exist before the controller first looks at them.
func newEnv(t *testing.T) *env {
	t.Helper()
	f := framework.New(t)
	e := &env{t: t, f: f, client: f.Client, ns: f.Namespace}
	// Registered after framework.New, so it runs before the framework deletes the
	// namespace's objects (cleanups run last-in first-out).
	t.Cleanup(e.cleanup)
	return e
}

// startEnv sets up a namespace and starts the controller.
func startEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	e.startController()
	return e
}

// startController starts one mini-kcm replica running only the ReplicaSet controller
// and waits until it leads (the controllers start right after). Against upstream it
// starts kube-controller-manager instead.
func (e *env) startController() {
	e.t.Helper()
	if framework.AgainstUpstream() {
		e.startUpstreamController()
		return
	}
	e.controller = e.f.StartReplica(framework.ReplicaOptions{Args: []string{"--controllers=replicaset"}})
	e.controllerUser = e.controller.Name
	e.stopController = e.controller.Kill
	e.f.WaitForLeader(60 * time.Second)
}

// cleanup prints what the test left behind if it failed, then stops the controller and
// lets every pod and ReplicaSet of the test go: finalizers are removed and pods are
// deleted at once, since no kubelet would finish the deletion of pods on nodes that
// KWOK does not manage.
func (e *env) cleanup() {
	if e.t.Failed() {
		e.t.Log(e.describeNamespace())
		e.t.Log(e.slowRequests(5 * time.Second))
		e.t.Log(e.f.ControlPlane.LogTails(20))
	}
	if e.stopController != nil {
		// Stopped first, so that it cannot recreate pods (with finalizers) while they
		// are being removed.
		e.stopController()
		e.t.Logf("requests of the ReplicaSet controller: %s", e.requestSummary())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	removeFinalizers := []byte(`{"metadata":{"finalizers":null}}`)
	if pods, err := e.client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, pod := range pods.Items {
			if len(pod.Finalizers) > 0 {
				_, _ = e.client.CoreV1().Pods(e.ns).Patch(ctx, pod.Name, types.MergePatchType, removeFinalizers, metav1.PatchOptions{})
			}
		}
	}
	if rss, err := e.client.AppsV1().ReplicaSets(e.ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, rs := range rss.Items {
			if len(rs.Finalizers) > 0 {
				_, _ = e.client.AppsV1().ReplicaSets(e.ns).Patch(ctx, rs.Name, types.MergePatchType, removeFinalizers, metav1.PatchOptions{})
			}
		}
	}
	_ = e.client.CoreV1().Pods(e.ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}, metav1.ListOptions{})
}

// newReplicaSet returns a ReplicaSet selecting app=<name> whose pods also carry
// tier=web, so that a pod with only the selector's labels is selected but not "fully
// labeled".
func newReplicaSet(name string, replicas int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: new(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: templateLabels(name)},
				Spec: v1.PodSpec{
					Containers: []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
				},
			},
		},
	}
}

// templateLabels are the labels of the pods of newReplicaSet(name).
func templateLabels(name string) map[string]string {
	return map[string]string{"app": name, "tier": "web"}
}

// newPod returns a pod with the given labels, as a user would create it by hand.
func newPod(name string, labels map[string]string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
}

// controllerRefTo is the ownerReference the controller writes into the pods it creates
// or adopts.
func controllerRefTo(rs *appsv1.ReplicaSet) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID,
		Controller: new(true), BlockOwnerDeletion: new(true),
	}
}

func (e *env) ctx() context.Context { return e.f.Context() }

func (e *env) createReplicaSet(rs *appsv1.ReplicaSet) *appsv1.ReplicaSet {
	e.t.Helper()
	created, err := e.client.AppsV1().ReplicaSets(e.ns).Create(e.ctx(), rs, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("creating ReplicaSet %s: %v", rs.Name, err)
	}
	return created
}

func (e *env) getReplicaSet(name string) *appsv1.ReplicaSet {
	e.t.Helper()
	rs, err := e.client.AppsV1().ReplicaSets(e.ns).Get(e.ctx(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("getting ReplicaSet %s: %v", name, err)
	}
	return rs
}

// updateReplicaSet applies mutate to the latest version of the ReplicaSet, retrying on
// conflicts with the controller's status writes.
func (e *env) updateReplicaSet(name string, mutate func(*appsv1.ReplicaSet)) *appsv1.ReplicaSet {
	e.t.Helper()
	var updated *appsv1.ReplicaSet
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rs, err := e.client.AppsV1().ReplicaSets(e.ns).Get(e.ctx(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(rs)
		updated, err = e.client.AppsV1().ReplicaSets(e.ns).Update(e.ctx(), rs, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.t.Fatalf("updating ReplicaSet %s: %v", name, err)
	}
	return updated
}

// scale sets spec.replicas and returns the new generation.
func (e *env) scale(name string, replicas int32) int64 {
	e.t.Helper()
	return e.updateReplicaSet(name, func(rs *appsv1.ReplicaSet) { rs.Spec.Replicas = new(replicas) }).Generation
}

func (e *env) createPod(pod *v1.Pod) *v1.Pod {
	e.t.Helper()
	created, err := e.client.CoreV1().Pods(e.ns).Create(e.ctx(), pod, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("creating pod %s: %v", pod.Name, err)
	}
	return created
}

func (e *env) getPod(name string) *v1.Pod {
	e.t.Helper()
	pod, err := e.client.CoreV1().Pods(e.ns).Get(e.ctx(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("getting pod %s: %v", name, err)
	}
	return pod
}

// updatePod applies mutate to the latest version of the pod.
func (e *env) updatePod(name string, mutate func(*v1.Pod)) *v1.Pod {
	e.t.Helper()
	var updated *v1.Pod
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := e.client.CoreV1().Pods(e.ns).Get(e.ctx(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(pod)
		updated, err = e.client.CoreV1().Pods(e.ns).Update(e.ctx(), pod, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.t.Fatalf("updating pod %s: %v", name, err)
	}
	return updated
}

// updatePodStatus applies mutate to the status of the latest version of the pod, as a
// kubelet would.
func (e *env) updatePodStatus(name string, mutate func(*v1.Pod)) {
	e.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := e.client.CoreV1().Pods(e.ns).Get(e.ctx(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(pod)
		_, err = e.client.CoreV1().Pods(e.ns).UpdateStatus(e.ctx(), pod, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.t.Fatalf("updating the status of pod %s: %v", name, err)
	}
}

func (e *env) deletePod(name string) {
	e.t.Helper()
	if err := e.client.CoreV1().Pods(e.ns).Delete(e.ctx(), name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatalf("deleting pod %s: %v", name, err)
	}
}

// removeFinalizers lets the deletion of a held pod complete.
func (e *env) removeFinalizers(podName string) {
	e.t.Helper()
	_, err := e.client.CoreV1().Pods(e.ns).Patch(e.ctx(), podName, types.MergePatchType,
		[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	if err != nil {
		e.t.Fatalf("removing the finalizers of pod %s: %v", podName, err)
	}
}

// pods returns every pod of the namespace, sorted by name.
func (e *env) pods() []v1.Pod {
	e.t.Helper()
	list, err := e.client.CoreV1().Pods(e.ns).List(e.ctx(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatalf("listing pods: %v", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

// activePodsOf returns the pods controlled by rs that are neither terminating nor
// finished, sorted by name: the pods rs counts in status.replicas.
func (e *env) activePodsOf(rs *appsv1.ReplicaSet) []v1.Pod {
	e.t.Helper()
	var active []v1.Pod
	for _, pod := range e.pods() {
		if metav1.IsControlledBy(&pod, rs) && isActive(&pod) {
			active = append(active, pod)
		}
	}
	return active
}

// isActive is upstream's IsPodActive: not terminating and not finished.
func isActive(pod *v1.Pod) bool {
	return pod.DeletionTimestamp == nil && pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed
}

func isReady(pod *v1.Pod) bool {
	c := readyCondition(pod)
	return c != nil && c.Status == v1.ConditionTrue
}

func readyCondition(pod *v1.Pod) *v1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == v1.PodReady {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func podNames(pods []v1.Pod) []string {
	names := make([]string, 0, len(pods))
	for _, pod := range pods {
		names = append(names, pod.Name)
	}
	sort.Strings(names)
	return names
}

// counts are the status fields the controller computes from the pods it sees.
// Terminating is -1 when status.terminatingReplicas is unset.
type counts struct {
	Replicas, FullyLabeled, Ready, Available, Terminating int32
}

func countsOf(rs *appsv1.ReplicaSet) counts {
	c := counts{
		Replicas:     rs.Status.Replicas,
		FullyLabeled: rs.Status.FullyLabeledReplicas,
		Ready:        rs.Status.ReadyReplicas,
		Available:    rs.Status.AvailableReplicas,
		Terminating:  -1,
	}
	if rs.Status.TerminatingReplicas != nil {
		c.Terminating = *rs.Status.TerminatingReplicas
	}
	return c
}

// settled is the status of a ReplicaSet whose n pods are all ready and available and
// none is terminating.
func settled(n int32) counts { return counts{n, n, n, n, 0} }

// waitForStatus waits until the ReplicaSet's status shows want for its current
// generation, and returns the ReplicaSet.
func (e *env) waitForStatus(name string, want counts) *appsv1.ReplicaSet {
	e.t.Helper()
	return e.waitForStatusWithin(name, want, timeout)
}

// waitForStatusWithin is waitForStatus with a timeout of its own, for cases that take
// long even on an idle machine.
func (e *env) waitForStatusWithin(name string, want counts, timeout time.Duration) *appsv1.ReplicaSet {
	e.t.Helper()
	var rs *appsv1.ReplicaSet
	framework.Eventually(e.t, timeout, func() error {
		var err error
		rs, err = e.client.AppsV1().ReplicaSets(e.ns).Get(e.ctx(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := countsOf(rs); got != want || rs.Status.ObservedGeneration != rs.Generation {
			return fmt.Errorf("ReplicaSet %s: status %+v at observedGeneration %d, want %+v at generation %d",
				name, got, rs.Status.ObservedGeneration, want, rs.Generation)
		}
		return nil
	})
	return rs
}

// waitFor waits until check passes, with the package's timeout.
func (e *env) waitFor(check func() error) {
	e.t.Helper()
	framework.Eventually(e.t, timeout, check)
}

// events returns the events about the named ReplicaSet, oldest first.
func (e *env) events(rsName string) []v1.Event {
	e.t.Helper()
	list, err := e.client.CoreV1().Events(e.ns).List(e.ctx(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=ReplicaSet,involvedObject.name=" + rsName,
	})
	if err != nil {
		e.t.Fatalf("listing events: %v", err)
	}
	sort.SliceStable(list.Items, func(i, j int) bool {
		return list.Items[i].FirstTimestamp.Before(&list.Items[j].FirstTimestamp)
	})
	return list.Items
}

// eventMessages returns the messages of the events of the given type and reason about
// the named ReplicaSet, after checking that the controller reported them.
func (e *env) eventMessages(rsName, eventType, reason string) []string {
	e.t.Helper()
	var messages []string
	for _, ev := range e.events(rsName) {
		if ev.Type != eventType || ev.Reason != reason {
			continue
		}
		if ev.Source.Component != controllerName {
			e.t.Errorf("event %s %q has source %q, want %q", ev.Reason, ev.Message, ev.Source.Component, controllerName)
		}
		messages = append(messages, ev.Message)
	}
	sort.Strings(messages)
	return messages
}

// waitForEvents waits until the named ReplicaSet has exactly the events of the given
// type and reason with the given messages (in any order).
func (e *env) waitForEvents(rsName, eventType, reason string, want []string) {
	e.t.Helper()
	want = append([]string(nil), want...)
	sort.Strings(want)
	e.waitFor(func() error {
		if got := e.eventMessages(rsName, eventType, reason); !equalStrings(got, want) {
			return fmt.Errorf("%s %s events of ReplicaSet %s:\n  got  %q\n  want %q", eventType, reason, rsName, got, want)
		}
		return nil
	})
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// prefixed returns "<prefix><name>" for each name.
func prefixed(prefix string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n
	}
	return out
}

// auditEvent is one request recorded in the apiserver's audit log.
type auditEvent = controlplane.AuditEvent

// controllerRequests returns the requests that this test's controller made in the
// test's namespace since the given time (as recorded by the apiserver) and that keep
// accepts. The controller is recognised by its own user (each test's controller has
// one) and the ReplicaSet controller's user agent.
func (e *env) controllerRequests(since time.Time, keep func(*auditEvent) bool) []auditEvent {
	e.t.Helper()
	return e.controllerProcessRequests(since, func(ev *auditEvent) bool {
		return isReplicaSetControllerAgent(ev.UserAgent) && keep(ev)
	})
}

// controllerProcessRequests is controllerRequests for every client of the controller's
// process, such as the one that writes its events.
func (e *env) controllerProcessRequests(since time.Time, keep func(*auditEvent) bool) []auditEvent {
	e.t.Helper()
	events, err := framework.AuditLog(e.f.ControlPlane)
	if err != nil {
		e.t.Fatal(err)
	}
	var matched []auditEvent
	for i := range events {
		ev := &events[i]
		if ev.By != e.controllerUser || ev.ObjectRef == nil || ev.ObjectRef.Namespace != e.ns ||
			ev.RequestReceivedTimestamp.Before(since) {
			continue
		}
		if keep(ev) {
			matched = append(matched, *ev)
		}
	}
	return matched
}

// requestSummary counts the controller's requests by verb, resource and response
// code, to compare runs against mini-kcm and upstream at a glance.
func (e *env) requestSummary() string {
	counts := map[string]int{}
	for _, ev := range e.controllerRequests(time.Time{}, func(*auditEvent) bool { return true }) {
		counts[fmt.Sprintf("%s %s %d", ev.Verb, ev.Resource(), ev.Code())]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s×%d; ", k, counts[k])
	}
	return strings.TrimSuffix(b.String(), "; ")
}

// isReplicaSetControllerAgent reports whether a user agent is the ReplicaSet
// controller's: "mini-kcm/<version> (replicaset-controller)" for mini-kcm, and
// "kube-controller-manager/<version> (<os/arch>) kubernetes/<commit>/replicaset-controller"
// for upstream.
func isReplicaSetControllerAgent(userAgent string) bool {
	return strings.HasSuffix(userAgent, "("+controllerName+")") || strings.HasSuffix(userAgent, "/"+controllerName)
}

// podWrites accepts the requests that create, change or delete pods (the named one, or
// any if name is empty).
func podWrites(name string) func(*auditEvent) bool {
	return func(ev *auditEvent) bool {
		return ev.ObjectRef.Resource == "pods" && (name == "" || ev.ObjectRef.Name == name) &&
			ev.Verb != "get" && ev.Verb != "list" && ev.Verb != "watch"
	}
}

// verbs returns "verb resource/name" for each request, for failure messages.
func verbs(events []auditEvent) []string {
	out := make([]string, len(events))
	for i, ev := range events {
		out[i] = fmt.Sprintf("%s %s/%s (%d)", ev.Verb, ev.Resource(), ev.ObjectRef.Name, ev.Code())
	}
	return out
}

// slowRequests lists the requests in the test's namespace that took the apiserver
// longer than limit, from anyone: a loaded machine shows up here first.
func (e *env) slowRequests(limit time.Duration) string {
	events, err := framework.AuditLog(e.f.ControlPlane)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "---- requests in %s slower than %v ----\n", e.ns, limit)
	for _, ev := range events {
		if took := ev.StageTimestamp.Sub(ev.RequestReceivedTimestamp); ev.ObjectRef != nil && ev.ObjectRef.Namespace == e.ns &&
			took > limit && ev.Verb != "watch" {
			fmt.Fprintf(&b, "  %s %s %s/%s by %s (%s): %d after %v\n", ev.RequestReceivedTimestamp.Format(time.RFC3339Nano),
				ev.Verb, ev.Resource(), ev.ObjectRef.Name, ev.By, ev.UserAgent, ev.Code(), took.Round(time.Millisecond))
		}
	}
	return b.String()
}

// describeNamespace renders the ReplicaSets, pods and events of the test, for failure
// reports.
func (e *env) describeNamespace() string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	fmt.Fprintf(&b, "---- namespace %s ----\n", e.ns)
	if rss, err := e.client.AppsV1().ReplicaSets(e.ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, rs := range rss.Items {
			status, _ := json.Marshal(rs.Status)
			fmt.Fprintf(&b, "ReplicaSet %s uid=%s generation=%d replicas=%d deleting=%v\n  status %s\n",
				rs.Name, rs.UID, rs.Generation, *rs.Spec.Replicas, rs.DeletionTimestamp != nil, status)
		}
	}
	if pods, err := e.client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{}); err == nil {
		fmt.Fprintf(&b, "%d pods:\n", len(pods.Items))
		for i, pod := range pods.Items {
			if i == 40 {
				fmt.Fprintf(&b, "  ... %d more\n", len(pods.Items)-i)
				break
			}
			owner := "-"
			if ref := metav1.GetControllerOf(&pod); ref != nil {
				owner = ref.Kind + "/" + ref.Name
			}
			fmt.Fprintf(&b, "  %s phase=%s ready=%v deleting=%v node=%q owner=%s labels=%v finalizers=%v\n",
				pod.Name, pod.Status.Phase, isReady(&pod), pod.DeletionTimestamp != nil, pod.Spec.NodeName, owner, pod.Labels, pod.Finalizers)
		}
	}
	if events, err := e.client.CoreV1().Events(e.ns).List(ctx, metav1.ListOptions{}); err == nil {
		fmt.Fprintf(&b, "%d events:\n", len(events.Items))
		for i, ev := range events.Items {
			if i == 40 {
				fmt.Fprintf(&b, "  ... %d more\n", len(events.Items)-i)
				break
			}
			fmt.Fprintf(&b, "  %s %s %s/%s x%d: %s\n", ev.Type, ev.Reason, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Count, ev.Message)
		}
	}
	return b.String()
}
