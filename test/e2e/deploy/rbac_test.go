package deploy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/mini-kcm/mini-kcm/controllers"
	allcontrollers "github.com/mini-kcm/mini-kcm/controllers/all"
	"github.com/mini-kcm/mini-kcm/hack/rbacgen"
	"github.com/mini-kcm/mini-kcm/test/e2e/deploy/install"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// call is one API request as the authorizer sees it. An empty namespace is a
// cluster-wide request (an informer's list and watch); an empty name is a request on
// the collection (create, list).
type call struct {
	verb, group, resource, subresource, namespace, name string
}

func (c call) String() string {
	resource := c.resource
	if c.subresource != "" {
		resource += "/" + c.subresource
	}
	if c.group != "" {
		resource += "." + c.group
	}
	where := "cluster-wide"
	if c.namespace != "" {
		where = "in " + c.namespace
	}
	if c.name != "" {
		return fmt.Sprintf("%s %s %q %s", c.verb, resource, c.name, where)
	}
	return fmt.Sprintf("%s %s %s", c.verb, resource, where)
}

// workloadNamespace stands for any user namespace: the controllers act in all of them.
const workloadNamespace = "shop"

// registry is the controller registry the product runs, which deploy/'s RBAC is generated
// from: these tests derive every controller's calls from its descriptor.
var registry = allcontrollers.Registry()

// processCalls are the calls mini-kcm makes as its own ServiceAccount: the shared
// informers' list and watch, the controllers' events, leader election, and the
// TokenRequests for the controllers' ServiceAccounts (--use-service-account-credentials).
func processCalls(leaseNamespace, leaseName string) []call {
	ns := workloadNamespace
	var calls []call
	// Informers, shared by the controllers.
	for gr := range rbacgen.CachedResources(registry) {
		calls = append(calls, call{verb: "list", group: gr.Group, resource: gr.Resource},
			call{verb: "watch", group: gr.Group, resource: gr.Resource})
	}
	calls = append(calls, []call{
		// Events of every controller (client-go's recorder creates, then patches the
		// count of a repeated event).
		{verb: "create", resource: "events", namespace: ns},
		{verb: "patch", resource: "events", namespace: ns, name: "web.17d2"},
		// Leader election: client-go's LeaseLock, and the LeaderElection event on the
		// Lease.
		{verb: "get", group: "coordination.k8s.io", resource: "leases", namespace: leaseNamespace, name: leaseName},
		{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: leaseNamespace},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: leaseNamespace, name: leaseName},
		{verb: "list", group: "coordination.k8s.io", resource: "leases", namespace: leaseNamespace, name: leaseName},
		{verb: "watch", group: "coordination.k8s.io", resource: "leases", namespace: leaseNamespace, name: leaseName},
		{verb: "create", resource: "events", namespace: leaseNamespace},
		{verb: "patch", resource: "events", namespace: leaseNamespace, name: leaseName + ".17d2"},
	}...)
	for _, d := range registry.Descriptors() {
		calls = append(calls, call{verb: "create", resource: "serviceaccounts", subresource: "token", namespace: "kube-system", name: d.ServiceAccount()})
	}
	return calls
}

// callOf is one call of a verb on a resource ("pods", "replicasets/status") as a
// controller makes it: a list or watch cluster-wide, a create on the namespace's
// collection, anything else on a named object.
func callOf(verb, group, resource string) call {
	resource, subresource, _ := strings.Cut(resource, "/")
	c := call{verb: verb, group: group, resource: resource, subresource: subresource, namespace: workloadNamespace, name: "web-1"}
	switch {
	case verb == "list" || verb == "watch":
		c.namespace, c.name = "", ""
	case verb == "create" && subresource == "":
		c.name = ""
	}
	return c
}

// controllerCalls are a controller's own calls, from its descriptor's rules: its writes
// and the live reads it makes before adopting.
func controllerCalls(d controllers.Descriptor) []call {
	var calls []call
	for _, rule := range d.Rules {
		for _, resource := range rule.Resources {
			for _, verb := range rule.Verbs {
				calls = append(calls, callOf(verb, rule.Group, resource))
			}
		}
	}
	return calls
}

