package ha

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// TestWarmStandbyCachesEverythingBeforeItLeadsAndWritesNothingUntilThen: three
// replicas run with the default warm standbys. While a ReplicaSet of 30 pods is
// created, each standby lists and watches the pods itself, reports on /readyz that its
// informers synced and holds the pods in its cache (the informer metrics), but runs no
// sync and sends no write. When the leader is SIGKILLed just after a scale-up to 60,
// the standby that takes over listed its pods before it led, so its workers start on
// its cache at once, and it finishes the scale-up.
func TestWarmStandbyCachesEverythingBeforeItLeadsAndWritesNothingUntilThen(t *testing.T) {
	f := framework.New(t)
	ctx := f.Context()
	ns := f.Namespace
	var members []*member
	for i := range 3 {
		members = append(members, startMember(t, f, fmt.Sprintf("ha-warm-%s-%d", ns[len(ns)-5:], i),
			memberOptions{timings: defaultTimings}))
	}
	first := leaderOf(t, f, members, time.Minute)
	var standbys []*member
	for _, m := range members {
		if m != first {
			standbys = append(standbys, m)
		}
	}

	rs := newReplicaSet("warm", 30, nil)
	if _, err := f.Client.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, func() error { return replicaSetComplete(ctx, f.Client, ns, rs.Name) })

	// Every standby is ready because its informers synced, and its pod cache follows
	// the cluster: the pod informer's resource version reached the newest pod's.
	pods, err := f.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var newestPod float64
	for _, p := range pods.Items {
		var rv float64
		if _, err := fmt.Sscan(p.ResourceVersion, &rv); err != nil {
			t.Fatalf("pod %s has resource version %q: %v", p.Name, p.ResourceVersion, err)
		}
		newestPod = max(newestPod, rv)
	}
	for _, s := range standbys {
		eventually(t, 30*time.Second, func() error { return warmStandbyReady(s, newestPod) })
	}
	if again := leaderOf(t, f, members, 10*time.Second); again != first {
		t.Fatalf("leadership moved from %s to %s without a failure", first.user, again.user)
	}

	// The standbys wrote nothing but their Lease attempts; they read the pods themselves
	// (a list, or a watch that streams the initial list).
	events := readAudit(t, f.ControlPlane)
	for _, s := range standbys {
		if writes := standbyWrites(events, s.user); len(writes) > 0 {
			t.Errorf("standby %s wrote while standing by: %s", s.user, strings.Join(writes, "; "))
		}
		if firstRead, _ := firstRequests(events, s.user); firstRead.IsZero() {
			t.Errorf("standby %s never listed or watched pods: its informers do not run", s.user)
		}
	}

	// Scale up and kill the leader at once: the next leader starts on its warm cache.
	if err := scale(ctx, f, "ReplicaSet", rs.Name, 60); err != nil {
		t.Fatal(err)
	}
	holder, err := f.Holder()
	if err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	first.Kill()
	f.WaitForNewHolder(holder, time.Minute)
	second := leaderOf(t, f, members, time.Minute)
	eventually(t, 2*time.Minute, func() error { return replicaSetComplete(ctx, f.Client, ns, rs.Name) })

	events = readAudit(t, f.ControlPlane)
	lease, err := f.Client.CoordinationV1().Leases(f.LeaseNamespace).Get(ctx, f.LeaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Spec.AcquireTime == nil {
		t.Fatalf("lease %s/%s has no acquire time", f.LeaseNamespace, f.LeaseName)
	}
	acquired := lease.Spec.AcquireTime.Time
	firstRead, firstWrite := firstRequests(events, second.user)
	if firstRead.IsZero() || !firstRead.Before(acquired) {
		t.Errorf("the new leader %s first read pods at %s, want before it acquired the lease at %s",
			second.user, firstRead.Format(time.StampMicro), acquired.Format(time.StampMicro))
	}
	if firstWrite.IsZero() {
		t.Fatalf("the new leader %s never wrote, yet the scale-up completed", second.user)
	}
	if firstWrite.Before(acquired) {
		t.Errorf("the new leader %s wrote at %s, before it acquired the lease at %s",
			second.user, firstWrite.Format(time.StampMicro), acquired.Format(time.StampMicro))
	}
	t.Logf("HA-TAKEOVER warm-standby sigkill timings=%q acquired=%.2fs first-write=%.2fs acquire-to-first-write=%.0fms",
		defaultTimings, acquired.Sub(killed).Seconds(), firstWrite.Sub(killed).Seconds(),
		float64(firstWrite.Sub(acquired).Microseconds())/1000)
}

