package deploy

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/mini-kcm/mini-kcm/controllers"
	allcontrollers "github.com/mini-kcm/mini-kcm/controllers/all"
	"github.com/mini-kcm/mini-kcm/hack/rbacgen"
)

// request is one API call as RBAC sees it. An empty namespace is a cluster-wide call (an
// informer's list and watch); an empty name is a call on the collection (create).
type request struct {
	verb, group, resource, subresource, namespace, name string
}

func (r request) String() string {
	resource := r.resource
	if r.subresource != "" {
		resource += "/" + r.subresource
	}
	return fmt.Sprintf("%s %s.%s ns=%q name=%q", r.verb, resource, r.group, r.namespace, r.name)
}

// ruleAllows follows the RBAC authorizer's matching (rbac/v1 PolicyRule semantics):
// verb, group, resource (with subresource) and, when the rule names any, the object name.
func ruleAllows(rule rbacv1.PolicyRule, r request) bool {
	resource := r.resource
	if r.subresource != "" {
		resource += "/" + r.subresource
	}
	matches := func(values []string, v string) bool {
		return slices.Contains(values, v) || slices.Contains(values, rbacv1.VerbAll)
	}
	if !matches(rule.Verbs, r.verb) || !matches(rule.APIGroups, r.group) || !matches(rule.Resources, resource) {
		return false
	}
	return len(rule.ResourceNames) == 0 || slices.Contains(rule.ResourceNames, r.name)
}

func rulesAllow(rules []rbacv1.PolicyRule, r request) bool {
	return slices.ContainsFunc(rules, func(rule rbacv1.PolicyRule) bool { return ruleAllows(rule, r) })
}

// rbac is the RBAC content of a kustomization.
type rbac struct {
	clusterRoles        map[string]*rbacv1.ClusterRole
	roles               map[string]*rbacv1.Role // by namespace/name
	clusterRoleBindings []*rbacv1.ClusterRoleBinding
	roleBindings        []*rbacv1.RoleBinding
}

func loadRBAC(t *testing.T, dir string) rbac {
	t.Helper()
	m := loadKustomization(t, dir)
	r := rbac{clusterRoles: map[string]*rbacv1.ClusterRole{}, roles: map[string]*rbacv1.Role{}}
	for _, cr := range all[*rbacv1.ClusterRole](m) {
		r.clusterRoles[cr.Name] = cr
	}
	for _, role := range all[*rbacv1.Role](m) {
		r.roles[role.Namespace+"/"+role.Name] = role
	}
	r.clusterRoleBindings = all[*rbacv1.ClusterRoleBinding](m)
	r.roleBindings = all[*rbacv1.RoleBinding](m)
	return r
}

// allows reports whether the subject may make the request, through a ClusterRoleBinding
// (any namespace) or a RoleBinding in the request's namespace.
func (r rbac) allows(t *testing.T, subject rbacv1.Subject, req request) bool {
	t.Helper()
	for _, b := range r.clusterRoleBindings {
		if slices.Contains(b.Subjects, subject) && rulesAllow(r.clusterRole(t, b.RoleRef).Rules, req) {
			return true
		}
	}
	for _, b := range r.roleBindings {
		if !slices.Contains(b.Subjects, subject) || req.namespace != b.Namespace {
			continue
		}
		var rules []rbacv1.PolicyRule
		if b.RoleRef.Kind == "Role" {
			role, ok := r.roles[b.Namespace+"/"+b.RoleRef.Name]
			if !ok {
				t.Fatalf("RoleBinding %s/%s refers to a missing Role %s", b.Namespace, b.Name, b.RoleRef.Name)
			}
			rules = role.Rules
		} else {
			rules = r.clusterRole(t, b.RoleRef).Rules
		}
		if rulesAllow(rules, req) {
			return true
		}
	}
	return false
}

func (r rbac) clusterRole(t *testing.T, ref rbacv1.RoleRef) *rbacv1.ClusterRole {
	t.Helper()
	cr, ok := r.clusterRoles[ref.Name]
	if ref.Kind != "ClusterRole" || !ok {
		t.Fatalf("binding refers to %s %q, which these manifests do not define", ref.Kind, ref.Name)
	}
	return cr
}

// registry is the controller registry the product runs: deploy/'s RBAC is generated from
// it, and these tests read it rather than a list of controllers of their own.
var registry = allcontrollers.Registry()

