//go:build long

package ha

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// The long suite (make test-long: go test -tags long -run Long) repeats the fast cases
// at full size and with upstream's election timings, where a failover takes a lease
// duration of 15s instead of 4s.

// TestLongFailoverUnderLoad2000Pods is the failover-under-load story at 2000 pods: four
// ReplicaSets and four Deployments of 250 pods each.
func TestLongFailoverUnderLoad2000Pods(t *testing.T) {
	runFailoverUnderLoad(t, failoverLoad{replicaSets: 4, deployments: 4, podsEach: 250,
		timings: defaultTimings, convergeTimeout: 10 * time.Minute})
}

// TestLongFailoverUnderLoadWithUpstreamTimings runs the fast suite's 600 pods with
// kube-controller-manager's default election timings.
func TestLongFailoverUnderLoadWithUpstreamTimings(t *testing.T) {
	runFailoverUnderLoad(t, failoverLoad{replicaSets: 3, deployments: 3, podsEach: 100,
		timings: upstreamTimings, convergeTimeout: 10 * time.Minute})
}

// TestLongRolloutThroughAPIServerRestartWithShortTimings restarts the apiserver for
// 5s under a leader at the shipped timings (renew deadline 2s): the leader pauses and
// resumes without exiting or losing the Lease, and the rollout completes exactly.
func TestLongRolloutThroughAPIServerRestartWithShortTimings(t *testing.T) {
	runRolloutThroughAPIServerRestart(t, defaultTimings, 5*time.Second)
}

// TestLongPartitionWithUpstreamTimings cuts off a leader with kube-controller-manager's
// timings: it pauses at its last renewal + 10s, 5s before its 15s lease expires.
func TestLongPartitionWithUpstreamTimings(t *testing.T) {
	runPartition(t, upstreamTimings)
}

// TestLongHostileObjectsIdleMinute is the hostile objects story with a full idle minute.
func TestLongHostileObjectsIdleMinute(t *testing.T) {
	runHostileObjects(t, time.Minute)
}

// TestLongServiceSelecting5000PodsIsTruncatedLikeUpstream: a Service over 5000 ready
// pods gets an Endpoints object of exactly 1000 ready addresses, marked with upstream's
// over-capacity annotation (EndpointSlices are the API for more), and once that is
// written the leader stops writing it and idles.
func TestLongServiceSelecting5000PodsIsTruncatedLikeUpstream(t *testing.T) {
	f := framework.New(t)
	ctx := f.Context()
	ns := f.Namespace
	const pods = 5000
	census := watchPods(t, f.Client, ns)
	census.limit("ReplicaSet", "many", pods)
	// The harness raises the replica's QPS so that 5000 pods take a minute, not four.
	leader := startMember(t, f, "ha-5000-"+ns[len(ns)-5:], memberOptions{timings: defaultTimings,
		args: []string{"--kube-api-qps=200", "--kube-api-burst=400"}})
	leaderOf(t, f, []*member{leader}, time.Minute)
	if _, err := f.Client.CoreV1().Services(ns).Create(ctx, newService("many", map[string]string{"app": "many"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if _, err := f.Client.AppsV1().ReplicaSets(ns).Create(ctx, newReplicaSet("many", pods, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Minute, func() error { return replicaSetComplete(ctx, f.Client, ns, "many") })
	t.Logf("HA-NUMBERS service-5000 pods ready after %.0fs", time.Since(begin).Seconds())
	eventually(t, 5*time.Minute, func() error {
		ep, err := f.Client.CoreV1().Endpoints(ns).Get(ctx, "many", metav1.GetOptions{})
		if err != nil {
			return err
		}
		ready, notReady := 0, 0
		for _, s := range ep.Subsets {
			ready += len(s.Addresses)
			notReady += len(s.NotReadyAddresses)
		}
		if ready != 1000 || notReady != 0 || ep.Annotations["endpoints.kubernetes.io/over-capacity"] != "truncated" {
			return fmt.Errorf("endpoints: %d ready, %d not ready, annotations %v; want 1000, 0 and over-capacity=truncated",
				ready, notReady, ep.Annotations)
		}
		return nil
	})
	census.checkNoViolations()

	// Settled: no more Endpoints writes, little CPU.
	time.Sleep(5 * time.Second)
	cpuBefore, err := cpuSeconds(leader.Pid())
	if err != nil {
		t.Fatal(err)
	}
	idleFrom := time.Now()
	time.Sleep(30 * time.Second)
	cpuAfter, err := cpuSeconds(leader.Pid())
	if err != nil {
		t.Fatal(err)
	}
	events := readAudit(t, f.ControlPlane)
	writes := 0
	for i := range events {
		e := &events[i]
		if e.By == leader.user && isControllerWrite(e) && e.RequestReceivedTimestamp.After(idleFrom) {
			writes++
		}
	}
	endpointWrites := requestFilter{users: userSet(leader.user), namespace: ns, resource: "endpoints"}.count(events)
	t.Logf("HA-NUMBERS service-5000 endpoints-writes-total=%d idle-writes=%d idle-cpu=%.2fs/30s", endpointWrites, writes, cpuAfter-cpuBefore)
	if writes > 0 {
		t.Errorf("the leader wrote %d times while idle: %s", writes, describeWrites(events, leader.user))
	}
	if cpu := cpuAfter - cpuBefore; cpu > 3 {
		t.Errorf("the idle leader with 5000 pods cached used %.2f CPU seconds in 30s", cpu)
	}
}
