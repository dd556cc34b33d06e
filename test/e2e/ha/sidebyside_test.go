package ha

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// Helpers for the stories that run side by side with kube-controller-manager
// (MINI_KCM_E2E_UPSTREAM=1): the partitioned leader and the SIGKILLed one. The
// brownout's and the freeze's are in freeze_test.go.

// allControllers are every controller mini-kcm has, by names both managers accept.
const allControllers = "replicaset,deployment,endpoint,endpointslice"

// acquiredLease is what client-go's elector, which kube-controller-manager runs, logs
// when it acquires a Lease.
const acquiredLease = "Successfully acquired lease"

// proxiedCandidate is a candidate whose every connection to the apiserver goes through
// a Proxy of its own, so that it alone can be cut off.
type proxiedCandidate struct {
	*freezeCandidate
	proxy *Proxy
}

// startProxiedCandidates is startCandidates with a Proxy in front of each replica.
func startProxiedCandidates(t *testing.T, f *framework.Framework, prefix string, timings electionTimings, controllers string) []*proxiedCandidate {
	t.Helper()
	var out []*proxiedCandidate
	for i := range 3 {
		user := fmt.Sprintf("%s-%s-%d", prefix, f.Namespace[len(f.Namespace)-5:], i)
		if !framework.AgainstUpstream() {
			m := startMember(t, f, user, memberOptions{timings: timings, viaProxy: true, args: []string{"--controllers=" + controllers}})
			out = append(out, &proxiedCandidate{&freezeCandidate{user: user, pid: m.Pid(), member: m}, m.proxy})
			continue
		}
		kubeconfig, err := f.ControlPlane.AddUser(user, "system:masters")
		if err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(f.ControlPlane.APIServerURL())
		if err != nil {
			t.Fatal(err)
		}
		proxy, err := StartProxy(u.Host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(proxy.Close)
		p := framework.StartElectedKubeControllerManager(t, f.ControlPlane, user, kubeconfigWithServer(t, kubeconfig, proxy.URL()),
			controllers, f.LeaseNamespace, f.LeaseName, timings.args()...)
		out = append(out, &proxiedCandidate{&freezeCandidate{user: user, pid: p.Pid(), process: p}, proxy})
	}
	return out
}

// kill SIGKILLs the candidate and waits for its exit.
func (c *freezeCandidate) kill() {
	if c.member != nil {
		c.member.Kill()
		return
	}
	c.process.Kill()
}

// restart starts the killed candidate again as the same user, as a kubelet restarts a
// container whose process died.
func (c *freezeCandidate) restart(t *testing.T, f *framework.Framework, timings electionTimings, controllers string) {
	t.Helper()
	if c.member != nil {
		c.member.restart(t, f)
		c.pid = c.member.Pid()
		return
	}
	if !c.process.Exited() {
		t.Fatalf("restarting %s, which is still running", c.user)
	}
	c.process = startUpstreamCandidate(t, f, c.user, timings, controllers)
	c.pid = c.process.Pid()
}

// acquisitions counts, per candidate, the Lease acquisitions its log records so far
// (kube-controller-manager's; mini-kcm's leader is read from its metrics instead).
func acquisitions(candidates []*freezeCandidate) map[*freezeCandidate]int {
	n := map[*freezeCandidate]int{}
	for _, c := range candidates {
		if c.member == nil {
			n[c] = strings.Count(c.logs(), acquiredLease)
		}
	}
	return n
}

// leaderSince returns the candidate that leads now, once the Lease moved: for mini-kcm
// the one whose metrics say so, for upstream the one whose log records an acquisition
// more than before (from acquisitions, taken before the Lease moved).
func leaderSince(t *testing.T, f *framework.Framework, candidates []*freezeCandidate, before map[*freezeCandidate]int) *freezeCandidate {
	t.Helper()
	if !framework.AgainstUpstream() {
		return waitForFreezeLeader(t, f, candidates)
	}
	var leader *freezeCandidate
	framework.Eventually(t, time.Minute, func() error {
		var leaders []string
		for _, c := range candidates {
			if !c.process.Exited() && strings.Count(c.logs(), acquiredLease) > before[c] {
				leader = c
				leaders = append(leaders, c.user)
			}
		}
		if len(leaders) != 1 {
			return fmt.Errorf("candidates that acquired the Lease since: %v, want exactly one", leaders)
		}
		return nil
	})
	return leader
}

// plainCandidates drops the proxies.
func plainCandidates(cs []*proxiedCandidate) []*freezeCandidate {
	out := make([]*freezeCandidate, len(cs))
	for i, c := range cs {
		out[i] = c.freezeCandidate
	}
	return out
}

// isAcceptedWrite reports whether the apiserver accepted e as a write of the controller
// manager: a controller resource's or a Lease's (events left out).
func isAcceptedWrite(e *controlplane.AuditEvent) bool {
	return e.Stage == "ResponseComplete" && e.ObjectRef != nil && mutatingVerbs[e.Verb] &&
		(controllerResources[e.ObjectRef.Resource] || e.ObjectRef.Resource == "leases") &&
		e.Code() >= 200 && e.Code() < 300
}

// acceptedWrites returns when the apiserver received the last write of user that it
// accepted, and the writes of user it accepted that it received after since, described.
// Judged by arrival: a proxy that holds a response back delays only the audit stage.
func acceptedWrites(events []controlplane.AuditEvent, user string, since time.Time) (last time.Time, after []string) {
	for i := range events {
		e := &events[i]
		if e.By != user || !isAcceptedWrite(e) {
			continue
		}
		if e.RequestReceivedTimestamp.After(last) {
			last = e.RequestReceivedTimestamp
		}
		if e.RequestReceivedTimestamp.After(since) {
			after = append(after, fmt.Sprintf("%s %s %s/%s (%d) at %s", e.Verb, e.Resource(), e.ObjectRef.Namespace,
				e.ObjectRef.Name, e.Code(), e.RequestReceivedTimestamp.Format(time.StampMicro)))
		}
	}
	return last, after
}

// exitedCandidates describes the candidates whose processes ended, but for skip.
func exitedCandidates(candidates []*freezeCandidate, skip *freezeCandidate) []string {
	var out []string
	for _, c := range candidates {
		if c == skip {
			continue
		}
		if gone, code := c.exited(); gone {
			out = append(out, fmt.Sprintf("%s (code %d)", c.user, code))
		}
	}
	return out
}
