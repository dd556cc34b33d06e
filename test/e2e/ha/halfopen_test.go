package ha

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// halfOpenBound is how long a leader may act on a frozen cache after its watches went
// silent: by then it must have noticed, watched again and caught up.
const halfOpenBound = 45 * time.Second

// TestLeaderWhoseWatchesGoSilentCatchesUpWithinTheBound: a load balancer between the
// leader and the apiserver loses its connection state, or the apiserver behind it
// vanishes, without a FIN or RST. The leader's watch connections stay open and its
// TCP stack sees a live peer (writes acknowledged, keepalives answered), but no event
// arrives any more. Meanwhile a user scales a ReplicaSet and deletes one of its pods.
// The leader must notice the silent watches on its own, watch again over a new
// connection and bring the ReplicaSet and its Service's Endpoints to the new state
// within halfOpenBound of the cut, without losing its Lease (whose connection was not
// cut: it renews every second).
func TestLeaderWhoseWatchesGoSilentCatchesUpWithinTheBound(t *testing.T) {
	f := framework.New(t)
	ctx := f.Context()
	ns := f.Namespace
	// One replica: nothing here is about failover, and a standby taking over would hide
	// a leader that never caught up.
	leader := startMember(t, f, "ha-halfopen-"+ns[len(ns)-5:], memberOptions{timings: defaultTimings, viaProxy: true})
	leaderOf(t, f, []*member{leader}, time.Minute)
	holder, err := f.Holder()
	if err != nil {
		t.Fatal(err)
	}

	selector := map[string]string{"app": "web"}
	if _, err := f.Client.AppsV1().ReplicaSets(ns).Create(ctx, newReplicaSet("web", 3, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Client.CoreV1().Services(ns).Create(ctx, newService("web", selector), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	converged := func() error {
		return allOf(
			func() error { return replicaSetComplete(ctx, f.Client, ns, "web") },
			func() error { return endpointsMatchPods(ctx, f.Client, ns, "web", selector) },
		)
	}
	eventually(t, time.Minute, converged)

	// Cut the connections the leader has only been receiving on for five renew periods:
	// its watches (and idle pooled connections). Its Lease renewals and writes keep
	// theirs busy. Once the cluster has settled, that quiet comes within seconds.
	quiet := 5 * framework.RetryPeriod
	var cut int
	var cutAt time.Time
	eventually(t, time.Minute, func() error {
		if cut = leader.proxy.CutQuiet(quiet); cut == 0 {
			return fmt.Errorf("no connection of the leader quiet for %v yet", quiet)
		}
		cutAt = time.Now()
		return nil
	})

	// Behind the cut: more replicas, and one pod gone.
	if err := scale(ctx, f, "ReplicaSet", "web", 5); err != nil {
		t.Fatal(err)
	}
	pods, err := f.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) == 0 {
		t.Fatal("no pod of web to delete")
	}
	if err := f.Client.CoreV1().Pods(ns).Delete(ctx, pods.Items[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// The bound is the whole story, from the cut to the new state; a leader that never
	// noticed fails here.
	caughtUp := pollUntil(time.Until(cutAt.Add(halfOpenBound)), 500*time.Millisecond, converged)
	took := time.Since(cutAt)
	closedAfter, open := leader.proxy.CutsClosedByClient()
	var detected []string
	for _, d := range closedAfter {
		detected = append(detected, fmt.Sprintf("%.1fs", d.Seconds()))
	}
	outcome := fmt.Sprintf("caught up %.1fs after the cut", took.Seconds())
	if caughtUp != nil {
		outcome = fmt.Sprintf("not caught up %.1fs after the cut", took.Seconds())
	}
	t.Logf("HA-NUMBERS half-open cut=%d connections, closed by the leader after [%s], still open %d; %s (bound %v)",
		cut, strings.Join(detected, " "), open, outcome, halfOpenBound)
	if caughtUp != nil {
		t.Fatalf("the leader had not caught up %v after its watches went silent: %v", halfOpenBound, caughtUp)
	}
	if len(closedAfter) == 0 {
		t.Errorf("the leader caught up without closing any cut connection: the cut missed its watches, so this run proved nothing")
	}
	if leader.Exited() {
		t.Fatalf("the leader exited; only its quiet connections were cut:\n%s", leader.Logs())
	}
	if now, err := f.Holder(); err != nil || now != holder {
		t.Errorf("the Lease is held by %q (%v), want still %q: the cut must not cost the Lease", now, err, holder)
	}
}
