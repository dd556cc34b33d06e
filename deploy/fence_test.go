package deploy

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"

	"github.com/mini-kcm/mini-kcm/leaderelection"
)

// fencePolicy returns the fence's policy and binding as deploy/ applies them.
func fencePolicy(t *testing.T, dir string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	m := loadKustomization(t, dir)
	var policy *admissionregistrationv1.ValidatingAdmissionPolicy
	var binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	for _, p := range all[*admissionregistrationv1.ValidatingAdmissionPolicy](m) {
		if p.Name == leaderelection.FencePolicyName {
			policy = p
		}
	}
	for _, b := range all[*admissionregistrationv1.ValidatingAdmissionPolicyBinding](m) {
		if b.Spec.PolicyName == leaderelection.FencePolicyName {
			if binding != nil {
				t.Fatalf("deploy/%s binds %s twice", dir, leaderelection.FencePolicyName)
			}
			binding = b
		}
	}
	if policy == nil || binding == nil {
		t.Fatalf("deploy/%s has no ValidatingAdmissionPolicy %s and its binding", dir, leaderelection.FencePolicyName)
	}
	return policy, binding
}

// operationOf maps an RBAC verb to the admission operation the apiserver checks.
var operationOf = map[string]admissionregistrationv1.OperationType{
	"create": admissionregistrationv1.Create, "update": admissionregistrationv1.Update,
	"patch": admissionregistrationv1.Update, "delete": admissionregistrationv1.Delete,
	"deletecollection": admissionregistrationv1.Delete,
}

// policyMatches reports whether the policy's rules match op on group/resource.
func policyMatches(p *admissionregistrationv1.ValidatingAdmissionPolicy, group, resource string, op admissionregistrationv1.OperationType) bool {
	for _, rule := range p.Spec.MatchConstraints.ResourceRules {
		if slices.Contains(rule.APIGroups, group) && slices.Contains(rule.Resources, resource) && slices.Contains(rule.Operations, op) {
			return true
		}
	}
	return false
}

// The fence covers every write a controller's role allows, derived from
// rbac/*-controller.yaml, and nothing else: events, Leases, token requests and reviews
// must pass, whoever holds the Lease.
func TestFencePolicyCoversEveryWriteOfTheControllersAndNothingElse(t *testing.T) {
	policy, _ := fencePolicy(t, ".")
	r := loadRBAC(t, ".")
	written := map[string]bool{}
	for controller := range controllerServiceAccounts {
		role, ok := r.clusterRoles["mini-kcm:"+controller]
		if !ok {
			t.Fatalf("no ClusterRole mini-kcm:%s", controller)
		}
		for _, rule := range role.Rules {
			for _, resource := range rule.Resources {
				// Not a request: OwnerReferencesPermissionEnforcement checks it on the
				// create of the owned object, which the policy fences.
				if strings.HasSuffix(resource, "/finalizers") {
					continue
				}
				for _, verb := range rule.Verbs {
					op, isWrite := operationOf[verb]
					if !isWrite {
						continue
					}
					for _, group := range rule.APIGroups {
						written[group+"/"+resource] = true
						if !policyMatches(policy, group, resource, op) {
							t.Errorf("%s may %s %s.%s, which the fence policy does not match", controller, verb, resource, group)
						}
					}
				}
			}
		}
	}
	for _, rule := range policy.Spec.MatchConstraints.ResourceRules {
		for _, group := range rule.APIGroups {
			for _, resource := range rule.Resources {
				if !written[group+"/"+resource] {
					t.Errorf("the fence policy matches %s.%s, which no controller writes", resource, group)
				}
			}
		}
	}
	for _, never := range []struct{ group, resource string }{
		{"", "events"}, {"events.k8s.io", "events"}, {"coordination.k8s.io", "leases"},
		{"", "serviceaccounts/token"}, {"authentication.k8s.io", "tokenreviews"},
		{"authentication.k8s.io", "selfsubjectreviews"}, {"authorization.k8s.io", "subjectaccessreviews"},
	} {
		if policyMatches(policy, never.group, never.resource, admissionregistrationv1.Create) {
			t.Errorf("the fence policy matches %s.%s, which must never be fenced", never.resource, never.group)
		}
	}
}

