package ha

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// outageKind is one way the control plane every replica shares goes away and comes back.
type outageKind struct {
	name string
	// cause takes the control plane down and brings it back; it returns once the
	// apiserver answers again (as the harness sees it).
	cause func(t *testing.T, cp *controlplane.ControlPlane)
}

// outageKinds are the outages of issue 47, in the order the test causes them.
var outageKinds = []outageKind{
	{"apiserver-frozen-30s", func(t *testing.T, cp *controlplane.ControlPlane) {
		pid := cp.Pid(controlplane.KubeAPIServer)
		if pid == 0 {
			t.Fatal("kube-apiserver is not running")
		}
		// Never leave the suite's apiserver frozen.
		defer func() { _ = syscall.Kill(pid, syscall.SIGCONT) }()
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Second)
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}},
	{"apiserver-stopped-30s", func(t *testing.T, cp *controlplane.ControlPlane) {
		cp.StopAPIServer()
		time.Sleep(30 * time.Second)
		if err := cp.StartAPIServer(context.Background()); err != nil {
			t.Fatalf("starting the apiserver again: %v", err)
		}
	}},
	{"etcd-stopped-20s", func(t *testing.T, cp *controlplane.ControlPlane) {
		cp.StopEtcd()
		time.Sleep(20 * time.Second)
		if err := cp.StartEtcd(context.Background()); err != nil {
			t.Fatalf("starting etcd again: %v", err)
		}
	}},
	// A crash and an immediate restart: no final bookmark reaches the watches, and the
	// new apiserver's watch cache starts at etcd's current revision, so every watch
	// that resumes from an older one is answered 410 Gone and its informer relists.
	{"apiserver-killed-restarted", func(t *testing.T, cp *controlplane.ControlPlane) {
		cp.KillAPIServer()
		if err := cp.StartAPIServer(context.Background()); err != nil {
			t.Fatalf("starting the apiserver again: %v", err)
		}
	}},
}

