package ha

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/leaderelection"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// TestLeaderWritesCarryItsLeaseAndTheAPIServerRefusesAStaleOrMissingHolder: a replica
// runs with both layers of the write fence, as deploy/ runs it, against deploy/fence's
// policy (the framework binds it to the test's Lease). Its controller writes carry its
// leader-election identity, by impersonating its own user (in system:masters here,
// which the policy fences all the same: it matches users, not permissions), and are
// admitted while it holds the Lease. The same user's writes are refused by the
// apiserver when they name a holder that is not the Lease's, and when they name none:
// a replica running without --leader-elect-apiserver-fence cannot write either.
func TestLeaderWritesCarryItsLeaseAndTheAPIServerRefusesAStaleOrMissingHolder(t *testing.T) {
	f := framework.New(t)
	ctx := f.Context()
	ns := f.Namespace
	user := "ha-fenced-" + ns[len(ns)-5:]
	if _, err := f.Client.AppsV1().ReplicaSets(ns).Create(ctx, newReplicaSet("web", 3, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A certificate user in system:masters, not the shipped identity: (b) and (c) write
	// pods with the replica's own credentials, which the shipped process's may not (its
	// controllers' ServiceAccounts write), and the policy must fence even a user whose
	// RBAC allows everything.
	m := startMember(t, f, user, memberOptions{timings: defaultTimings, groups: []string{"system:masters"}, args: []string{"--controllers=replicaset"}})
	leaderOf(t, f, []*member{m}, time.Minute)
	if !strings.Contains(m.Logs(), "in-process and apiserver (ValidatingAdmissionPolicy "+leaderelection.FencePolicyName+")") {
		t.Errorf("the replica does not log its fence mode as both layers")
	}
	eventually(t, time.Minute, func() error { return replicaSetComplete(ctx, f.Client, ns, "web") })
	holder, err := f.Holder()
	if err != nil {
		t.Fatal(err)
	}

	// (a) The pods were created as the replica's user, impersonating itself with the
	// holder; the apiserver admitted them under the policy.
	var created, carrying int
	for _, e := range readAudit(t, f.ControlPlane) {
		if e.By != user || !isControllerWrite(&e) || e.ObjectRef.Resource != "pods" || e.Verb != "create" || e.Code() != 201 {
			continue
		}
		created++
		if imp := e.ImpersonatedUser; imp != nil && imp.Username == user && slices.Equal(imp.Extra[leaderelection.LeaseHolderExtra], []string{holder}) &&
			slices.Contains(imp.Groups, "system:masters") {
			carrying++
		}
	}
	if created < 3 || carrying != created {
		t.Errorf("%d pods created by %s, %d of them as itself with groups and %s=%q; want at least 3, all carrying it",
			created, user, carrying, leaderelection.LeaseHolderExtra, holder)
	}

	// (b) and (c): the replica's own credentials, with a stale holder and with none.
	kubeconfig := m.opts.Kubeconfig
	stale := clientFor(t, kubeconfig, &rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters", framework.ReplicaGroup},
		Extra: map[string][]string{leaderelection.LeaseHolderExtra: {"mini-kcm-0_stale"}}})
	none := clientFor(t, kubeconfig, nil)
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
	}
	_, err = stale.CoreV1().Pods(ns).Create(ctx, pod("stale"), metav1.CreateOptions{})
	if !fencedByPolicy(err) || !strings.Contains(err.Error(), "writes as holder mini-kcm-0_stale") || !strings.Contains(err.Error(), "which is held by "+holder) {
		t.Errorf("a pod created with a stale holder: %v, want refused by the policy naming both holders", err)
	}
	_, err = none.CoreV1().Pods(ns).Create(ctx, pod("none"), metav1.CreateOptions{})
	if !fencedByPolicy(err) || !strings.Contains(err.Error(), "sends no "+leaderelection.LeaseHolderExtra+" extra") {
		t.Errorf("a pod created without the extra: %v, want refused by the policy, saying the extra is missing", err)
	}
	if err := f.Client.AppsV1().ReplicaSets(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Errorf("the admin, not a mini-kcm identity, could not delete: %v", err)
	}
}