// warmStandbyReady checks that s stands by with synced informers: /readyz passes, the
// replica does not lead, ran no sync, and its pod informer has seen at least
// resourceVersion.
func warmStandbyReady(s *member, resourceVersion float64) error {
	code, body, err := s.Get("/readyz?verbose")
	if err != nil {
		return err
	}
	if code != 200 {
		return fmt.Errorf("standby %s is not ready: %s", s.user, body)
	}
	m, err := s.Metrics()
	if err != nil {
		return err
	}
	if v, ok := m.Value("leader_election_master_status", nil); !ok || v != 0 {
		return fmt.Errorf("%s reports leader_election_master_status %v (present %v), want 0", s.user, v, ok)
	}
	for _, sample := range m["mini_kcm_controller_sync_total"] {
		if sample.Value > 0 {
			return fmt.Errorf("standby %s ran syncs: %v", s.user, sample)
		}
	}
	cached, ok := m.Value("informer_store_resource_version", map[string]string{"name": "mini-kcm", "resource": "pods"})
	if !ok {
		return fmt.Errorf("standby %s has no pod informer (no informer_store_resource_version for pods)", s.user)
	}
	if cached < resourceVersion {
		return fmt.Errorf("standby %s's pod cache is at resource version %.0f, behind the newest pod's %.0f",
			s.user, cached, resourceVersion)
	}
	return nil
}

// standbyWrites lists the mutating requests of user other than to Leases, reviews and
// TokenRequests, which is every write a standby must not send. Reviews are creates that
// store nothing: each replica checks at start, with SelfSubjectReviews, that its
// controllers may impersonate themselves (--leader-elect-apiserver-fence). A
// TokenRequest stores nothing either: a warm standby's controllers' clients hold the
// tokens of their ServiceAccounts before it leads (--use-service-account-credentials).
func standbyWrites(events []controlplane.AuditEvent, user string) []string {
	var writes []string
	for i := range events {
		e := &events[i]
		if e.By != user || e.Stage != "ResponseComplete" || !mutatingVerbs[e.Verb] {
			continue
		}
		if e.ObjectRef != nil && (e.ObjectRef.Resource == "leases" || e.Resource() == "serviceaccounts/token" ||
			e.ObjectRef.APIGroup == "authentication.k8s.io" || e.ObjectRef.APIGroup == "authorization.k8s.io") {
			continue
		}
		writes = append(writes, e.Verb+" "+e.RequestURI)
	}
	return writes
}

// firstRequests returns when the apiserver received user's first read of pods (a list,
// or a watch, which streams the initial list with client-go's WatchListClient) and its
// first controller write.
func firstRequests(events []controlplane.AuditEvent, user string) (firstRead, firstWrite time.Time) {
	for i := range events {
		e := &events[i]
		// A watch is audited when its response starts, and completes only when it ends.
		if e.By != user || e.ObjectRef == nil {
			continue
		}
		at := e.RequestReceivedTimestamp
		isRead := e.Verb == "list" || e.Verb == "watch"
		if isRead && e.Resource() == "pods" && (firstRead.IsZero() || at.Before(firstRead)) {
			firstRead = at
		}
		if isControllerWrite(e) && (firstWrite.IsZero() || at.Before(firstWrite)) {
			firstWrite = at
		}
	}
	return firstRead, firstWrite
}
