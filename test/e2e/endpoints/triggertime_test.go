package endpoints

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The endpoints.kubernetes.io/last-change-trigger-time annotation says when the change
// that an Endpoints write publishes happened, so that kube-proxy and SLO tooling can
// measure how long changes take to reach the data path. Upstream's TriggerTimeTracker
// defines it: the Service's creationTimestamp on the first sync; afterwards the earliest
// Ready lastTransitionTime among the selected pods that moved since the previous sync;
// and no annotation at all when a write has no such trigger (a pod deletion, say).
func TestLastChangeTriggerTimeNamesTheChangeBeingPublished(t *testing.T) {
	e := start(t)
	web := map[string]string{"app": "web"}
	svc := e.createService(e.newService("web", web, servicePort("http", 80, intstr.FromInt32(8080), corev1.ProtocolTCP)))

	t.Log("the first sync publishes the Service's creation")
	ep := e.waitForEndpoints("web")
	e.expectTriggerTime(ep, svc.CreationTimestamp.Time, svc)

	t.Log("a pod becomes ready")
	pods := e.runPods(e.newPod("web-0", web))
	readyAt := readyTransition(t, pods["web-0"])
	ep = e.waitForEndpoints("web", "ready web-0 http:8080/TCP")
	e.expectTriggerTime(ep, readyAt, svc)

	t.Log("the pod stops being ready, in a later second")
	// Transition times have a resolution of one second, and the tracker publishes only
	// times that moved forward.
	for !time.Now().Truncate(time.Second).After(readyAt) {
		time.Sleep(100 * time.Millisecond)
	}
	notReadyAt := readyTransition(t, e.setReady("web-0", false))
	ep = e.waitForEndpoints("web", "notReady web-0 http:8080/TCP")
	e.expectTriggerTime(ep, notReadyAt, svc)

	t.Log("the pod is deleted: a write with nothing to time")
	e.deletePod("web-0")
	ep = e.waitForEndpoints("web")
	if v, ok := ep.Annotations[corev1.EndpointsLastChangeTriggerTime]; ok {
		t.Fatalf("Endpoints written after a pod deletion have %s=%s; upstream removes the annotation when no trigger time moved",
			corev1.EndpointsLastChangeTriggerTime, v)
	}
}

// readyTransition returns when the pod's Ready condition last changed.
func readyTransition(t *testing.T, pod *corev1.Pod) time.Time {
	t.Helper()
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	t.Fatalf("pod %s has no Ready transition time: %s", pod.Name, toJSON(pod.Status.Conditions))
	return time.Time{}
}

// expectTriggerTime checks that ep's trigger-time annotation is want, written as
// upstream writes it (RFC 3339 with nanoseconds, in UTC), and sane: neither before the
// Service existed nor in the future.
func (e *env) expectTriggerTime(ep *corev1.Endpoints, want time.Time, svc *corev1.Service) {
	e.t.Helper()
	value, ok := ep.Annotations[corev1.EndpointsLastChangeTriggerTime]
	if !ok {
		e.t.Fatalf("endpoints %s have no %s annotation: %v", ep.Name, corev1.EndpointsLastChangeTriggerTime, ep.Annotations)
	}
	if wantValue := want.UTC().Format(time.RFC3339Nano); value != wantValue {
		e.t.Fatalf("endpoints %s have %s=%s, want %s", ep.Name, corev1.EndpointsLastChangeTriggerTime, value, wantValue)
	}
	if err := saneTime(value, svc.CreationTimestamp); err != nil {
		e.t.Fatalf("endpoints %s: %s=%s: %v", ep.Name, corev1.EndpointsLastChangeTriggerTime, value, err)
	}
}

func saneTime(value string, created metav1.Time) error {
	parsed, err := time.Parse(time.RFC3339Nano, value)
	switch {
	case err != nil:
		return err
	case !strings.HasSuffix(value, "Z"):
		return fmt.Errorf("not in UTC")
	case parsed.Before(created.Time):
		return fmt.Errorf("before the Service was created (%s)", created.UTC().Format(time.RFC3339))
	case parsed.After(time.Now().Add(time.Minute)):
		return fmt.Errorf("in the future")
	}
	return nil
}