// callsNoControllerMakes must be denied: each would let a bug or a stolen token do
// harm that mini-kcm's job does not need.
func callsNoControllerMakes(leaseNamespace, leaseName string) []call {
	ns := workloadNamespace
	return []call{
		// The controllers' writes are made as their own ServiceAccounts, not the process's.
		{verb: "create", resource: "pods", namespace: ns},
		{verb: "delete", resource: "pods", namespace: ns, name: "web-1-abcde"},
		{verb: "create", group: "apps", resource: "replicasets", namespace: ns},
		{verb: "update", group: "apps", resource: "deployments", subresource: "status", namespace: ns, name: "web"},
		{verb: "update", resource: "endpoints", namespace: ns, name: "web"},
		{verb: "create", group: "discovery.k8s.io", resource: "endpointslices", namespace: ns},
		// Tokens of any other account.
		{verb: "create", resource: "serviceaccounts", subresource: "token", namespace: "kube-system", name: "generic-garbage-collector"},
		{verb: "create", resource: "serviceaccounts", subresource: "token", namespace: ns, name: "mini-kcm-replicaset-controller"},
		// Upstream's controller accounts, which the bootstrap policy grants more than ours.
		{verb: "create", resource: "serviceaccounts", subresource: "token", namespace: "kube-system", name: "replicaset-controller"},
		{verb: "create", resource: "serviceaccounts", subresource: "token", namespace: "kube-system", name: "endpoint-controller"},
		{verb: "get", resource: "secrets", namespace: "kube-system", name: "any"},
		{verb: "list", resource: "secrets"},
		{verb: "list", resource: "secrets", namespace: ns},
		{verb: "list", resource: "configmaps"},
		{verb: "list", resource: "configmaps", namespace: "kube-system"},
		{verb: "delete", group: "apps", resource: "deployments", namespace: ns, name: "web"},
		{verb: "create", group: "apps", resource: "deployments", namespace: ns},
		{verb: "patch", group: "apps", resource: "deployments", namespace: ns, name: "web"},
		{verb: "update", resource: "pods", namespace: ns, name: "web-1-abcde"},
		{verb: "create", resource: "pods", subresource: "exec", namespace: ns, name: "web-1-abcde"},
		{verb: "create", resource: "pods", subresource: "eviction", namespace: ns, name: "web-1-abcde"},
		{verb: "update", resource: "services", namespace: ns, name: "web"},
		{verb: "patch", resource: "nodes", name: "kwok-node-0"},
		{verb: "create", resource: "serviceaccounts", subresource: "token", namespace: "kube-system", name: saName},
		{verb: "update", group: "apps", resource: "statefulsets", namespace: "kube-system", name: statefulSetName},
		{verb: "delete", resource: "events", namespace: ns, name: "web.17d2"},
		{verb: "deletecollection", group: "discovery.k8s.io", resource: "endpointslices", namespace: ns},
		{verb: "patch", group: "discovery.k8s.io", resource: "endpointslices", namespace: ns, name: "web-abcde"},
		// Other components' Leases: neither readable nor writable, so a bug cannot take
		// over kube-controller-manager's or kube-scheduler's leadership.
		{verb: "get", group: "coordination.k8s.io", resource: "leases", namespace: leaseNamespace, name: "kube-controller-manager"},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: leaseNamespace, name: "kube-controller-manager"},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: leaseNamespace, name: "kube-scheduler"},
		{verb: "patch", group: "coordination.k8s.io", resource: "leases", namespace: leaseNamespace, name: leaseName},
		{verb: "delete", group: "coordination.k8s.io", resource: "leases", namespace: leaseNamespace, name: leaseName},
		{verb: "list", group: "coordination.k8s.io", resource: "leases", namespace: leaseNamespace},
		{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: "default"},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: "default", name: leaseName},
		// Privilege escalation.
		{verb: "escalate", group: "rbac.authorization.k8s.io", resource: "clusterroles", name: "cluster-admin"},
		{verb: "bind", group: "rbac.authorization.k8s.io", resource: "clusterroles", name: "cluster-admin"},
		{verb: "create", group: "rbac.authorization.k8s.io", resource: "clusterrolebindings"},
		{verb: "impersonate", resource: "users", name: "admin"},
	}
}

