package ha

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// failoverLoad sizes a failover-under-load run.
type failoverLoad struct {
	// replicaSets and deployments are how many of each the scale-up spreads over.
	replicaSets, deployments int
	// podsEach is the target of every one of them.
	podsEach int32
	timings  electionTimings
	// convergeTimeout bounds the wait for the final state.
	convergeTimeout time.Duration
}

func (l failoverLoad) total() int { return (l.replicaSets + l.deployments) * int(l.podsEach) }

// TestFailoverUnderLoadKeepsExactlyTheDesiredPods: a platform team scales six workloads
// to 600 pods at once; in the middle the leader is SIGKILLed (a node dies), and in the
// middle of what is left the next leader is stopped with SIGTERM (a rolling update of
// mini-kcm itself). The scale-up still ends with exactly the desired pods, no owner ever
// has more active pods than desired, statuses are right and every Service's Endpoints
// list all its pods.
//
// 600 pods at the default 20 QPS of the replicaset controller's client take about 30s
// to create, which leaves room for two failovers within the suite's budget; the long
// suite runs 2000 pods, and upstream's election timings.
func TestFailoverUnderLoadKeepsExactlyTheDesiredPods(t *testing.T) {
	runFailoverUnderLoad(t, failoverLoad{replicaSets: 3, deployments: 3, podsEach: 100,
		timings: defaultTimings, convergeTimeout: 3 * time.Minute})
}

