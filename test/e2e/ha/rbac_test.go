package ha

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/mini-kcm/mini-kcm/controllers/all"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// podCachingControllers are the registered controllers enabled by default whose
// descriptors declare a pod cache: the ones a replica without pods list permission holds.
func podCachingControllers() []string {
	var names []string
	for _, d := range all.Registry().Descriptors() {
		if !d.DisabledByDefault && slices.ContainsFunc(d.Caches, func(gr schema.GroupResource) bool {
			return gr.Group == "" && gr.Resource == "pods"
		}) {
			names = append(names, d.Name)
		}
	}
	return names
}

// TestReplicaWithoutPodListPermissionNamesTheStuckInformerAndStaysUnready: an operator
// forgot pods list and watch in mini-kcm's ClusterRole. The leader cannot fill its pod
// cache; instead of hanging silently it logs which informer each controller waits for,
// /readyz stays false (the reason at /readyz/controllers, for an authorized caller; an
// anonymous probe sees "reason withheld"), and nothing crashes. Once the
// permission is granted, the same process recovers without a restart.
func TestReplicaWithoutPodListPermissionNamesTheStuckInformerAndStaysUnready(t *testing.T) {
	f := framework.New(t)
	ctx := f.Context()
	ns := f.Namespace
	user := "ha-rbac-" + ns[len(ns)-5:]

	// Everything mini-kcm needs, with pods limited to what needs no list or watch.
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"replicasets", "replicasets/status", "replicasets/finalizers",
			"deployments", "deployments/status", "deployments/finalizers"}, Verbs: []string{"*"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "create", "patch", "update", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"services", "endpoints", "events"}, Verbs: []string{"*"}},
		{APIGroups: []string{""}, Resources: []string{"services/finalizers"}, Verbs: []string{"update"}},
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"*"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"*"}},
		// --leader-elect-apiserver-fence: the controllers impersonate their own user, with
		// its group, and the lease-holder extra.
		{APIGroups: []string{""}, Resources: []string{"users"}, ResourceNames: []string{user}, Verbs: []string{"impersonate"}},
		{APIGroups: []string{""}, Resources: []string{"groups"}, ResourceNames: []string{framework.ReplicaGroup}, Verbs: []string{"impersonate"}},
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"userextras/mini-kcm.io/lease-holder"}, Verbs: []string{"impersonate"}},
		// Serving delegates authentication and authorization with the same user.
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"extension-apiserver-authentication"},
			Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}
	if _, err := f.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if _, err := f.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = f.Client.RbacV1().ClusterRoleBindings().Delete(ctx, user, metav1.DeleteOptions{})
		_ = f.Client.RbacV1().ClusterRoles().Delete(ctx, user, metav1.DeleteOptions{})
	})
	if _, err := f.Client.AppsV1().ReplicaSets(ns).Create(ctx, newReplicaSet("web", 3, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A certificate user of the test's own role, not the shipped identity: the test is
	// of a role that lacks a permission.
	m := startMember(t, f, user, memberOptions{timings: defaultTimings, groups: []string{}})
	leaderOf(t, f, []*member{m}, time.Minute)
	started := time.Now()
	cpuBefore, err := cpuSeconds(m.Pid())
	if err != nil {
		t.Fatal(err)
	}

	// The controllers' cache waits report the pods informer by name, in the log (every
	// 10s) and in /readyz/controllers.
	framework.Eventually(t, time.Minute, func() error {
		logs := m.Logs()
		forbidden := `pods is forbidden: User \"` + user + `\" cannot list resource \"pods\"`
		if !strings.Contains(logs, forbidden) {
			return fmt.Errorf("the log does not contain %s yet", forbidden)
		}
		for _, controller := range podCachingControllers() {
			if !logLineContains(logs, "Still waiting for informers to sync; check RBAC",
				`controller="`+controller+`" informers=["pods"]`) {
				return fmt.Errorf("no log line says that %s still waits for the pods informer", controller)
			}
		}
		return nil
	})
	code, body, err := m.Get("/readyz/controllers")
	if err != nil {
		t.Fatal(err)
	}
	for _, controller := range podCachingControllers() {
		want := controller + " waits for informers"
		if code != http.StatusInternalServerError || !strings.Contains(body, want) {
			t.Errorf("/readyz/controllers answered %d without %q:\n%s", code, want, body)
		}
	}
	// An anonymous probe learns which check failed, not why: the reasons name objects.
	code, body, err = m.GetWith(f.ControlPlane.HTTPSClient(nil), "/readyz?verbose")
	if err != nil {
		t.Fatal(err)
	}
	if want := "[-]controllers failed: reason withheld"; code != http.StatusInternalServerError ||
		!strings.Contains(body, want) || strings.Contains(body, "waits for informers") {
		t.Errorf("anonymous /readyz?verbose answered %d %q, want 500 with %q and no reason", code, body, want)
	}
	for _, path := range []string{"/livez", "/healthz"} {
		if code, body, err := m.Get(path); err != nil || code != http.StatusOK {
			t.Errorf("%s answered %d (%v): %s; a missing permission must not fail liveness", path, code, err, body)
		}
	}
	if m.Exited() {
		t.Fatalf("the replica exited:\n%s", m.Logs())
	}
	// Nothing was created while the controllers could not see pods.
	if pods, err := f.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil || len(pods.Items) != 0 {
		t.Errorf("pods exist although no controller could sync: %d (%v)", len(pods.Items), err)
	}
	cpuAfter, err := cpuSeconds(m.Pid())
	if err != nil {
		t.Fatal(err)
	}
	events := readAudit(t, f.ControlPlane)
	denied := requestFilter{users: userSet(user), resource: "pods", verb: "list", codes: []int32{403}}.count(events)
	waited := time.Since(started)
	t.Logf("HA-NUMBERS rbac-denied waited=%.1fs denied-pod-lists=%d cpu=%.2fs", waited.Seconds(), denied, cpuAfter-cpuBefore)
	// The reflectors back off exponentially (0.8s doubling); a hot loop would show
	// hundreds of denied lists.
	if limit := int(waited.Seconds()); denied > limit {
		t.Errorf("%d denied pod lists in %v, more than one a second: the informers do not back off", denied, waited)
	}

	// Granting the permission lets the same process sync and work.
	role.Rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}})
	if _, err := f.Client.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	granted := time.Now()
	eventually(t, time.Minute, func() error { return replicaSetComplete(ctx, f.Client, ns, "web") })
	framework.Eventually(t, 30*time.Second, func() error {
		if code, body, err := m.Get("/readyz?verbose"); err != nil || code != http.StatusOK {
			return fmt.Errorf("/readyz %d (%v): %s", code, err, body)
		}
		return nil
	})
	t.Logf("HA-NUMBERS rbac-granted recovered=%.1fs restarts=0", time.Since(granted).Seconds())
	if m.Exited() {
		t.Fatal("the replica exited")
	}
}

// logLineContains reports whether one line of logs contains every part.
func logLineContains(logs string, parts ...string) bool {
	for _, line := range strings.Split(logs, "\n") {
		found := true
		for _, p := range parts {
			if !strings.Contains(line, p) {
				found = false
				break
			}
		}
		if found {
			return true
		}
	}
	return false
}
