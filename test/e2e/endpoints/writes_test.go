package endpoints

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Updates that change nothing an Endpoints is built from cost no write: pod annotation
// edits (upstream's podEndpointsChanged drops them, and the addresses' targetRefs carry
// no resourceVersion that would differ), a new pod label that keeps the pod in the same
// Services (the symmetric difference of the old and new matches is empty), and a
// Service edit that leaves its selector and ports alone (the sync finds the subsets,
// labels and capacity annotation equal). The audit log is the witness.
func TestChangesThatDoNotAffectEndpointsCauseNoWrites(t *testing.T) {
	e := start(t)
	web := map[string]string{"app": "web"}
	e.createService(e.newService("web", web, servicePort("http", 80, intstr.FromInt32(8080), corev1.ProtocolTCP)))
	e.runPods(e.newPod("web-0", web), e.newPod("web-1", web), e.newPod("web-2", web))
	e.waitForEndpoints("web", "ready web-0 http:8080/TCP", "ready web-1 http:8080/TCP", "ready web-2 http:8080/TCP")
	settle()
	mark := e.auditMark()

	for round := range 3 {
		for _, name := range []string{"web-0", "web-1", "web-2"} {
			e.patchPod(name, fmt.Sprintf(`{"metadata":{"annotations":{"e2e.mini-kcm.io/round":"%d"}}}`, round))
		}
	}
	e.patchPod("web-0", `{"metadata":{"labels":{"version":"v2"}}}`)
	e.annotateService("web", "edited")
	settle()
	if writes := e.endpointsWritesSince(mark); len(writes) > 0 {
		t.Fatalf("the controller wrote Endpoints after changes that do not affect them: %v", writes)
	}

	// A change that matters is written, once: the controller was watching all along.
	e.setReady("web-2", false)
	e.waitForEndpoints("web", "ready web-0 http:8080/TCP", "ready web-1 http:8080/TCP", "notReady web-2 http:8080/TCP")
	settle()
	writes := e.endpointsWritesSince(mark)
	if len(writes) != 1 || writes[0].verb != "update" || writes[0].name != "web" {
		t.Fatalf("a readiness change caused writes %v, want exactly one update of web", writes)
	}
}

// With --endpoint-updates-batch-period, pod changes wait that long before their
// Service is synced, and every change arriving meanwhile joins the same sync (upstream
// queues them with AddAfter, and the workqueue keeps the earliest time of a key). So a
// stream of pod changes to one Service, such as a rolling restart makes, becomes a few
// Endpoints writes rather than one per change. The changes here come a tenth of a
// second apart, far enough for a controller without batching to write each one.
func TestPodChangesWithinABatchPeriodBecomeFewWrites(t *testing.T) {
	const (
		period = 3 * time.Second
		pods   = 30
	)
	e := start(t, "--endpoint-updates-batch-period="+period.String())
	web := map[string]string{"app": "web"}
	e.createService(e.newService("web", web, servicePort("http", 80, intstr.FromInt32(8080), corev1.ProtocolTCP)))
	var all []*corev1.Pod
	var ready, notReady []string
	for i := range pods {
		p := e.newPod(fmt.Sprintf("web-%02d", i), web)
		all = append(all, p)
		ready = append(ready, "ready "+p.Name+" http:8080/TCP")
		notReady = append(notReady, "notReady "+p.Name+" http:8080/TCP")
	}
	e.runPods(all...)
	e.waitForEndpoints("web", ready...)
	// Let a batch still open from the pods' start close before counting.
	time.Sleep(period)
	settle()
	mark := e.auditMark()

	t.Logf("the %d pods stop being ready one after another", pods)
	for _, p := range all {
		e.setReady(p.Name, false)
		time.Sleep(100 * time.Millisecond)
	}
	e.waitForEndpoints("web", notReady...)
	time.Sleep(period)
	settle()

	// The bound follows from how long the stream lasted, as the apiserver saw it: one
	// sync per batch period at most, plus one for a batch that a late change opened.
	var first, last time.Time
	changes := 0
	for _, ev := range e.auditEventsSince(mark) {
		if ev.Resource() == "pods/status" && ev.Verb == "update" && ev.ObjectRef.Namespace == e.Namespace && ev.Code() == 200 {
			if at := ev.RequestReceivedTimestamp; first.IsZero() || at.Before(first) {
				first = at
			}
			if at := ev.RequestReceivedTimestamp; at.After(last) {
				last = at
			}
			changes++
		}
	}
	burst := last.Sub(first)
	maxWrites := int(burst/period) + 2
	writes := e.endpointsWritesSince(mark)
	t.Logf("%d readiness changes within %v became %d Endpoints writes: %v", changes, burst.Round(time.Millisecond), len(writes), writes)
	if len(writes) == 0 || len(writes) > maxWrites {
		t.Fatalf("%d readiness changes within %v became %d Endpoints writes, want 1 to %d with a batch period of %v",
			changes, burst.Round(time.Millisecond), len(writes), maxWrites, period)
	}
	if maxWrites >= changes {
		t.Fatalf("the %d changes took %v, too long to show batching", changes, burst)
	}
}
