package endpoints

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// An Endpoints object holds at most 1000 addresses; a Service with more pods gets 1000
// of them and the endpoints.kubernetes.io/over-capacity=truncated annotation (consumers
// that need them all read EndpointSlices). Upstream's truncateEndpoints keeps ready
// addresses first: with more than 1000 ready pods every not-ready one is dropped. Within
// a subset it keeps the first addresses of the repacked order, which sorts by the bytes
// of the IP string (LessEndpointAddress), so the kept pods are known exactly. Once the
// Service is back under the limit, every pod is listed and the annotation goes.
func TestOverCapacityEndpointsAreTruncatedTo1000Addresses(t *testing.T) {
	const (
		total    = 1500
		kept     = 900 // the pods left after scaling down
		notReady = 20  // among the kept pods
	)
	e := start(t)
	big := map[string]string{"app": "big"}
	e.createService(e.newService("big", big, servicePort("http", 80, intstr.FromInt32(8080), corev1.ProtocolTCP)))
	pods := make([]*corev1.Pod, total)
	for i := range pods {
		group := "kept"
		if i >= kept {
			group = "extra"
		}
		pods[i] = e.newPod(fmt.Sprintf("big-%04d", i), map[string]string{"app": "big", "group": group})
	}
	t.Cleanup(func() {
		if !t.Failed() {
			e.deleteAllQuickly("big", pods)
		}
	})
	begin := time.Now()
	running := e.runPods(pods...)
	t.Logf("%d pods running after %v", total, time.Since(begin).Round(time.Second))
	// Each call writes only its own slot; the map is updated after all have returned.
	updated := make([]*corev1.Pod, notReady)
	err := forEach(notReady, func(i int) error {
		p, err := e.tryUpdatePodStatus(pods[i].Name, func(s *corev1.PodStatus) { setReadyConditions(s, false) })
		updated[i] = p
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range updated {
		running[p.Name] = p
	}

	// The 1000 ready pods with the lowest IPs, compared as strings.
	var ready []*corev1.Pod
	for _, p := range running {
		if framework.PodReady(p) {
			ready = append(ready, p)
		}
	}
	slices.SortFunc(ready, func(a, b *corev1.Pod) int { return compareStrings(a.Status.PodIP, b.Status.PodIP) })
	wantListed := map[string]bool{}
	for _, p := range ready[:1000] {
		wantListed[p.Name] = true
	}
	begin = time.Now()
	ep := e.waitForAddresses("big", wantListed, nil)
	t.Logf("truncated endpoints after %v", time.Since(begin).Round(time.Second))
	if v := ep.Annotations[corev1.EndpointsOverCapacity]; v != "truncated" {
		t.Fatalf("endpoints with %d pods behind them have %s=%q, want truncated", total, corev1.EndpointsOverCapacity, v)
	}

	t.Logf("scaling down to %d pods, %d of them not ready", kept, notReady)
	if err := e.deletePodsNow(e.ctx, pods[kept:]); err != nil {
		t.Fatal(err)
	}
	wantReady, wantNotReady := map[string]bool{}, map[string]bool{}
	for i := range kept {
		if i < notReady {
			wantNotReady[pods[i].Name] = true
		} else {
			wantReady[pods[i].Name] = true
		}
	}
	begin = time.Now()
	ep = e.waitForAddresses("big", wantReady, wantNotReady)
	t.Logf("complete endpoints after %v", time.Since(begin).Round(time.Second))
	if v, ok := ep.Annotations[corev1.EndpointsOverCapacity]; ok {
		t.Fatalf("endpoints back under capacity still have %s=%q", corev1.EndpointsOverCapacity, v)
	}
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// waitForAddresses waits until the Service's Endpoints list exactly the pods in ready
// under addresses and those in notReady under notReadyAddresses, each once, and checks
// labels and address fields; describe's line-per-address form is unreadable at this
// size.
func (e *env) waitForAddresses(service string, ready, notReady map[string]bool) *corev1.Endpoints {
	e.t.Helper()
	var ep *corev1.Endpoints
	framework.EventuallyEvery(e.t, 3*convergeTimeout, time.Second, func() error {
		var err error
		ep, err = e.Client.CoreV1().Endpoints(e.Namespace).Get(e.ctx, service, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var gotReady, gotNotReady []string
		for _, subset := range ep.Subsets {
			for _, a := range subset.Addresses {
				gotReady = append(gotReady, podName(a))
			}
			for _, a := range subset.NotReadyAddresses {
				gotNotReady = append(gotNotReady, podName(a))
			}
		}
		if err := errors.Join(
			sameNames("addresses", gotReady, ready),
			sameNames("notReadyAddresses", gotNotReady, notReady),
		); err != nil {
			return fmt.Errorf("endpoints %s (%d subsets, annotations %v): %w", service, len(ep.Subsets), ep.Annotations, err)
		}
		return e.checkEndpoints(ep)
	})
	return ep
}

// sameNames reports how got, a list of pod names, differs from the set want.
func sameNames(field string, got []string, want map[string]bool) error {
	seen := map[string]bool{}
	var extra, duplicate []string
	for _, name := range got {
		if seen[name] {
			duplicate = append(duplicate, name)
		}
		seen[name] = true
		if !want[name] {
			extra = append(extra, name)
		}
	}
	var missing []string
	for name := range want {
		if !seen[name] {
			missing = append(missing, name)
		}
	}
	if len(extra)+len(duplicate)+len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	return fmt.Errorf("%s has %d pods, want %d: %d unexpected (%v), %d missing (%v), %d listed twice (%v)",
		field, len(got), len(want), len(extra), first(extra), len(missing), first(missing), len(duplicate), first(duplicate))
}

// first returns up to five names, for readable failures.
func first(names []string) []string { return names[:min(5, len(names))] }

// deleteAllQuickly deletes the Service and then every pod, so that the framework's
// cleanup, which deletes pods one by one with their grace period, has nothing left to do.
func (e *env) deleteAllQuickly(service string, pods []*corev1.Pod) {
	ctx, cancel := cleanupContext()
	defer cancel()
	if err := e.Client.CoreV1().Services(e.Namespace).Delete(ctx, service, metav1.DeleteOptions{}); err != nil {
		e.t.Logf("deleting service %s: %v", service, err)
	}
	if err := e.deletePodsNow(ctx, pods); err != nil {
		e.t.Logf("deleting pods: %v", err)
	}
}

// deletePodsNow deletes pods without grace period, several at a time: the apiserver's
// DeleteCollection deletes one pod after the other, which takes long for hundreds.
func (e *env) deletePodsNow(ctx context.Context, pods []*corev1.Pod) error {
	return forEach(len(pods), func(i int) error {
		err := e.Client.CoreV1().Pods(e.Namespace).Delete(ctx, pods[i].Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting pod %s: %w", pods[i].Name, err)
		}
		return nil
	})
}