// The policy applies to mini-kcm's identities, by name, and to no one else: the replicas'
// ServiceAccount, the static pod's user and each controller's ServiceAccount.
func TestFencePolicyMatchesExactlyMiniKCMsIdentities(t *testing.T) {
	policy, _ := fencePolicy(t, ".")
	var identities string
	for _, c := range policy.Spec.MatchConditions {
		if c.Name == "mini-kcm-identities" {
			identities = c.Expression
		}
	}
	if !strings.HasPrefix(identities, "request.userInfo.username in [") {
		t.Fatalf("matchCondition mini-kcm-identities = %q, want request.userInfo.username in [...]: a replica that "+
			"sends no extra must be matched too", identities)
	}
	var got []string
	for _, m := range regexp.MustCompile(`'([^']*)'`).FindAllStringSubmatch(identities, -1) {
		got = append(got, m[1])
	}
	sts := only[*appsv1.StatefulSet](t, loadKustomization(t, "."))
	want := []string{serviceaccount.MakeUsername(sts.Namespace, sts.Spec.Template.Spec.ServiceAccountName), "system:mini-kcm"}
	for _, account := range controllerServiceAccounts {
		want = append(want, serviceaccount.MakeUsername("kube-system", account))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the fence policy matches users %v, want mini-kcm's identities %v", got, want)
	}
	if len(policy.Spec.MatchConditions) != 1 {
		t.Errorf("the fence policy has %d match conditions, want only mini-kcm-identities: a condition on the extra "+
			"would let a replica that does not send it through", len(policy.Spec.MatchConditions))
	}
}

// The policy compares the extra mini-kcm sends with the Lease of the replicas' flags,
// never refuses the writes of users it does not fence, and is named as mini-kcm says.
func TestFencePolicyComparesTheHolderWithTheLeaseOfTheFlagsAndRefusesNobodyElse(t *testing.T) {
	for _, dir := range []string{".", "static-pod"} {
		t.Run(dir, func(t *testing.T) {
			policy, binding := fencePolicy(t, dir)
			if policy.Name != leaderelection.FencePolicyName || binding.Spec.PolicyName != policy.Name {
				t.Errorf("policy %q bound by %q, want %q as leaderelection.FencePolicyName says", policy.Name, binding.Spec.PolicyName,
					leaderelection.FencePolicyName)
			}
			if p := policy.Spec.ParamKind; p == nil || p.APIVersion != "coordination.k8s.io/v1" || p.Kind != "Lease" {
				t.Errorf("paramKind = %+v, want coordination.k8s.io/v1 Lease", p)
			}
			// The apiserver resolves the parameter before the match conditions: a failure
			// there, or a missing Lease refused, would refuse every user's writes.
			if fp := policy.Spec.FailurePolicy; fp == nil || *fp != admissionregistrationv1.Ignore {
				t.Errorf("failurePolicy = %v, want Ignore: an error would refuse the writes of every user, not only mini-kcm's", fp)
			}
			if len(policy.Spec.Validations) != 1 || !strings.Contains(policy.Spec.Validations[0].Expression,
				"request.userInfo.extra['"+leaderelection.LeaseHolderExtra+"'] == [params.spec.holderIdentity]") {
				t.Errorf("validations = %+v, want one comparing extra %s with params.spec.holderIdentity", policy.Spec.Validations,
					leaderelection.LeaseHolderExtra)
			}
			if !slices.Equal(binding.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) {
				t.Errorf("validationActions = %v, want [Deny]", binding.Spec.ValidationActions)
			}
			ref := binding.Spec.ParamRef
			if ref == nil || ref.ParameterNotFoundAction == nil || *ref.ParameterNotFoundAction != admissionregistrationv1.AllowAction {
				t.Fatalf("paramRef = %+v, want parameterNotFoundAction Allow: Deny refuses every user's writes until the Lease "+
					"exists, mini-kcm's own pods included, so the Lease would never be created", ref)
			}
			pod := podsUnderTest(t)["statefulset"]
			if dir == "static-pod" {
				pod = podsUnderTest(t)["static pod"]
			}
			args := pod.Containers[0].Args
			namespace, _ := flagValue(args, "leader-elect-resource-namespace")
			lease, _ := flagValue(args, "leader-elect-resource-name")
			if ref.Namespace != namespace || ref.Name != lease || ref.Selector != nil {
				t.Errorf("the binding's parameter is %s/%s, want the Lease of the flags, %s/%s", ref.Namespace, ref.Name, namespace, lease)
			}
			if v, _ := flagValue(args, "leader-elect-apiserver-fence"); v != "true" {
				t.Errorf("the replicas run without --leader-elect-apiserver-fence=true; the policy would refuse all their writes")
			}
			if binding.Spec.MatchResources != nil {
				t.Errorf("the binding narrows the policy (%+v); the fence covers every namespace", binding.Spec.MatchResources)
			}
		})
	}
}

