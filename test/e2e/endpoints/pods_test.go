package endpoints

import (
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// holdFinalizer keeps a deleted pod terminating: KWOK removes deleted pods only once
// they have no finalizers.
const holdFinalizer = "e2e.mini-kcm.io/hold"

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
			Name:          "sidecar",
			Image:         "registry.k8s.io/pause:3.10",
			RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
			Ports:         ports,
		})
	}
}

// withHostname sets spec.hostname and spec.subdomain.
func withHostname(hostname, subdomain string) podOption {
	return func(p *corev1.Pod) { p.Spec.Hostname, p.Spec.Subdomain = hostname, subdomain }
}

// withFinalizer keeps the pod terminating after it is deleted, until the test releases
// it.
func withFinalizer() podOption {
	return func(p *corev1.Pod) { p.Finalizers = append(p.Finalizers, holdFinalizer) }
}

// unscheduled leaves the pod without a node, so that it stays Pending with no IP.
func unscheduled() podOption {
	return func(p *corev1.Pod) { p.Spec.NodeName = "" }
}

// port is a container port.
func port(name string, number int32, protocol corev1.Protocol) corev1.ContainerPort {
	return corev1.ContainerPort{Name: name, ContainerPort: number, Protocol: protocol}
}

// newPod returns a pod in the test's namespace placed on the fake nodes in turn. KWOK
// runs it: Running, Ready, with a pod IP.
func (e *env) newPod(name string, labels map[string]string, opts ...podOption) *corev1.Pod {
	node := e.nodes[e.podsCreated%len(e.nodes)]
	e.podsCreated++
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.Namespace, Labels: labels},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
			// The fake kubelet stops nothing; no grace period keeps deletes prompt.
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
	for _, opt := range opts {
		opt(p)
	}
	return p
}

// createPods creates pods, several at a time.
func (e *env) createPods(pods ...*corev1.Pod) {
	e.t.Helper()
	err := forEach(len(pods), func(i int) error {
		_, err := e.Client.CoreV1().Pods(e.Namespace).Create(e.ctx, pods[i], metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating pod %s: %w", pods[i].Name, err)
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

// runPods creates pods and waits until KWOK runs them all, returning them by name.
func (e *env) runPods(pods ...*corev1.Pod) map[string]*corev1.Pod {
	e.t.Helper()
	e.createPods(pods...)
	names := make([]string, len(pods))
	for i, p := range pods {
		names[i] = p.Name
	}
	return e.waitForRunningPods(names...)
}

// waitForRunningPods waits until the named pods are Running and Ready with a pod IP.
func (e *env) waitForRunningPods(names ...string) map[string]*corev1.Pod {
	e.t.Helper()
	running := map[string]*corev1.Pod{}
	framework.EventuallyEvery(e.t, 3*convergeTimeout, 500*time.Millisecond, func() error {
		list, err := e.Client.CoreV1().Pods(e.Namespace).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		byName := map[string]*corev1.Pod{}
		for i := range list.Items {
			byName[list.Items[i].Name] = &list.Items[i]
		}
		var waiting []string
		for _, name := range names {
			p := byName[name]
			if p == nil || p.Status.Phase != corev1.PodRunning || !framework.PodReady(p) || p.Status.PodIP == "" {
				waiting = append(waiting, name)
				continue
			}
			running[name] = p
		}
		if len(waiting) > 0 {
			return fmt.Errorf("%d of %d pods not running yet, e.g. %s", len(waiting), len(names), waiting[0])
		}
		return nil
	})
	return running
}

// setReady writes the pod's Ready condition through pods/status, as the kubelet does
// when a readiness probe starts or stops passing, and returns the updated pod.
func (e *env) setReady(name string, ready bool) *corev1.Pod {
	e.t.Helper()
	return e.updatePodStatus(name, func(s *corev1.PodStatus) { setReadyConditions(s, ready) })
}

// setReadyConditions sets the Ready and ContainersReady conditions, with a transition
// time of now (truncated to the second, as the API stores it) where they change.
func setReadyConditions(s *corev1.PodStatus, ready bool) {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	for i := range s.Conditions {
		if c := &s.Conditions[i]; (c.Type == corev1.PodReady || c.Type == corev1.ContainersReady) && c.Status != status {
			c.Status, c.LastTransitionTime = status, now
		}
	}
}

// finish reports the pod as ended in a terminal phase, the way the kubelet does when
// its containers exit: the phase and Ready=False in one status write.
func (e *env) finish(name string, phase corev1.PodPhase) *corev1.Pod {
	e.t.Helper()
	return e.updatePodStatus(name, func(s *corev1.PodStatus) {
		s.Phase = phase
		setReadyConditions(s, false)
	})
}

func (e *env) updatePodStatus(name string, mutate func(*corev1.PodStatus)) *corev1.Pod {
	e.t.Helper()
	updated, err := e.tryUpdatePodStatus(name, mutate)
	if err != nil {
		e.t.Fatal(err)
	}
	return updated
}

// tryUpdatePodStatus is updatePodStatus for goroutines other than the test's, which
// must not fail the test themselves.
func (e *env) tryUpdatePodStatus(name string, mutate func(*corev1.PodStatus)) (*corev1.Pod, error) {
	var updated *corev1.Pod
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := e.Client.CoreV1().Pods(e.Namespace).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(&p.Status)
		updated, err = e.Client.CoreV1().Pods(e.Namespace).UpdateStatus(e.ctx, p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("updating status of pod %s: %w", name, err)
	}
	return updated, nil
}

// patchPod applies a JSON merge patch to a pod, e.g. to change its labels.
func (e *env) patchPod(name, patch string) *corev1.Pod {
	e.t.Helper()
	p, err := e.Client.CoreV1().Pods(e.Namespace).Patch(e.ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		e.t.Fatalf("patching pod %s with %s: %v", name, patch, err)
	}
	return p
}

// deletePod deletes a pod the way a user does, with its grace period.
func (e *env) deletePod(name string) {
	e.t.Helper()
	if err := e.Client.CoreV1().Pods(e.Namespace).Delete(e.ctx, name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatalf("deleting pod %s: %v", name, err)
	}
}

// releasePod removes the finalizer that holds a terminating pod, so KWOK can finish its
// deletion.
func (e *env) releasePod(name string) {
	e.t.Helper()
	e.patchPod(name, `{"metadata":{"finalizers":null}}`)
}

// forEach calls do for 0..n-1 on a few goroutines and returns the first error. do runs
// concurrently with itself: it may write only what belongs to its i. The
// harness client allows 200 requests a second; more parallelism would only queue.
func forEach(n int, do func(i int) error) error {
	const parallel = 16
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		next = make(chan int)
	)
	for range min(parallel, n) {
		wg.Go(func() {
			for i := range next {
				if err := do(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
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
	if len(errs) > 0 {
		return fmt.Errorf("%d of %d calls failed, first: %w", len(errs), n, errs[0])
	}
	return nil
}