// TestGeneratedRBACMatchesTheRegistry is the drift check of the generated files, like
// upstream's hack/verify-*: a descriptor changed without make generate, or a generated
// file edited by hand, fails here.
func TestGeneratedRBACMatchesTheRegistry(t *testing.T) {
	if err := rbacgen.Check(registry, "."); err != nil {
		t.Fatalf("%v\n\ndeploy/ and the controller registry disagree: run `make generate` and commit the result", err)
	}
}

// callsOf expands a controller's rules into the API calls they stand for, one per
// resource and verb, in a sample namespace: what its own client sends under
// --use-service-account-credentials.
func callsOf(d controllers.Descriptor) []request {
	var calls []request
	for _, rule := range d.Rules {
		for _, resource := range rule.Resources {
			resource, subresource, _ := strings.Cut(resource, "/")
			for _, verb := range rule.Verbs {
				name := "web-1"
				if verb == "create" && subresource == "" {
					name = "" // a create is authorized against the collection
				}
				calls = append(calls, request{verb: verb, group: rule.Group, resource: resource, subresource: subresource,
					namespace: "app", name: name})
			}
		}
	}
	return calls
}

// controllerCalls lists, per controller, every API call its own client makes, from its
// descriptor's rules. A controller that starts making a new call adds a rule to its
// descriptor and runs make generate.
var controllerCalls = func() map[string][]request {
	calls := map[string][]request{}
	for _, d := range registry.Descriptors() {
		calls[d.Name] = callsOf(d)
	}
	return calls
}()

// controllerServiceAccounts names each controller's ServiceAccount in kube-system, from
// its descriptor.
var controllerServiceAccounts = func() map[string]string {
	accounts := map[string]string{}
	for _, d := range registry.Descriptors() {
		accounts[d.Name] = d.ServiceAccount()
	}
	return accounts
}()

// processCalls are the calls made with the process's own identity for the controllers:
// the shared informers' list and watch of every kind a controller caches, and the events
// the controllers record (one event broadcaster per process).
var processCalls = func() []request {
	var calls []request
	for gr := range rbacgen.CachedResources(registry) {
		calls = append(calls,
			request{verb: "list", group: gr.Group, resource: gr.Resource},
			request{verb: "watch", group: gr.Group, resource: gr.Resource})
	}
	return append(calls,
		request{verb: "create", resource: "events", namespace: "app"},
		request{verb: "patch", resource: "events", namespace: "app", name: "web-1.17d2"})
}()

// tokenRequestCalls are the TokenRequests of --use-service-account-credentials, one per
// controller's ServiceAccount.
func tokenRequestCalls() []request {
	var calls []request
	for _, account := range controllerServiceAccounts {
		calls = append(calls, request{verb: "create", resource: "serviceaccounts", subresource: "token",
			namespace: "kube-system", name: account})
	}
	return calls
}

// leaderElectionCalls are client-go LeaseLock's calls, a standby's watch on the Lease,
// plus the LeaderElection event recorded on the Lease.
func leaderElectionCalls(namespace, lease string) []request {
	return []request{
		{verb: "get", group: "coordination.k8s.io", resource: "leases", namespace: namespace, name: lease},
		{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: namespace},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: namespace, name: lease},
		// A standby watches the Lease so that it tries at expiry (leaderelection.Config.LeaseWatch).
		{verb: "list", group: "coordination.k8s.io", resource: "leases", namespace: namespace, name: lease},
		{verb: "watch", group: "coordination.k8s.io", resource: "leases", namespace: namespace, name: lease},
		{verb: "create", resource: "events", namespace: namespace},
		{verb: "patch", resource: "events", namespace: namespace, name: lease + ".17d2"},
	}
}

func TestEachControllerRoleAllowsEveryCallOfItsController(t *testing.T) {
	r := loadRBAC(t, ".")
	for controller, calls := range controllerCalls {
		role, ok := r.clusterRoles["mini-kcm:"+controller]
		if !ok {
			t.Errorf("no ClusterRole mini-kcm:%s", controller)
			continue
		}
		for _, call := range calls {
			if !rulesAllow(role.Rules, call) {
				t.Errorf("%s: ClusterRole %s does not allow %s", controller, role.Name, call)
			}
		}
	}
}

// subjectsUnderTest are the identities mini-kcm runs as: the ServiceAccount of the
// StatefulSet and the certificate user of the static pod, each with its kustomization.
func subjectsUnderTest(t *testing.T) map[string]struct {
	dir     string
	subject rbacv1.Subject
} {
	t.Helper()
	sts := only[*appsv1.StatefulSet](t, loadKustomization(t, "."))
	return map[string]struct {
		dir     string
		subject rbacv1.Subject
	}{
		"serviceaccount": {".", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: sts.Spec.Template.Spec.ServiceAccountName, Namespace: sts.Namespace}},
		"static pod":     {"static-pod", rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "system:mini-kcm"}},
	}
}