// TestTheServiceAccountMayMakeEveryCallOfTheControllersAndNoOther: the token a
// mini-kcm pod gets is, as the apiserver's RBAC authorizer decides, allowed every call
// of the shared informers, the events, leader election and the controllers' token
// requests, and denied the controllers' writes (made as their own ServiceAccounts) and
// the calls no controller makes (secrets, configmaps, writing nodes, deleting Deployments,
// other components' Leases, privilege escalation).
func TestTheServiceAccountMayMakeEveryCallOfTheControllersAndNoOther(t *testing.T) {
	f := framework.New(t)
	inst := installMiniKCM(t, f)
	ctx := f.Context()

	review, err := inst.tokenClient.AuthenticationV1().SelfSubjectReviews().Create(ctx,
		&authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	user := review.Status.UserInfo
	if want := install.ServiceAccountUser(saNamespace, saName); user.Username != want {
		t.Fatalf("the token authenticates as %q, want %q", user.Username, want)
	}
	t.Logf("the token authenticates as %s, groups %v", user.Username, user.Groups)

	for _, c := range processCalls(inst.leaseNamespace, inst.leaseName) {
		if allowed, reason := mayI(t, ctx, inst.tokenClient, c); !allowed {
			t.Errorf("%s may not %s, which mini-kcm needs (%s)", user.Username, c, reason)
		}
	}
	for _, c := range callsNoControllerMakes(inst.leaseNamespace, inst.leaseName) {
		if allowed, reason := mayI(t, ctx, inst.tokenClient, c); allowed {
			t.Errorf("%s may %s, which no controller needs (%s)", user.Username, c, reason)
		}
	}

	// RBAC authorizes a create against the collection, before the body and so the
	// name is known: creating a Lease of another name in the Lease's namespace is
	// allowed, as deploy/rbac/leader-election-role.yaml documents. What matters is that
	// such a Lease cannot then be read or renewed (checked above).
	other := call{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: inst.leaseNamespace, name: "some-other-lease"}
	if allowed, _ := mayI(t, ctx, inst.tokenClient, other); !allowed {
		t.Errorf("%s may not %s; the leader-election Role documents that create is namespace-wide, update the documentation", user.Username, other)
	}
}

// TestTheServiceAccountIsForbiddenWhatItNeverNeeds makes real requests with the token,
// not only access reviews: the apiserver answers 403 Forbidden to each.
func TestTheServiceAccountIsForbiddenWhatItNeverNeeds(t *testing.T) {
	f := framework.New(t)
	inst := installMiniKCM(t, f)
	ctx := f.Context()
	client := inst.tokenClient
	node := f.ControlPlane.NodeNames()[0]

	requests := map[string]func() error{
		"list secrets in all namespaces": func() error {
			_, err := client.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
			return err
		},
		"list configmaps in kube-system": func() error {
			_, err := client.CoreV1().ConfigMaps("kube-system").List(ctx, metav1.ListOptions{})
			return err
		},
		"patch node " + node: func() error {
			_, err := client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"hijacked":"true"}}}`), metav1.PatchOptions{})
			return err
		},
		"delete deployment " + f.Namespace + "/web": func() error {
			return client.AppsV1().Deployments(f.Namespace).Delete(ctx, "web", metav1.DeleteOptions{})
		},
		"update lease kube-system/kube-controller-manager": func() error {
			lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "kube-controller-manager", Namespace: "kube-system"}}
			_, err := client.CoordinationV1().Leases("kube-system").Update(ctx, lease, metav1.UpdateOptions{})
			return err
		},
		"get lease kube-system/kube-scheduler": func() error {
			_, err := client.CoordinationV1().Leases("kube-system").Get(ctx, "kube-scheduler", metav1.GetOptions{})
			return err
		},
		"create lease " + f.Namespace + "/" + inst.leaseName: func() error {
			lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: inst.leaseName, Namespace: f.Namespace}}
			_, err := client.CoordinationV1().Leases(f.Namespace).Create(ctx, lease, metav1.CreateOptions{})
			return err
		},
	}
	names := make([]string, 0, len(requests))
	for name := range requests {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := requests[name](); !apierrors.IsForbidden(err) {
			t.Errorf("%s with the ServiceAccount token: got %v, want 403 Forbidden", name, err)
		}
	}
}

// upstreamAccounts names upstream's ServiceAccount of a controller where it is not the
// controller's name; the bootstrap policy binds system:controller:<account> to it.
var upstreamAccounts = map[string]string{"endpoints-controller": "endpoint-controller"}

// TestEachControllerServiceAccountMayDoExactlyItsRules: on a control plane with the
// bootstrap RBAC policy in place, as the apiserver's authorizer decides, each
// controller's ServiceAccount may make every call of its descriptor's rules, and none of
// the neighbouring calls: another controller's writes, and what upstream's bootstrap
// role for the same controller (system:controller:<upstream account>) grants beyond ours
// (list and watch, which the process makes; events, which the process records; update of
// pods for the Deployment controller; endpoints/restricted; the extensions group). Our
// accounts have names of their own, so the bootstrap policy binds nothing to them.
func TestEachControllerServiceAccountMayDoExactlyItsRules(t *testing.T) {
	f := framework.New(t)
	installMiniKCM(t, f)
	ctx := f.Context()
	for _, d := range registry.Descriptors() {
		user := install.ServiceAccountUser("kube-system", d.ServiceAccount())
		own := controllerCalls(d)
		for _, c := range own {
			if allowed, reason := mayUser(t, ctx, f.Client, user, c); !allowed {
				t.Errorf("%s may not %s, which %s needs (%s)", user, c, d.Name, reason)
			}
		}

		neighbours := map[call]string{} // call -> whose
		for _, other := range registry.Descriptors() {
			if other.Name != d.Name {
				for _, c := range controllerCalls(other) {
					neighbours[c] = other.Name
				}
			}
		}
		upstream, ok := upstreamAccounts[d.Name]
		if !ok {
			upstream = d.Name
		}
		role, err := f.Client.RbacV1().ClusterRoles().Get(ctx, "system:controller:"+upstream, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("reading upstream's bootstrap role for %s: %v", d.Name, err)
		}
		for _, rule := range role.Rules {
			for _, group := range rule.APIGroups {
				for _, resource := range rule.Resources {
					for _, verb := range rule.Verbs {
						neighbours[callOf(verb, group, resource)] = role.Name
					}
				}
			}
		}
		if len(neighbours) == 0 {
			t.Fatalf("%s: no neighbouring call to check", d.Name)
		}
		denied := 0
		for _, c := range slices.SortedFunc(maps.Keys(neighbours), func(a, b call) int { return strings.Compare(a.String(), b.String()) }) {
			if slices.Contains(own, c) {
				continue
			}
			if allowed, reason := mayUser(t, ctx, f.Client, user, c); allowed {
				t.Errorf("%s may %s, which %s grants and %s does not need (%s)", user, c, neighbours[c], d.Name, reason)
			} else {
				denied++
			}
		}
		t.Logf("%s: the %d calls of its rules allowed, %d neighbouring calls denied", user, len(own), denied)
	}
}

// mayUser asks the apiserver whether a ServiceAccount user may make the call.
func mayUser(t *testing.T, ctx context.Context, admin kubernetes.Interface, user string, c call) (bool, string) {
	t.Helper()
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   user,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: c.namespace, Verb: c.verb, Group: c.group, Resource: c.resource, Subresource: c.subresource, Name: c.name,
		},
	}}
	result, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("reviewing %s for %s: %v", c, user, err)
	}
	return result.Status.Allowed, result.Status.Reason
}

// mayI asks the apiserver whether the client's own identity may make the call, and
// returns the decision and the authorizer's reason.
func mayI(t *testing.T, ctx context.Context, client kubernetes.Interface, c call) (bool, string) {
	t.Helper()
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace:   c.namespace,
			Verb:        c.verb,
			Group:       c.group,
			Resource:    c.resource,
			Subresource: c.subresource,
			Name:        c.name,
		},
	}}
	result, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("reviewing %s: %v", c, err)
	}
	reason := result.Status.Reason
	if result.Status.EvaluationError != "" {
		reason += "; evaluation error: " + result.Status.EvaluationError
	}
	return result.Status.Allowed, reason
}
