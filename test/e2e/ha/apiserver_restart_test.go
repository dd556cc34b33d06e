package ha

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// TestRolloutCarriesOnThroughAnAPIServerRestart: in the middle of a rolling update of
// 100 pods the apiserver goes down for a few seconds and comes back. The leader's
// watches resume against the new apiserver, its controllers carry on where they were,
// the rollout completes with exactly the desired pods and /readyz says "apiserver"
// failed during the outage and recovers afterwards.
//
// At the shipped timings the outage (the apiserver's stop and start take longer than
// the 2s renew deadline) pauses the leader; it must not exit, and it resumes once its
// renewal goes through, since the standby could not count the outage either. The long
// suite runs a 5s outage.
func TestRolloutCarriesOnThroughAnAPIServerRestart(t *testing.T) {
	runRolloutThroughAPIServerRestart(t, defaultTimings, time.Second)
}

func runRolloutThroughAPIServerRestart(t *testing.T, timings electionTimings, downFor time.Duration) {
	f := framework.New(t)
	ctx := f.Context()
	ns := f.Namespace
	cp := f.ControlPlane
	census := watchPods(t, f.Client, ns)

	const replicas = 100
	// The rolling update surges by at most 25%: its ReplicaSets never ask for more pods
	// than that together. (The pods themselves may exceed it for a moment while an old
	// ReplicaSet's deletions wait out their retry after the outage; see
	// limitReplicaSets. That no pod is created twice is the audit log's count below.)
	census.limitReplicaSets("web", replicas+replicas/4)
	if _, err := f.Client.AppsV1().Deployments(ns).Create(ctx, newDeployment("web", replicas, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Client.CoreV1().Services(ns).Create(ctx, newService("web", map[string]string{"app": "web"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var members []*member
	for i := range 2 {
		members = append(members, startMember(t, f, fmt.Sprintf("ha-restart-%s-%d", ns[len(ns)-5:], i),
			memberOptions{timings: timings}))
	}
	leader := leaderOf(t, f, members, time.Minute)
	eventually(t, 2*time.Minute, func() error { return deploymentComplete(ctx, f.Client, ns, "web") })

	// The rolling update: a new template, so every pod is replaced.
	if err := rollOut(ctx, f, "web"); err != nil {
		t.Fatal(err)
	}
	readyz := watchReadyz(leader.Replica, 200*time.Millisecond)
	// Restart the apiserver once the rollout replaced about a third of the pods.
	eventually(t, 2*time.Minute, func() error {
		d, err := f.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.UpdatedReplicas < replicas/3 {
			return fmt.Errorf("%d of %d pods updated", d.Status.UpdatedReplicas, replicas)
		}
		return nil
	})
	holderBefore, err := f.Holder()
	if err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	cp.StopAPIServer()
	time.Sleep(downFor)
	if err := cp.StartAPIServer(context.Background()); err != nil {
		t.Fatalf("restarting the apiserver: %v", err)
	}
	up := time.Now()
	t.Logf("HA-NUMBERS apiserver-restart outage=%.2fs timings=%q", up.Sub(down).Seconds(), timings)

	// A leader whose renew deadline passed during the outage pauses; it never exits.
	time.Sleep(timings.retry)
	if leader.Exited() {
		code, _ := leader.Wait(0)
		t.Fatalf("the leader exited with %d during the apiserver outage; want it paused, not gone:\n%s", code, leader.Logs())
	}
	eventually(t, 3*time.Minute, func() error {
		return allOf(
			func() error { return deploymentComplete(ctx, f.Client, ns, "web") },
			func() error { return endpointsMatchPods(ctx, f.Client, ns, "web", map[string]string{"app": "web"}) },
		)
	})
	census.checkNoViolations()
	samples := readyz.stop()

	// /readyz: ready before the outage, failing on the apiserver check during it, ready
	// again after it.
	{
		var sawOutage, readyAfter bool
		for _, s := range samples {
			if s.at.After(down) && s.code == http.StatusInternalServerError && strings.Contains(s.body, "[-]apiserver failed") {
				sawOutage = true
			}
			if sawOutage && s.at.After(up) && s.code == http.StatusOK {
				readyAfter = true
			}
		}
		if !sawOutage || !readyAfter {
			t.Errorf("/readyz of the leader: saw the outage %v, ready again afterwards %v; samples:\n%s", sawOutage, readyAfter, describeSamples(samples))
		}
		t.Logf("/readyz of the leader during the test:\n%s", describeSamples(samples))
	}

	events := readAudit(t, cp)
	users := make([]string, len(members))
	for i, m := range members {
		users[i] = m.user
	}
	all := userSet(users...)
	created := requestFilter{users: all, namespace: ns, resource: "pods", verb: "create", codes: []int32{201}}.count(events)
	deleted := requestFilter{users: all, namespace: ns, resource: "pods", verb: "delete", codes: []int32{200}}.count(events)
	// 100 pods at first, 100 new ones for the new template, 100 old ones deleted.
	holderAfter, err := f.Holder()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("HA-NUMBERS apiserver-restart pods=%d created=%d duplicates=%d deleted=%d leader-changed=%v peak-active=%s",
		replicas, created, created-2*replicas, deleted, holderAfter != holderBefore, census.peaks())
	if holderAfter != holderBefore {
		t.Errorf("the Lease moved from %s to %s across an outage every replica shared; want no leader change", holderBefore, holderAfter)
	}
	if created != 2*replicas || deleted != replicas {
		t.Errorf("replicas created %d pods and deleted %d; want %d and %d", created, deleted, 2*replicas, replicas)
	}
	// The leader's informers watched again after the restart.
	{
		resumed := map[string]bool{}
		for i := range events {
			e := &events[i]
			if e.By == leader.user && e.Verb == "watch" && e.RequestReceivedTimestamp.After(up.Add(-5*time.Second)) &&
				e.RequestReceivedTimestamp.After(down) {
				resumed[e.Resource()] = true
			}
		}
		for _, resource := range []string{"pods", "replicasets", "deployments", "services", "endpoints"} {
			if !resumed[resource] {
				t.Errorf("the leader did not watch %s again after the restart (watched again: %v)", resource, resumed)
			}
		}
	}
}

// readyzSample is one answer of /readyz?verbose.
type readyzSample struct {
	at   time.Time
	code int
	body string
}

// readyzWatcher polls a replica's /readyz?verbose in the background.
type readyzWatcher struct {
	stopCh  chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	samples []readyzSample
}

func watchReadyz(r *framework.Replica, every time.Duration) *readyzWatcher {
	w := &readyzWatcher{stopCh: make(chan struct{})}
	w.wg.Go(func() {
		ticker := time.NewTicker(every)
		defer ticker.Stop()
		for {
			code, body, err := r.Get("/readyz?verbose")
			if err != nil {
				code, body = 0, err.Error()
			}
			w.mu.Lock()
			w.samples = append(w.samples, readyzSample{at: time.Now(), code: code, body: body})
			w.mu.Unlock()
			select {
			case <-w.stopCh:
				return
			case <-ticker.C:
			}
		}
	})
	return w
}

// stop ends the polling and returns the samples.
func (w *readyzWatcher) stop() []readyzSample {
	close(w.stopCh)
	w.wg.Wait()
	return w.samples
}

// describeSamples lists the changes of /readyz: one line each time the answer changed.
func describeSamples(samples []readyzSample) string {
	var b strings.Builder
	last := ""
	for _, s := range samples {
		failing := []string{}
		for _, line := range strings.Split(s.body, "\n") {
			if strings.HasPrefix(line, "[-]") {
				failing = append(failing, line)
			}
		}
		summary := fmt.Sprintf("%d %s", s.code, strings.Join(failing, "; "))
		if s.code == 0 {
			summary = "no answer: " + s.body
		}
		if summary != last {
			fmt.Fprintf(&b, "  %s %s\n", s.at.Format("15:04:05.000"), summary)
			last = summary
		}
	}
	return b.String()
}