// TestEveryReplicaActsSoonAfterAnOutageOfTheControlPlane: three replicas at the
// shipped defaults run every controller over a Deployment of 20 pods and a Service.
// The control plane goes away in each of the ways an upgrade or a crash takes it away,
// every replica sharing the outage: kube-apiserver frozen for 30s, stopped for 30s,
// etcd stopped for 20s while the apiserver stays up, and kube-apiserver killed and
// restarted at once. Each time, as soon as the apiserver answers again, the
// Deployment is scaled and given a new template. The leader acts on it: its first
// write comes after the change, and no other replica writes; no leader changes, no
// replica exits, and the Deployment completes with exactly the pods it asks for. No
// informer of any replica waits out client-go's backoff (each watches again within
// maxReconnect of the apiserver's return) or relists more than once.
//
// With MINI_KCM_E2E_UPSTREAM=1 the same story runs against kube-controller-manager at
// its own defaults; exited processes are restarted as a kubelet would, and its figures
// are logged, not judged. make bench-recovery runs both, side by side, from the
// RECOVERY lines.
func TestEveryReplicaActsSoonAfterAnOutageOfTheControlPlane(t *testing.T) {
	timings := implementationTimings()
	f := framework.New(t)
	ctx := f.Context()
	ns := f.Namespace
	cp := f.ControlPlane
	census := watchPods(t, f.Client, ns)
	const name, replicas = "web", 20
	census.limitReplicaSets(name, 2*(replicas+len(outageKinds))+replicas/4)
	if _, err := f.Client.AppsV1().Deployments(ns).Create(ctx, newDeployment(name, replicas, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Client.CoreV1().Services(ns).Create(ctx, newService(name, map[string]string{"app": name}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The shipped identity: right after kube-apiserver restarts it refuses the
	// ServiceAccounts (403) until its RBAC cache is filled, and the replicas must ride
	// that out too (two of three exited on it before app/clients retried it).
	candidates := startCandidates(t, f, "ha-outage", timings, allControllers)
	leader := waitForFreezeLeader(t, f, candidates)
	eventually(t, 2*time.Minute, func() error { return deploymentComplete(ctx, f.Client, ns, name) })
	holderBefore, err := f.Holder()
	if err != nil {
		t.Fatal(err)
	}
	leaseBefore, err := f.Client.CoordinationV1().Leases(f.LeaseNamespace).Get(ctx, f.LeaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	type outage struct {
		kind       string
		down, back time.Time
	}
	var outages []outage
	restarts := 0
	for i, kind := range outageKinds {
		down := time.Now()
		kind.cause(t, cp)
		back := time.Now()
		// The change, as soon as the apiserver takes it: a scale and a new template.
		if err := pollUntil(time.Minute, 50*time.Millisecond, func() error {
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				d, err := f.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				d.Spec.Replicas = ptr.To(int32(replicas + (i+1)%2*4))
				d.Spec.Template.Annotations = map[string]string{"example.com/outage": kind.name}
				_, err = f.Client.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
				return err
			})
		}); err != nil {
			t.Fatalf("changing the Deployment after %s: %v", kind.name, err)
		}
		outages = append(outages, outage{kind: kind.name, down: down, back: back})
		t.Logf("%s: down %s, answering again %s later", kind.name, down.Format("15:04:05.000"), back.Sub(down).Round(time.Millisecond))
		// The controller manager has acted once the Deployment's status observed the
		// change; the pods themselves follow at the scheduler's and KWOK's pace.
		eventually(t, 3*time.Minute, func() error {
			d, err := f.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if d.Status.ObservedGeneration < d.Generation {
				return fmt.Errorf("deployment %s: observed generation %d of %d", name, d.Status.ObservedGeneration, d.Generation)
			}
			return nil
		})
		if framework.AgainstUpstream() {
			for _, c := range candidates {
				if gone, code := c.exited(); gone {
					t.Logf("%s exited with %d after %s; restarting it, as a kubelet would", c.user, code, kind.name)
					c.restart(t, f, timings, allControllers)
					restarts++
				}
			}
		}
	}
	eventually(t, 5*time.Minute, func() error {
		return allOf(
			func() error { return deploymentComplete(ctx, f.Client, ns, name) },
			func() error { return endpointsMatchPods(ctx, f.Client, ns, name, map[string]string{"app": name}) },
		)
	})
	census.checkNoViolations()

	events := readAudit(t, cp)
	users := make([]string, len(candidates))
	for i, c := range candidates {
		users[i] = c.user
	}
	candidateUsers := userSet(users...)
	// The test's changes, in order: the completed updates of the Deployment by anybody
	// but the candidates, after the first outage began.
	var changes []*controlplane.AuditEvent
	for i := range events {
		e := &events[i]
		if e.Stage == "ResponseComplete" && e.Verb == "update" && e.Resource() == "deployments" && e.ObjectRef.Namespace == ns &&
			e.ObjectRef.Name == name && e.Code() == 200 && !candidateUsers[e.By] && e.StageTimestamp.After(outages[0].down) {
			changes = append(changes, e)
		}
	}
	if len(changes) != len(outages) {
		t.Fatalf("found %d changes of the Deployment in the audit log, want one per outage (%d)", len(changes), len(outages))
	}
	for i, o := range outages {
		end := time.Now()
		if i+1 < len(outages) {
			end = outages[i+1].down
		}
		r := judgeRecovery(events, candidateUsers, ns, o.kind, o.down, o.back, changes[i].StageTimestamp, end)
		logRecovery(t, r)
		if framework.AgainstUpstream() {
			continue
		}
		switch {
		case r.FirstWrite == nil:
			t.Errorf("%s: no controller write after the change", o.kind)
		case r.FirstWriter != leader.user:
			t.Errorf("%s: the first write after the change came from %s, not from the leader %s", o.kind, r.FirstWriter, leader.user)
		}
		// No relist storm: one consistent list at most per informer and replica.
		for informer, n := range r.Lists {
			if n > 1 {
				t.Errorf("%s: %s listed %d times; want at most once per outage", o.kind, informer, n)
			}
		}
		// No informer waits out a backoff: every watch that came back did so at once.
		// client-go's reflectors would have waited at least 0.8s more per failure they
		// saw, and after 20 to 30 seconds of failures 12.8s or more.
		for informer, d := range r.Rewatched {
			if d > maxReconnect {
				t.Errorf("%s: %s watched again %.2fs after the apiserver answered; want within %s, no backoff waited out",
					o.kind, informer, d.Seconds(), maxReconnect)
			}
		}
		// Where the apiserver came back as a new process, every informer must have.
		if o.kind == "apiserver-stopped-30s" || o.kind == "apiserver-killed-restarted" {
			for _, c := range candidates {
				for _, resource := range informerResources {
					if _, ok := r.Rewatched[c.user+" "+resource]; !ok {
						t.Errorf("%s: %s's %s informer did not watch again after the restart", o.kind, c.user, resource)
					}
				}
			}
		}
	}

	leaseAfter, err := f.Client.CoordinationV1().Leases(f.LeaseNamespace).Get(ctx, f.LeaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	transitions := ptr.Deref(leaseAfter.Spec.LeaseTransitions, 0) - ptr.Deref(leaseBefore.Spec.LeaseTransitions, 0)
	logRecovery(t, recovery{Implementation: implementation(), Kind: "all", LeaderChanges: ptr.To(int(transitions)), Restarts: ptr.To(restarts)})
	if framework.AgainstUpstream() {
		return
	}
	if transitions != 0 || ptr.Deref(leaseAfter.Spec.HolderIdentity, "") != holderBefore {
		t.Errorf("the Lease changed hands %d times (holder %s before, %s after); want no leader change across outages every replica shared",
			transitions, holderBefore, ptr.Deref(leaseAfter.Spec.HolderIdentity, ""))
	}
	for _, c := range candidates {
		if gone, code := c.exited(); gone {
			t.Errorf("%s exited with %d; want every replica running through the outages", c.user, code)
		}
	}
	// One writer: the leader, from before the first outage to the end.
	for _, w := range writeWindows(events, users) {
		if w.user != leader.user && w.last.After(outages[0].down) {
			t.Errorf("a replica that did not hold the Lease wrote: %s", w)
		}
	}
}

// maxReconnect bounds how long after the apiserver answers again an informer may take
// to watch again: ten times what the gate takes here (0.02 to 0.11s measured), less
// than the shortest backoff client-go's reflector waits after one failure.
const maxReconnect = 750 * time.Millisecond

// informerResources are the resources the four controllers' informers watch, as the
// audit log names them.
var informerResources = []string{"pods", "replicasets", "deployments", "services", "endpoints", "endpointslices", "nodes"}

// recovery is what the audit log shows of one outage, or (Kind "all") of the whole
// run: the figures make bench-recovery collects from the RECOVERY lines.
type recovery struct {
	Implementation string `json:"implementation"`
	Kind           string `json:"kind"`
	// FirstWrite is from the change being stored to the controller manager's first
	// write after it, in seconds; nil if there was none.
	FirstWrite  *float64 `json:"firstWriteSeconds,omitempty"`
	FirstWriter string   `json:"firstWriter,omitempty"`
	// LeaseStored is from the change being stored to the first Lease write the
	// apiserver stored for a candidate since the outage began, in seconds (negative:
	// before the change). No controller manager may write before its Lease is renewed;
	// after an etcd outage the apiserver stores Leases again only once its own etcd
	// client for them reconnected, which may be seconds after etcd returned.
	LeaseStored *float64 `json:"leaseStoredSeconds,omitempty"`
	// Lists counts, per "replica resource", the informers' lists (plain, or a
	// watch-list's streamed list) from the outage's start to the next one's.
	Lists map[string]int `json:"-"`
	// MaxLists is the most lists of one informer of one replica.
	MaxLists *int `json:"maxListsPerInformer,omitempty"`
	// Rewatched is, per "replica resource", how long after the apiserver answered
	// again the informer watched again (or listed, by a watch-list): its first watch
	// since the outage began, negative when it came before the harness saw the
	// apiserver answer.
	Rewatched map[string]time.Duration `json:"-"`
	// MaxRewatch is the longest of them, in seconds; nil if none watched again.
	MaxRewatch *float64 `json:"maxRewatchSeconds,omitempty"`
	// LeaderChanges and Restarts are the run's: Lease transitions, and processes
	// that exited and were started again (kube-controller-manager's).
	LeaderChanges *int `json:"leaderChanges,omitempty"`
	Restarts      *int `json:"restarts,omitempty"`
}

// judgeRecovery reads one outage from the audit log: the outage began at down, the
// apiserver answered again at back, the test's change was stored at changed, and the
// next outage began at end.
func judgeRecovery(events []controlplane.AuditEvent, candidates map[string]bool, ns, kind string, down, back, changed, end time.Time) recovery {
	r := recovery{Implementation: implementation(), Kind: kind, Lists: map[string]int{}, Rewatched: map[string]time.Duration{}}
	var first, lease *controlplane.AuditEvent
	for i := range events {
		e := &events[i]
		if !candidates[e.By] || e.ObjectRef == nil {
			continue
		}
		if e.Stage == "ResponseComplete" && e.ObjectRef.Resource == "leases" && mutatingVerbs[e.Verb] && e.Code() >= 200 &&
			e.Code() < 300 && !e.RequestReceivedTimestamp.Before(down) && (lease == nil || e.StageTimestamp.Before(lease.StageTimestamp)) {
			lease = e
		}
		if isControllerWrite(e) && e.ObjectRef.Namespace == ns && !e.RequestReceivedTimestamp.Before(changed) &&
			(first == nil || e.RequestReceivedTimestamp.Before(first.RequestReceivedTimestamp)) {
			first = e
		}
		// The informers' requests: both managers name their informers' client so.
		if !strings.Contains(e.UserAgent, "shared-informers") || e.RequestReceivedTimestamp.Before(down) ||
			!e.RequestReceivedTimestamp.Before(end) {
			continue
		}
		key := e.By + " " + e.Resource()
		switch {
		case e.Verb == "list" && e.Stage == "ResponseComplete" && e.Code() == 200,
			e.Verb == "watch" && e.Stage == "ResponseStarted" && sendsInitialEvents(e.RequestURI):
			r.Lists[key]++
		}
		// The first watch since the outage began: nothing reaches a stopped or frozen
		// apiserver, so it is the watch again (the harness may see the apiserver ready
		// a little after the informers do, so it can come before back).
		if e.Verb == "watch" && e.Stage == "ResponseStarted" {
			if _, ok := r.Rewatched[key]; !ok {
				r.Rewatched[key] = e.RequestReceivedTimestamp.Sub(back)
			}
		}
	}
	if first != nil {
		r.FirstWrite = ptr.To(first.RequestReceivedTimestamp.Sub(changed).Seconds())
		r.FirstWriter = first.By
	}
	if lease != nil {
		r.LeaseStored = ptr.To(lease.StageTimestamp.Sub(changed).Seconds())
	}
	maxLists := 0
	for _, n := range r.Lists {
		maxLists = max(maxLists, n)
	}
	r.MaxLists = &maxLists
	for _, d := range r.Rewatched {
		if r.MaxRewatch == nil || d.Seconds() > *r.MaxRewatch {
			r.MaxRewatch = ptr.To(d.Seconds())
		}
	}
	return r
}

// logRecovery logs r as a RECOVERY line of JSON, with a readable line beside it.
func logRecovery(t *testing.T, r recovery) {
	t.Helper()
	line, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("RECOVERY %s", line)
	if r.Kind != "all" {
		t.Logf("  %s %s: lists %s, watched again after %s", r.Implementation, r.Kind, describeCounts(r.Lists), describeDurations(r.Rewatched))
	}
}

// sendsInitialEvents reports whether a watch's request URI asks for a watch-list (the
// list streamed as the watch's first events).
func sendsInitialEvents(requestURI string) bool {
	u, err := url.Parse(requestURI)
	return err == nil && u.Query().Get("sendInitialEvents") == "true"
}

func describeCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", strings.ReplaceAll(k, " ", ":"), m[k])
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func describeDurations(m map[string]time.Duration) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%.2fs", strings.ReplaceAll(k, " ", ":"), m[k].Seconds())
	}
	return "[" + strings.Join(parts, " ") + "]"
}