// TestAPIServerFenceWindowAfterATakeover measures the window the apiserver's half of the
// fence leaves: the policy reads the Lease from the apiserver's watch cache, which
// lags the Lease write. Two users, a and b, outside system:masters and granted only
// what deploy/fence grants a controller (impersonating itself with the holder extra)
// plus creating EndpointSlices, write as holders "holder-a" and "holder-b" under
// deploy/fence's policy. The Lease changes hands a number of times; each time the old
// holder writes in a loop from before the takeover until it is refused, and the audit
// log tells how long after the apiserver answered the Lease update it still admitted
// the old holder's writes. Nothing here is asserted as a timing.
func TestAPIServerFenceWindowAfterATakeover(t *testing.T) {
	const takeovers = 7
	f := framework.New(t)
	ctx := f.Context()
	ns := f.Namespace
	admin := f.Client
	leaseName := f.LeaseName + "-window"
	lease, err := admin.CoordinationV1().Leases(f.LeaseNamespace).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.LeaseNamespace, Name: leaseName},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("holder-a")},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.CoordinationV1().Leases(f.LeaseNamespace).Delete(context.Background(), leaseName, metav1.DeleteOptions{})
	})
	f.BindFence(f.LeaseNamespace, leaseName)

	users := map[string]string{"holder-a": "ha-fence-" + ns[len(ns)-5:] + "-a", "holder-b": "ha-fence-" + ns[len(ns)-5:] + "-b"}
	writers := map[string]kubernetes.Interface{}
	for holder, user := range users {
		writers[holder] = selfImpersonatingClient(t, f, user, holder)
	}
	var n atomic.Int64
	write := func(c kubernetes.Interface) error {
		slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w-%d", n.Add(1))},
			AddressType: discoveryv1.AddressTypeIPv4}
		_, err := c.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{})
		return err
	}
	// RBAC and the binding take effect through the apiserver's informers.
	framework.Eventually(t, time.Minute, func() error {
		if err := write(writers["holder-b"]); !fencedByPolicy(err) {
			return fmt.Errorf("a write of b, which does not hold the Lease: %v, want refused by the policy", err)
		}
		return write(writers["holder-a"])
	})

	current := "holder-a"
	var old []string
	for range takeovers {
		next := map[string]string{"holder-a": "holder-b", "holder-b": "holder-a"}[current]
		// The old holder writes from before the takeover until it is refused.
		refused := make(chan error, 1)
		go func() {
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
				if err := write(writers[current]); err != nil {
					refused <- err
					return
				}
			}
			refused <- fmt.Errorf("still admitted 30s after the takeover")
		}()
		time.Sleep(50 * time.Millisecond)
		lease.Spec.HolderIdentity = ptr.To(next)
		if lease, err = admin.CoordinationV1().Leases(f.LeaseNamespace).Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := <-refused; !fencedByPolicy(err) {
			t.Fatalf("the writes of %s after %s took the Lease: %v, want refused by the policy", current, next, err)
		}
		// The new holder is admitted once the apiserver saw the takeover.
		framework.Eventually(t, 30*time.Second, func() error { return write(writers[next]) })
		old = append(old, users[current])
		current = next
	}

	// From the audit log: each takeover's Lease update, and the old holder's writes
	// the apiserver received after it had answered that update.
	events := readAudit(t, f.ControlPlane)
	var updates []time.Time
	for _, e := range events {
		if e.Stage == "ResponseComplete" && e.ObjectRef != nil && e.ObjectRef.Resource == "leases" && e.ObjectRef.Name == leaseName &&
			e.Verb == "update" && e.Code() == 200 {
			updates = append(updates, e.StageTimestamp)
		}
	}
	slices.SortFunc(updates, func(a, b time.Time) int { return a.Compare(b) })
	if len(updates) != takeovers {
		t.Fatalf("the audit log shows %d updates of lease %s, want %d", len(updates), leaseName, takeovers)
	}
	var admittedAfter []int
	var windows, completions, refusals []time.Duration
	for i, updated := range updates {
		end := time.Now()
		if i+1 < len(updates) {
			end = updates[i+1]
		}
		admitted, window, completed, refusal := 0, time.Duration(0), time.Duration(0), time.Duration(-1)
		for _, e := range events {
			if e.Stage != "ResponseComplete" || e.By != old[i] || e.ObjectRef == nil || e.ObjectRef.Resource != "endpointslices" ||
				e.Verb != "create" || !e.StageTimestamp.After(updated) || !e.RequestReceivedTimestamp.Before(end) {
				continue
			}
			after := e.RequestReceivedTimestamp.Sub(updated)
			switch {
			case e.Code() == 201:
				// Admitted and answered after the takeover was: received before or
				// after it, the write was admitted while the takeover was committed.
				completed = max(completed, e.StageTimestamp.Sub(updated))
				if after > 0 {
					admitted++
					window = max(window, after)
				}
			case after >= 0 && (refusal < 0 || after < refusal):
				refusal = after
			}
		}
		admittedAfter = append(admittedAfter, admitted)
		windows = append(windows, window)
		completions = append(completions, completed)
		refusals = append(refusals, refusal)
	}
	line, err := json.Marshal(struct {
		Takeovers     int     `json:"takeovers"`
		AdmittedAfter []int   `json:"admittedAfter"`
		WindowMicros  []int64 `json:"windowMicroseconds"`
		Completed     []int64 `json:"completedMicroseconds"`
	}{takeovers, admittedAfter, micros(windows), micros(completions)})
	if err != nil {
		t.Fatal(err)
	}
	// make bench-fence collects these lines (test/bench/fence_report.go).
	t.Logf("FENCE-WINDOW %s", line)
	t.Logf("HA-NUMBERS apiserver-fence window over %d takeovers (apiserver clock, from its answer to the Lease update): "+
		"old holder's writes received after it and admitted=%v, the last received after %v (p50 %v, max %v); "+
		"admitted writes answered after it, up to %v (p50 %v, max %v); first refused received after %v",
		takeovers, admittedAfter, roundAll(windows), percentile(windows, 50), percentile(windows, 100),
		roundAll(completions), percentile(completions, 50), percentile(completions, 100), roundAll(refusals))
}