func TestMiniKCMMayReadForItsControllersHoldTheLeaseAndRequestTheirTokens(t *testing.T) {
	container := only[*appsv1.StatefulSet](t, loadKustomization(t, ".")).Spec.Template.Spec.Containers[0]
	namespace := mustFlag(t, container, "leader-elect-resource-namespace")
	lease := mustFlag(t, container, "leader-elect-resource-name")
	for name, s := range subjectsUnderTest(t) {
		t.Run(name, func(t *testing.T) {
			r := loadRBAC(t, s.dir)
			calls := slices.Concat(leaderElectionCalls(namespace, lease), processCalls, tokenRequestCalls(), servingCalls)
			for _, call := range calls {
				if !r.allows(t, s.subject, call) {
					t.Errorf("%s %s may not %s", s.subject.Kind, s.subject.Name, call)
				}
			}
		})
	}
}

func TestMiniKCMMayNotDoWhatItsControllersNeverDo(t *testing.T) {
	denied := []request{
		// The controllers' writes: with --use-service-account-credentials they are made
		// as the controllers' ServiceAccounts, never as the process.
		{verb: "create", resource: "pods", namespace: "app"},
		{verb: "delete", resource: "pods", namespace: "app", name: "web-1-abcde"},
		{verb: "create", group: "apps", resource: "replicasets", namespace: "app"},
		{verb: "update", resource: "endpoints", namespace: "app", name: "web"},
		{verb: "create", group: "discovery.k8s.io", resource: "endpointslices", namespace: "app"},
		// Tokens for any account but the controllers'.
		{verb: "create", resource: "serviceaccounts", subresource: "token", namespace: "kube-system", name: "generic-garbage-collector"},
		{verb: "create", resource: "serviceaccounts", subresource: "token", namespace: "app", name: "mini-kcm-replicaset-controller"},
		// Upstream's controller accounts, which the bootstrap policy grants more than ours.
		{verb: "create", resource: "serviceaccounts", subresource: "token", namespace: "kube-system", name: "replicaset-controller"},
		{verb: "create", resource: "serviceaccounts", subresource: "token", namespace: "kube-system", name: "endpoint-controller"},
		{verb: "get", resource: "secrets", namespace: "kube-system", name: "any"},
		{verb: "list", resource: "secrets"},
		{verb: "watch", resource: "secrets"},
		{verb: "delete", group: "apps", resource: "deployments", namespace: "app", name: "web"},
		{verb: "create", group: "apps", resource: "deployments", namespace: "app"},
		{verb: "update", resource: "pods", namespace: "app", name: "web-1-abcde"},
		{verb: "create", resource: "pods", subresource: "exec", namespace: "app", name: "web-1-abcde"},
		{verb: "update", resource: "services", namespace: "app", name: "web"},
		{verb: "create", resource: "serviceaccounts", subresource: "token", namespace: "kube-system", name: "mini-kcm"},
		{verb: "get", resource: "configmaps", namespace: "kube-system", name: "kubeadm-config"},
		{verb: "update", group: "apps", resource: "statefulsets", namespace: "kube-system", name: "mini-kcm"},
		{verb: "delete", resource: "events", namespace: "app", name: "web.17d2"},
		// The EndpointSlice controller writes slices one by one, and never touches nodes.
		{verb: "deletecollection", group: "discovery.k8s.io", resource: "endpointslices", namespace: "app"},
		{verb: "patch", group: "discovery.k8s.io", resource: "endpointslices", namespace: "app", name: "web-abcde"},
		{verb: "patch", resource: "nodes", name: "node-1"},
		// Other components' locks: readable or writable, a bug could take them over.
		{verb: "get", group: "coordination.k8s.io", resource: "leases", namespace: "kube-system", name: "kube-controller-manager"},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: "kube-system", name: "kube-controller-manager"},
		{verb: "delete", group: "coordination.k8s.io", resource: "leases", namespace: "kube-system", name: "mini-kube-controller-manager"},
		{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: "default"},
		{verb: "escalate", group: "rbac.authorization.k8s.io", resource: "clusterroles", name: "cluster-admin"},
		{verb: "bind", group: "rbac.authorization.k8s.io", resource: "clusterroles", name: "cluster-admin"},
		{verb: "impersonate", resource: "users", name: "admin"},
	}
	for name, s := range subjectsUnderTest(t) {
		t.Run(name, func(t *testing.T) {
			r := loadRBAC(t, s.dir)
			for _, call := range denied {
				if r.allows(t, s.subject, call) {
					t.Errorf("%s %s may %s, which no controller needs", s.subject.Kind, s.subject.Name, call)
				}
			}
		})
	}
}

