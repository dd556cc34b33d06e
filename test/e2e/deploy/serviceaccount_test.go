package deploy

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/mini-kcm/mini-kcm/leaderelection"
	"github.com/mini-kcm/mini-kcm/test/controlplane"
	"github.com/mini-kcm/mini-kcm/test/e2e/deploy/install"
	"github.com/mini-kcm/mini-kcm/test/e2e/deploy/sample"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// TestMiniKCMRollsOutTheSampleAppWithOnlyItsServiceAccount: the operator applies
// deploy/ and deploy/sample/. Three replicas with the StatefulSet's flags and nothing
// but the ServiceAccount's token elect a leader, which rolls the sample Deployment out
// through a ReplicaSet to three ready pods, fills the Service's Endpoints, scales,
// rolls out a new template, removes the Endpoints of a deleted Service, and records
// events. Not one of their requests is forbidden: the audit log has no 403 for the
// ServiceAccount, and no replica logs "forbidden".
func TestMiniKCMRollsOutTheSampleAppWithOnlyItsServiceAccount(t *testing.T) {
	f := framework.New(t)
	// The suite's tests share one control plane and its audit log; this test judges
	// the requests made from its start (others run mini-kcm as other users, e.g.
	// handover check as an administrator).
	started := time.Now()
	inst := installMiniKCM(t, f)
	ctx := f.Context()
	client := f.Client

	replicas := inst.startReplicas(3)
	leader := inst.waitForLeader(replicas, 60*time.Second)
	t.Logf("%s leads lease %s/%s", leader.Name, inst.leaseNamespace, inst.leaseName)
	// Ready only once the leader's informers synced: listing and watching every
	// resource worked with the ServiceAccount's permissions.
	leader.WaitReady(t, 60*time.Second)

	app, err := sample.Load(sampleDir)
	if err != nil {
		t.Fatal(err)
	}
	ns, name := app.Namespace(), app.Deployment.Name
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := app.Delete(ctx, client); err != nil {
			t.Logf("deleting the sample app: %v", err)
		}
	})
	if err := app.Apply(ctx, inst.applier); err != nil {
		t.Fatal(err)
	}
	rolledOut := func(want int32) {
		t.Helper()
		state, err := app.WaitRolledOut(ctx, client, want, 90*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, address := range state.Addresses {
			if !strings.HasSuffix(address, ":8080") {
				t.Fatalf("endpoint address %s: want the pods' port http, 8080 (%s)", address, state)
			}
		}
		t.Logf("  %s", state)
	}

	t.Logf("the Deployment becomes Available with %d ready pods through one ReplicaSet", *app.Deployment.Spec.Replicas)
	rolledOut(*app.Deployment.Spec.Replicas)

	t.Log("scaled to 2, one pod goes and the Endpoints follow")
	if err := app.Scale(ctx, client, 2); err != nil {
		t.Fatal(err)
	}
	rolledOut(2)

	t.Log("a new template rolls out through a second ReplicaSet")
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Spec.Template.Annotations == nil {
			d.Spec.Template.Annotations = map[string]string{}
		}
		d.Spec.Template.Annotations["example.com/restarted-at"] = time.Now().Format(time.RFC3339)
		_, err = client.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	rolledOut(2)
	rss, err := client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rss.Items) != 2 {
		t.Errorf("%d ReplicaSets after the rollout, want the old one (scaled to 0) and the new one", len(rss.Items))
	}

	t.Log("the controllers recorded events in the sample's namespace and on the Lease")
	expectEvents(t, client, ns, map[string]string{
		"deployment-controller": "ScalingReplicaSet",
		"replicaset-controller": "SuccessfulCreate",
	})
	framework.Eventually(t, 30*time.Second, func() error {
		selector := fields.Set{"involvedObject.kind": "Lease", "involvedObject.name": inst.leaseName, "reason": "LeaderElection"}
		events, err := client.CoreV1().Events(inst.leaseNamespace).List(ctx, metav1.ListOptions{FieldSelector: selector.AsSelector().String()})
		if err != nil {
			return err
		}
		if len(events.Items) == 0 {
			return fmt.Errorf("no LeaderElection event on lease %s/%s", inst.leaseNamespace, inst.leaseName)
		}
		return nil
	})

	t.Log("deleting the Service deletes its Endpoints")
	service := app.Service.Name
	if err := client.CoreV1().Services(ns).Delete(ctx, service, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, func() error {
		_, err := client.CoreV1().Endpoints(ns).Get(ctx, service, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("Endpoints %s/%s still there (%v)", ns, service, err)
	})

	t.Log("each controller wrote as its own ServiceAccount, only its own resources; the process read, " +
		"recorded events and held the Lease; nothing was forbidden")
	expectOnlyAllowedRequests(t, f.ControlPlane, started, install.ServiceAccountUser(saNamespace, saName), []identity{
		{client: "replicaset-controller", account: "mini-kcm-replicaset-controller",
			writes:       []string{"pods", "replicasets/status"},
			mustHaveMade: []string{"create pods", "delete pods", "update replicasets/status"}},
		{client: "deployment-controller", account: "mini-kcm-deployment-controller",
			writes:       []string{"replicasets", "deployments", "deployments/status"},
			mustHaveMade: []string{"create replicasets", "update replicasets", "update deployments/status"}},
		{client: "endpoints-controller", account: "mini-kcm-endpoints-controller",
			writes:       []string{"endpoints"},
			mustHaveMade: []string{"create endpoints", "update endpoints", "delete endpoints"}},
		{client: "endpointslice-controller", account: "mini-kcm-endpointslice-controller",
			writes:       []string{"endpointslices", "services/finalizers"},
			mustHaveMade: []string{"create endpointslices"}},
	}, []string{"create events", "update leases", "create serviceaccounts/token"})
	for _, r := range replicas {
		if lines := grepFold(r.Logs(), "forbidden"); len(lines) > 0 {
			t.Errorf("replica %s logged %d forbidden requests, e.g.:\n%s", r.Name, len(lines), strings.Join(lines[:min(5, len(lines))], "\n"))
		}
	}
}