func runFailoverUnderLoad(t *testing.T, load failoverLoad) {
	f := framework.New(t)
	ctx := f.Context()
	ns := f.Namespace
	census := watchPods(t, f.Client, ns)
	total := load.total()
	t.Logf("scaling %d ReplicaSets and %d Deployments to %d pods each, %d in total; election %v",
		load.replicaSets, load.deployments, load.podsEach, total, load.timings)

	// Every workload starts at one pod and has a Service of its own; the scale-up
	// starts once all of that is in place.
	type workload struct{ kind, name string }
	var workloads []workload
	for i := range load.replicaSets {
		rs := newReplicaSet(fmt.Sprintf("rs-%d", i), 1, nil)
		if _, err := f.Client.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		workloads = append(workloads, workload{"ReplicaSet", rs.Name})
	}
	for i := range load.deployments {
		d := newDeployment(fmt.Sprintf("deploy-%d", i), 1, nil)
		if _, err := f.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		workloads = append(workloads, workload{"Deployment", d.Name})
	}
	for _, w := range workloads {
		if _, err := f.Client.CoreV1().Services(ns).Create(ctx, newService(w.name, map[string]string{"app": w.name}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	var members []*member
	for i := range 3 {
		members = append(members, startMember(t, f, fmt.Sprintf("ha-failover-%s-%d", ns[len(ns)-5:], i),
			memberOptions{timings: load.timings}))
	}
	first := leaderOf(t, f, members, time.Minute)
	converged := func() error {
		var checks []func() error
		for _, w := range workloads {
			if w.kind == "ReplicaSet" {
				checks = append(checks, func() error { return replicaSetComplete(ctx, f.Client, ns, w.name) })
			} else {
				checks = append(checks, func() error { return deploymentComplete(ctx, f.Client, ns, w.name) })
			}
			checks = append(checks, func() error {
				return endpointsMatchPods(ctx, f.Client, ns, w.name, map[string]string{"app": w.name})
			})
		}
		return allOf(checks...)
	}
	eventually(t, time.Minute, converged)

	// The scale-up. From here on no workload may ever have more active pods than its
	// target.
	for _, w := range workloads {
		census.limit(w.kind, w.name, int(load.podsEach))
	}
	begin := time.Now()
	for _, w := range workloads {
		if err := scale(ctx, f, w.kind, w.name, load.podsEach); err != nil {
			t.Fatal(err)
		}
	}

	// SIGKILL the leader a third of the way.
	waitForActivePods(t, census, total/3, load.convergeTimeout)
	holder, err := f.Holder()
	if err != nil {
		t.Fatal(err)
	}
	atKill := census.activeCount("")
	killed := time.Now()
	first.Kill()
	_, leaseTakeover := f.WaitForNewHolder(holder, time.Minute)
	second := leaderOf(t, f, members, time.Minute)
	resumed := waitForProgress(t, census, atKill, load.convergeTimeout)
	t.Logf("HA-TAKEOVER failover-under-load sigkill pods=%d timings=%q at=%d/%d lease=%.2fs resumed=%.2fs",
		total, load.timings, atKill, total, leaseTakeover.Seconds(), resumed.Sub(killed).Seconds())

	// SIGTERM the next leader two thirds of the way; it must hand over cleanly.
	waitForActivePods(t, census, 2*total/3, load.convergeTimeout)
	if holder, err = f.Holder(); err != nil {
		t.Fatal(err)
	}
	atTerm := census.activeCount("")
	termed := time.Now()
	second.Term()
	code, err := second.Wait(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	exited := time.Since(termed)
	if code != 0 {
		t.Errorf("%s exited with %d after SIGTERM, want 0", second.user, code)
	}
	_, leaseTakeover = f.WaitForNewHolder(holder, time.Minute)
	third := leaderOf(t, f, members, time.Minute)
	resumed = waitForProgress(t, census, atTerm, load.convergeTimeout)
	t.Logf("HA-TAKEOVER failover-under-load sigterm pods=%d timings=%q at=%d/%d exited=%.2fs lease=%.2fs resumed=%.2fs",
		total, load.timings, atTerm, total, exited.Seconds(), leaseTakeover.Seconds(), resumed.Sub(termed).Seconds())

	if err := pollUntil(load.convergeTimeout, time.Second, converged); err != nil {
		t.Fatalf("workloads did not converge after two failovers: %v; active pods %d of %d", err, census.activeCount(""), total)
	}
	t.Logf("converged %.1fs after the scale-up started; leaders %s, %s, %s; peak active pods per owner: %s",
		time.Since(begin).Seconds(), first.user, second.user, third.user, census.peaks())
	census.checkNoViolations()

	// The audit log says how many pods the replicas created and deleted in the
	// namespace: exactly one create per desired pod and not a single delete, or some
	// replica duplicated work.
	events := readAudit(t, f.ControlPlane)
	users := userSet(members[0].user, members[1].user, members[2].user)
	created := requestFilter{users: users, namespace: ns, resource: "pods", verb: "create", codes: []int32{201}}.count(events)
	deleted := requestFilter{users: users, namespace: ns, resource: "pods", verb: "delete"}.count(events)
	t.Logf("HA-NUMBERS failover-under-load pods=%d created=%d duplicates=%d deleted=%d seen=%d",
		total, created, created-total, deleted, census.podsSeen())
	// The census watched every pod that ever existed: exactly the desired number means
	// no duplicate. The audit count is a cross-check only: a create that a SIGKILLed
	// leader had in flight can complete in etcd without a 201 in the audit log.
	if seen := census.podsSeen(); seen != total || created > total || deleted != 0 {
		t.Errorf("%d pods ever existed, replicas created %d (audited 201) and deleted %d, for %d desired; want %d, at most %d, and 0",
			seen, created, deleted, total, total, total)
	}
	windows := writeWindows(events, []string{members[0].user, members[1].user, members[2].user})
	if o := overlaps(windows); len(o) > 0 {
		t.Errorf("replicas wrote at the same time: %v", o)
	}
}

// rollOut starts a rolling update of the Deployment name: a new template, so that
// every pod is replaced.
func rollOut(ctx context.Context, f *framework.Framework, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := f.Client.AppsV1().Deployments(f.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Spec.Template.Annotations = map[string]string{"example.com/revision": "2"}
		_, err = f.Client.AppsV1().Deployments(f.Namespace).Update(ctx, d, metav1.UpdateOptions{})
		return err
	})
}

// scale sets spec.replicas of a ReplicaSet or Deployment.
func scale(ctx context.Context, f *framework.Framework, kind, name string, replicas int32) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		switch kind {
		case "ReplicaSet":
			s, err := f.Client.AppsV1().ReplicaSets(f.Namespace).GetScale(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			s.Spec.Replicas = replicas
			_, err = f.Client.AppsV1().ReplicaSets(f.Namespace).UpdateScale(ctx, name, s, metav1.UpdateOptions{})
			return err
		case "Deployment":
			s, err := f.Client.AppsV1().Deployments(f.Namespace).GetScale(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			s.Spec.Replicas = replicas
			_, err = f.Client.AppsV1().Deployments(f.Namespace).UpdateScale(ctx, name, s, metav1.UpdateOptions{})
			return err
		}
		return apierrors.NewBadRequest("unknown kind " + kind)
	})
}

// waitForActivePods waits until the census counts at least n active pods.
func waitForActivePods(t *testing.T, census *podCensus, n int, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, func() error {
		if got := census.activeCount(""); got < n {
			return fmt.Errorf("%d active pods, waiting for %d", got, n)
		}
		return nil
	})
}

// waitForProgress waits until there are more than n active pods, i.e. until a new
// leader created a pod, and returns when it saw that.
func waitForProgress(t *testing.T, census *podCensus, n int, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for census.activeCount("") <= n {
		if time.Now().After(deadline) {
			t.Fatalf("no new pod within %v of the failover; %d active", timeout, census.activeCount(""))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Now()
}