// servingCalls are the calls of secure serving's delegated authentication and
// authorization (k8s.io/apiserver's delegating options, as kube-controller-manager's).
var servingCalls = []request{
	{verb: "create", group: "authentication.k8s.io", resource: "tokenreviews"},
	{verb: "create", group: "authorization.k8s.io", resource: "subjectaccessreviews"},
	{verb: "get", resource: "configmaps", namespace: "kube-system", name: "extension-apiserver-authentication"},
	{verb: "list", resource: "configmaps", namespace: "kube-system", name: "extension-apiserver-authentication"},
	{verb: "watch", resource: "configmaps", namespace: "kube-system", name: "extension-apiserver-authentication"},
}

// isMetricsReader tells the one non-resource rule the manifests ship: get on /metrics,
// in the ClusterRole for scrapers, which no binding of these manifests grants mini-kcm.
func isMetricsReader(owner string, rule rbacv1.PolicyRule) bool {
	return owner == "ClusterRole mini-kcm:metrics-reader" && slices.Equal(rule.NonResourceURLs, []string{"/metrics"}) &&
		slices.Equal(rule.Verbs, []string{"get"})
}

func TestRulesNameNoWildcardNoSecretAndNoNonResourceURL(t *testing.T) {
	r := loadRBAC(t, ".")
	check := func(owner string, rules []rbacv1.PolicyRule) {
		for _, rule := range rules {
			for _, v := range slices.Concat(rule.Verbs, rule.APIGroups, rule.Resources, rule.ResourceNames) {
				if strings.Contains(v, "*") {
					t.Errorf("%s: wildcard %q in %+v", owner, v, rule)
				}
			}
			if slices.ContainsFunc(rule.Resources, func(res string) bool { return strings.HasPrefix(res, "secrets") }) {
				t.Errorf("%s grants access to secrets: %+v", owner, rule)
			}
			if len(rule.NonResourceURLs) > 0 && !isMetricsReader(owner, rule) {
				t.Errorf("%s grants non-resource URLs %v (system:public-info-viewer already covers /healthz and /version)", owner, rule.NonResourceURLs)
			}
			// A create names its object in the URL only on a subresource (serviceaccounts/token).
			topLevel := slices.ContainsFunc(rule.Resources, func(res string) bool { return !strings.Contains(res, "/") })
			if len(rule.ResourceNames) > 0 && slices.Contains(rule.Verbs, "create") && topLevel {
				t.Errorf("%s: a create rule with resourceNames never matches (the name is unknown at authorization time): %+v", owner, rule)
			}
		}
	}
	for name, cr := range r.clusterRoles {
		if cr.AggregationRule != nil {
			t.Errorf("ClusterRole %s aggregates: its rules would depend on kube-controller-manager's aggregation controller", name)
		}
		check("ClusterRole "+name, cr.Rules)
	}
	for name, role := range r.roles {
		check("Role "+name, role.Rules)
	}
}

func TestLeaseRulesAreLimitedToTheLeaseOfTheFlags(t *testing.T) {
	m := loadKustomization(t, ".")
	container := only[*appsv1.StatefulSet](t, m).Spec.Template.Spec.Containers[0]
	namespace := mustFlag(t, container, "leader-elect-resource-namespace")
	lease := mustFlag(t, container, "leader-elect-resource-name")
	r := loadRBAC(t, ".")

	for name, cr := range r.clusterRoles {
		for _, rule := range cr.Rules {
			if slices.Contains(rule.Resources, "leases") {
				t.Errorf("ClusterRole %s grants leases cluster-wide; leader election needs one Role in %s", name, namespace)
			}
		}
	}
	role, ok := r.roles[namespace+"/mini-kcm:leader-election"]
	if !ok {
		t.Fatalf("no Role mini-kcm:leader-election in %s, the namespace of --leader-elect-resource-namespace", namespace)
	}
	for _, rule := range role.Rules {
		if !slices.Contains(rule.Resources, "leases") {
			t.Errorf("Role %s grants more than leases: %+v", role.Name, rule)
		}
		if slices.ContainsFunc(rule.Verbs, func(v string) bool { return v != "create" }) &&
			!slices.Equal(rule.ResourceNames, []string{lease}) {
			t.Errorf("Role %s: rule %+v must be limited to resourceNames [%s]", role.Name, rule, lease)
		}
	}
}