// expectEvents waits for at least one event of each component with the given reason.
func expectEvents(t *testing.T, client kubernetes.Interface, ns string, reasonByComponent map[string]string) {
	t.Helper()
	framework.Eventually(t, 30*time.Second, func() error {
		events, err := client.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		var seen, missing []string
		for component, reason := range reasonByComponent {
			found := false
			for _, e := range events.Items {
				if e.Source.Component == component && e.Reason == reason {
					found = true
				}
			}
			if !found {
				missing = append(missing, component+" "+reason)
			}
		}
		for _, e := range events.Items {
			seen = append(seen, e.Source.Component+" "+e.Reason)
		}
		if len(missing) > 0 {
			sort.Strings(missing)
			return fmt.Errorf("no event %v in %s; events seen: %v", missing, ns, seen)
		}
		return nil
	})
}

// identity is a controller that writes as its own ServiceAccount in kube-system.
type identity struct {
	// client is the controller's name in mini-kcm's user agent, "mini-kcm/<version> (<client>)".
	client string
	// account is its ServiceAccount.
	account string
	// writes are the only resources it may create, update, patch or delete.
	writes []string
	// mustHaveMade are requests ("verb resource") the story makes it send.
	mustHaveMade []string
}

// expectOnlyAllowedRequests reads the audit log from since on: every request of
// mini-kcm (user agent "mini-kcm/<version> (<client>)") by one of the controllers was
// authenticated as that controller's ServiceAccount and wrote only that controller's
// resources; every other request of mini-kcm was authenticated as processUser; each
// made at least its mustHaveMade requests, and not one request was answered 403
// Forbidden.
func expectOnlyAllowedRequests(t *testing.T, cp *controlplane.ControlPlane, since time.Time, processUser string, controllers []identity, processMustHaveMade []string) {
	t.Helper()
	events, err := cp.ReadAuditLog()
	if err != nil {
		t.Fatal(err)
	}
	byClient := map[string]identity{}
	for _, c := range controllers {
		byClient[c.client] = c
	}
	made := map[string]map[string]int{} // user -> "verb resource" -> count
	var forbidden []string
	for _, e := range events {
		if !strings.HasPrefix(e.UserAgent, "mini-kcm/") || e.RequestReceivedTimestamp.Before(since) {
			continue
		}
		client := e.UserAgent[strings.LastIndex(e.UserAgent, "(")+1 : len(e.UserAgent)-1]
		want, controller := processUser, byClient[client]
		if controller.client != "" {
			want = install.ServiceAccountUser("kube-system", controller.account)
		}
		if e.User.Username != want {
			t.Fatalf("mini-kcm's %s made a request as %q, not as %s: %s %s", client, e.User.Username, want, e.Verb, e.RequestURI)
		}
		request := e.Verb + " " + e.Resource()
		if e.Resource() == "" {
			request = e.Verb + " " + e.RequestURI
		}
		if made[want] == nil {
			made[want] = map[string]int{}
		}
		made[want][request]++
		// A controller's client checks at start that it may impersonate itself
		// (--leader-elect-apiserver-fence): a review, which stores nothing.
		isWrite := slices.Contains([]string{"create", "update", "patch", "delete"}, e.Verb) && e.Resource() != "selfsubjectreviews"
		if controller.client != "" && isWrite && !slices.Contains(controller.writes, e.Resource()) {
			t.Errorf("%s wrote %s, which is not its own (%v): %s", controller.client, e.Resource(), controller.writes, e.RequestURI)
		}
		// deploy/fence: every controller write impersonates the controller's own
		// account and carries the replica's leader-election identity.
		if controller.client != "" && isWrite && e.Stage == "ResponseComplete" {
			if imp := e.ImpersonatedUser; imp == nil || imp.Username != want || len(imp.Extra[leaderelection.LeaseHolderExtra]) != 1 {
				t.Errorf("%s wrote %s without impersonating %s with the %s extra (impersonated: %+v)", controller.client,
					e.RequestURI, want, leaderelection.LeaseHolderExtra, imp)
			}
		}
		if e.Code() == http.StatusForbidden {
			forbidden = append(forbidden, fmt.Sprintf("%s %s (%s as %s)", e.Verb, e.RequestURI, e.UserAgent, e.User.Username))
		}
	}
	check := func(user string, mustHaveMade []string) {
		requests := make([]string, 0, len(made[user]))
		for r, n := range made[user] {
			requests = append(requests, fmt.Sprintf("%s ×%d", r, n))
		}
		sort.Strings(requests)
		t.Logf("mini-kcm's requests as %s in the audit log: %s", user, strings.Join(requests, ", "))
		for _, r := range mustHaveMade {
			if made[user][r] == 0 {
				t.Errorf("the audit log has no %q by mini-kcm as %s", r, user)
			}
		}
	}
	check(processUser, processMustHaveMade)
	for _, c := range controllers {
		check(install.ServiceAccountUser("kube-system", c.account), c.mustHaveMade)
	}
	if len(forbidden) > 0 {
		t.Errorf("%d requests of mini-kcm were forbidden, e.g.:\n%s", len(forbidden), strings.Join(forbidden[:min(10, len(forbidden))], "\n"))
	}
}

// grepFold returns the lines of text that contain word, ignoring case.
func grepFold(text, word string) []string {
	re := regexp.MustCompile(`(?i)` + regexp.QuoteMeta(word))
	var lines []string
	for _, line := range strings.Split(text, "\n") {
		if re.MatchString(line) {
			lines = append(lines, line)
		}
	}
	return lines
}