// Each controller's ServiceAccount may impersonate itself with the lease-holder extra,
// and no other user, account, group or extra: an impersonated request gets the
// impersonated user's permissions.
func TestEachControllerServiceAccountMayImpersonateOnlyItselfWithTheHolderExtra(t *testing.T) {
	for _, dir := range []string{".", "static-pod"} {
		t.Run(dir, func(t *testing.T) {
			r := loadRBAC(t, dir)
			holder := request{verb: "impersonate", group: "authentication.k8s.io", resource: "userextras",
				subresource: leaderelection.LeaseHolderExtra, name: "mini-kcm-0_0b6a"}
			for _, account := range slices.Sorted(maps.Values(controllerServiceAccounts)) {
				subject := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: account, Namespace: "kube-system"}
				self := request{verb: "impersonate", resource: "serviceaccounts", namespace: "kube-system", name: account}
				for _, call := range []request{self, holder} {
					if !r.allows(t, subject, call) {
						t.Errorf("ServiceAccount %s may not %s", account, call)
					}
				}
				denied := []request{
					{verb: "impersonate", resource: "serviceaccounts", namespace: "kube-system", name: "mini-kcm"},
					{verb: "impersonate", resource: "serviceaccounts", namespace: "kube-system", name: "generic-garbage-collector"},
					{verb: "impersonate", resource: "serviceaccounts", namespace: "app", name: account},
					{verb: "impersonate", resource: "users", name: "admin"},
					{verb: "impersonate", resource: "users", name: serviceaccount.MakeUsername("kube-system", account)},
					{verb: "impersonate", resource: "groups", name: "system:masters"},
					{verb: "impersonate", group: "authentication.k8s.io", resource: "userextras", subresource: "scopes", name: "any"},
					{verb: "impersonate", group: "authentication.k8s.io", resource: "uids", name: "any"},
				}
				for _, other := range controllerServiceAccounts {
					if other != account {
						denied = append(denied, request{verb: "impersonate", resource: "serviceaccounts", namespace: "kube-system", name: other})
					}
				}
				for _, call := range denied {
					if r.allows(t, subject, call) {
						t.Errorf("ServiceAccount %s may %s; it may impersonate only itself", account, call)
					}
				}
			}
			// The replicas' own identity writes nothing the policy fences.
			for name, s := range subjectsUnderTest(t) {
				if s.dir != dir {
					continue
				}
				if r.allows(t, s.subject, holder) {
					t.Errorf("%s (%s) may impersonate the lease-holder extra, which it never sends", name, s.subject.Name)
				}
			}
		})
	}
}