// micros returns ds in microseconds.
func micros(ds []time.Duration) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = d.Microseconds()
	}
	return out
}

// percentile returns the p-th percentile of ds (nearest rank), rounded to the
// microsecond; 0 if ds is empty.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	i := max(0, (len(sorted)*p+99)/100-1)
	return sorted[i].Round(time.Microsecond)
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Microsecond)
	}
	return out
}

// clientFor returns a client with the credentials of kubeconfig, impersonating imp if set.
func clientFor(t *testing.T, kubeconfig string, imp *rest.ImpersonationConfig) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if imp != nil {
		cfg.Impersonate = *imp
	}
	// The window is measured by writing as fast as the apiserver answers, not at 5/s.
	cfg.QPS, cfg.Burst = -1, 0
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// selfImpersonatingClient returns a client for a new user in framework.ReplicaGroup
// (so the suite's fence policy applies to it), outside system:masters, that
// impersonates itself, with its group, and the lease-holder extra set to holder. The
// user is granted exactly that, as deploy/fence/rbac.yaml grants a controller's
// ServiceAccount, and creating EndpointSlices in the test's namespace.
func selfImpersonatingClient(t *testing.T, f *framework.Framework, user, holder string) kubernetes.Interface {
	t.Helper()
	ctx := f.Context()
	kubeconfig, err := f.ControlPlane.AddUser(user, framework.ReplicaGroup)
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"users"}, Verbs: []string{"impersonate"}, ResourceNames: []string{user}},
			{APIGroups: []string{""}, Resources: []string{"groups"}, Verbs: []string{"impersonate"}, ResourceNames: []string{framework.ReplicaGroup}},
			{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"userextras/" + leaderelection.LeaseHolderExtra},
				Verbs: []string{"impersonate"}},
		},
	}
	if _, err := f.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	if _, err := f.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects:   subjects,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		bg := context.Background()
		_ = f.Client.RbacV1().ClusterRoleBindings().Delete(bg, user, metav1.DeleteOptions{})
		_ = f.Client.RbacV1().ClusterRoles().Delete(bg, user, metav1.DeleteOptions{})
	})
	if _, err := f.Client.RbacV1().Roles(f.Namespace).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"create"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Client.RbacV1().RoleBindings(f.Namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
		Subjects:   subjects,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return clientFor(t, kubeconfig, &rest.ImpersonationConfig{UserName: user, Groups: []string{framework.ReplicaGroup},
		Extra: map[string][]string{leaderelection.LeaseHolderExtra: {holder}}})
}

// fencedByPolicy reports whether err is the lease policy's denial.
func fencedByPolicy(err error) bool {
	return err != nil && strings.Contains(err.Error(), "write fenced by the apiserver")
}