// Each controller's ServiceAccount may make its controller's calls and none of the
// writes only another controller makes: the deployment controller cannot create pods,
// the ReplicaSet controller cannot create ReplicaSets, the endpoints controller neither.
func TestEachControllerServiceAccountMayWriteOnlyWhatItsControllerWrites(t *testing.T) {
	r := loadRBAC(t, ".")
	for controller, account := range controllerServiceAccounts {
		subject := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: account, Namespace: "kube-system"}
		for _, call := range controllerCalls[controller] {
			if !r.allows(t, subject, call) {
				t.Errorf("%s: ServiceAccount %s may not %s", controller, account, call)
			}
		}
		for other, calls := range controllerCalls {
			if other == controller {
				continue
			}
			for _, call := range calls {
				if r.allows(t, subject, call) && !rulesAllow(r.clusterRoles["mini-kcm:"+controller].Rules, call) {
					t.Errorf("%s: ServiceAccount %s may %s, which only %s does", controller, account, call, other)
				}
			}
		}
		for _, call := range processCalls {
			if call.verb == "list" || call.verb == "watch" {
				if r.allows(t, subject, call) {
					t.Errorf("%s: ServiceAccount %s may %s; only the shared informers list and watch, as the process", controller, account, call)
				}
			}
		}
	}
}

// Every controller ServiceAccount deploy/rbac/ ships is one the process may request
// tokens for, and no other: adding a controller's file without its token grant would
// fail its start, a grant without a file would be a token for an account nobody bound.
func TestTokenRequestsCoverExactlyTheControllersServiceAccounts(t *testing.T) {
	m := loadKustomization(t, ".")
	var shipped []string
	for _, sa := range all[*corev1.ServiceAccount](m) {
		if sa.Name != "mini-kcm" {
			shipped = append(shipped, sa.Name)
		}
	}
	var want []string
	for _, account := range controllerServiceAccounts {
		want = append(want, account)
	}
	slices.Sort(shipped)
	slices.Sort(want)
	if !slices.Equal(shipped, want) {
		t.Errorf("deploy/ ships ServiceAccounts %v besides mini-kcm, want the controllers' %v", shipped, want)
	}
	r := loadRBAC(t, ".")
	role, ok := r.roles["kube-system/mini-kcm:token-requests"]
	if !ok {
		t.Fatal("no Role kube-system/mini-kcm:token-requests")
	}
	var granted []string
	for _, rule := range role.Rules {
		granted = append(granted, rule.ResourceNames...)
	}
	slices.Sort(granted)
	if !slices.Equal(granted, want) {
		t.Errorf("mini-kcm:token-requests grants tokens for %v, want exactly the controllers' ServiceAccounts %v", granted, want)
	}
}

// The static pod's certificate user carries the "system:" prefix, as kubeadm's
// system:kube-controller-manager does: Kubernetes reserves it for its own components,
// outside the names an identity provider's users are mapped to, so that no login
// inherits the user's grants (the token requests of the four controllers'
// ServiceAccounts among them), as a plain "mini-kcm" could. Every user the install binds
// is so named, and the README's command issues the certificate for it.
func TestTheStaticPodsUserIsOneNoTokenAuthenticatorCanName(t *testing.T) {
	var users []string
	for _, b := range all[*rbacv1.ClusterRoleBinding](loadKustomization(t, "static-pod")) {
		for _, s := range b.Subjects {
			if s.Kind == rbacv1.UserKind {
				users = append(users, s.Name)
				if !strings.HasPrefix(s.Name, "system:") {
					t.Errorf("ClusterRoleBinding %s binds the user %q, which a token authenticator may produce; want a system: name", b.Name, s.Name)
				}
			}
		}
	}
	for _, b := range all[*rbacv1.RoleBinding](loadKustomization(t, "static-pod")) {
		for _, s := range b.Subjects {
			if s.Kind == rbacv1.UserKind && !strings.HasPrefix(s.Name, "system:") {
				t.Errorf("RoleBinding %s/%s binds the user %q, which a token authenticator may produce; want a system: name", b.Namespace, b.Name, s.Name)
			}
		}
	}
	if len(users) == 0 {
		t.Fatal("deploy/static-pod/ binds no user: the test proves nothing")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := "--client-name=" + users[0]; !strings.Contains(string(readme), want) {
		t.Errorf("deploy/README.md does not issue the static pod's certificate for its user (%s)", want)
	}
}
