package deploy

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"

	"github.com/mini-kcm/mini-kcm/sharding"
)

// leaseScopePolicyName names the policy and binding of lease-scope/.
const leaseScopePolicyName = "mini-kcm-lease-scope"

// leaseScope is an install's lease-scope policy, compiled the way the
// apiserver evaluates it: its match condition and its one validation, over the request
// variable (only the fields the expressions read are set).
type leaseScope struct {
	policy  *admissionregistrationv1.ValidatingAdmissionPolicy
	binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	matches cel.Program
	// validations are each validation's expression and messageExpression, in order.
	validations []struct{ validates, explains cel.Program }
}

func loadLeaseScope(t *testing.T, dir string) leaseScope {
	t.Helper()
	m := loadKustomization(t, dir)
	var ls leaseScope
	for _, p := range all[*admissionregistrationv1.ValidatingAdmissionPolicy](m) {
		if p.Name == leaseScopePolicyName {
			ls.policy = p
		}
	}
	for _, b := range all[*admissionregistrationv1.ValidatingAdmissionPolicyBinding](m) {
		if b.Name == leaseScopePolicyName {
			ls.binding = b
		}
	}
	if ls.policy == nil || ls.binding == nil {
		t.Fatalf("deploy/%s has no ValidatingAdmissionPolicy and binding %s", dir, leaseScopePolicyName)
	}
	if len(ls.policy.Spec.MatchConditions) != 1 || len(ls.policy.Spec.Validations) == 0 {
		t.Fatalf("policy %s: %d match conditions and %d validations, want one and some", ls.policy.Name,
			len(ls.policy.Spec.MatchConditions), len(ls.policy.Spec.Validations))
	}
	env, err := cel.NewEnv(cel.Variable("request", cel.MapType(cel.StringType, cel.DynType)))
	if err != nil {
		t.Fatal(err)
	}
	compile := func(what, expr string) cel.Program {
		ast, issues := env.Compile(expr)
		if issues.Err() != nil {
			t.Fatalf("policy %s: %s %q does not compile: %v", ls.policy.Name, what, expr, issues.Err())
		}
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatal(err)
		}
		return prg
	}
	ls.matches = compile("match condition", ls.policy.Spec.MatchConditions[0].Expression)
	for _, v := range ls.policy.Spec.Validations {
		ls.validations = append(ls.validations, struct{ validates, explains cel.Program }{
			compile("validation", v.Expression), compile("messageExpression", v.MessageExpression)})
	}
	return ls
}

// admits evaluates the policy on a Lease write of user, as the apiserver would once the
// rules matched: it reports whether the write passes, and the refusal's message.
func (ls leaseScope) admits(t *testing.T, user string, op admissionregistrationv1.OperationType, namespace, name string) (bool, string) {
	t.Helper()
	request := map[string]any{
		"operation": string(op), "namespace": namespace, "name": name,
		"userInfo": map[string]any{"username": user},
	}
	eval := func(prg cel.Program) any {
		out, _, err := prg.Eval(map[string]any{"request": request})
		if err != nil {
			t.Fatalf("policy %s on %s %s/%s by %s: %v", ls.policy.Name, op, namespace, name, user, err)
		}
		return out.Value()
	}
	if eval(ls.matches) != true {
		return true, ""
	}
	// The apiserver refuses with the first validation that fails.
	for _, v := range ls.validations {
		if eval(v.validates) != true {
			return false, fmt.Sprint(eval(v.explains))
		}
	}
	return true, ""
}

// leaseScopeInstalls are the installs and the identity their replicas write Leases as:
// the StatefulSet's ServiceAccount, or the static pod's certificate user.
var leaseScopeInstalls = []struct {
	dir string
	// user is the replicas' user name; "" means the StatefulSet's ServiceAccount.
	user string
	// subject is how the install's bindings name that user.
	subject rbacv1.Subject
	// writes are the Lease writes the install's RBAC allows on any Lease name.
	writes []admissionregistrationv1.OperationType
}{
	{dir: ".", subject: rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "mini-kcm", Namespace: "kube-system"},
		writes: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}},
	{dir: "sharded", subject: rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "mini-kcm", Namespace: "kube-system"},
		writes: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete}},
	{dir: "static-pod", user: "system:mini-kcm", subject: rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "system:mini-kcm"},
		writes: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}},
}

// Every install keeps its replicas to their own Leases: every Lease write the single
// leader and the shard protocol make (the names of --leader-elect-resource-name) passes
// the lease-scope policy, but for deletes, which it allows of membership Leases only
// (the others are the write fence's parameters), and a write of any other Lease that the install's RBAC allows
// (a create of any name in kube-system, for the sharded Role an update and delete too)
// is refused, kube-controller-manager's and kube-scheduler's first, whether or not that
// Lease exists yet. Users other than the replicas' are not the policy's business.
func TestEveryInstallKeepsItsReplicasToTheirOwnLeases(t *testing.T) {
	sts := only[*appsv1.StatefulSet](t, loadKustomization(t, "sharded"))
	container := sts.Spec.Template.Spec.Containers[0]
	namespace := mustFlag(t, container, "leader-elect-resource-namespace")
	lease := mustFlag(t, container, "leader-elect-resource-name")
	static := podsUnderTest(t)["static pod"].Containers[0]
	if mustFlag(t, static, "leader-elect-resource-namespace") != namespace || mustFlag(t, static, "leader-elect-resource-name") != lease {
		t.Fatalf("the static pod's Lease is not the StatefulSet's %s/%s: the policy names one Lease", namespace, lease)
	}
	writes := []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update,
		admissionregistrationv1.Delete}
	own := []string{lease, sharding.PlanLeaseName(lease), sharding.MemberLeaseName(lease, "mini-kcm-0_0b6a"),
		sharding.MemberLeaseName(lease, "mini-kcm-2_ffff")}
	for i := range 64 {
		own = append(own, sharding.ShardLeaseName(lease, i))
	}

	for _, install := range leaseScopeInstalls {
		t.Run(install.dir, func(t *testing.T) {
			ls := loadLeaseScope(t, install.dir)
			user := install.user
			if user == "" {
				user = serviceaccount.MakeUsername(sts.Namespace, sts.Spec.Template.Spec.ServiceAccountName)
			}
			for _, name := range own {
				for _, op := range writes {
					ok, msg := ls.admits(t, user, op, namespace, name)
					// Deletes of the fence's parameters (the base, plan and shard
					// Leases) are refused: only membership Leases are ever deleted.
					member := strings.HasPrefix(name, lease+"-member-")
					switch {
					case op == admissionregistrationv1.Delete && !member && ok:
						t.Errorf("the lease-scope policy lets %s delete Lease %s/%s, a parameter of the write fence", user, namespace, name)
					case op == admissionregistrationv1.Delete && !member && !strings.Contains(msg, "membership Leases"):
						t.Errorf("the refusal of a delete of %s/%s says %q; want it to name what may be deleted", namespace, name, msg)
					case (op != admissionregistrationv1.Delete || member) && !ok:
						t.Errorf("the lease-scope policy refuses %s of Lease %s/%s, which the replicas need: %s", op, namespace, name, msg)
					}
				}
			}
			r := loadRBAC(t, install.dir)
			for _, name := range []string{"kube-controller-manager", "kube-scheduler", "cloud-controller-manager",
				"apiserver-7xq2vbmz4f5ygbdoxqczpszg3u", lease + "x", "x-" + lease, ""} {
				for _, op := range writes {
					verb := strings.ToLower(string(op))
					allowed := r.allows(t, install.subject, request{verb: verb, group: "coordination.k8s.io", resource: "leases", namespace: namespace, name: name})
					if want := slices.Contains(install.writes, op); allowed != want {
						t.Errorf("the RBAC of deploy/%s allows %s of Lease %s/%q: %v, want %v", install.dir, verb, namespace, name, allowed, want)
					}
					ok, msg := ls.admits(t, user, op, namespace, name)
					if ok {
						t.Errorf("the lease-scope policy lets %s %s Lease %s/%q", user, op, namespace, name)
						continue
					}
					if !strings.Contains(msg, user) || !strings.Contains(msg, namespace+"/"+name) || !strings.Contains(msg, lease) {
						t.Errorf("the refusal of %s %s/%q says %q; want the user, the Lease and the names it may write", op, namespace, name, msg)
					}
				}
			}
			for _, other := range []string{serviceaccount.MakeUsername("kube-system", "mini-kcm-replicaset-controller"),
				"system:kube-controller-manager", "system:kube-scheduler", "kubernetes-admin", "mini-kcm-other"} {
				if ok, msg := ls.admits(t, other, admissionregistrationv1.Update, namespace, "kube-controller-manager"); !ok {
					t.Errorf("the lease-scope policy refuses a write of %s, which it must not judge: %s", other, msg)
				}
			}
		})
	}
}

// The policy matches every Lease write and nothing else, fails closed (it judges
// mini-kcm's replicas only, so that refuses no one else), and is bound cluster-wide
// with Deny.
func TestLeaseScopePolicyMatchesEveryLeaseWriteAndDenies(t *testing.T) {
	ls := loadLeaseScope(t, ".")
	for _, op := range []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update,
		admissionregistrationv1.Delete} {
		if !policyMatches(ls.policy, "coordination.k8s.io", "leases", op) {
			t.Errorf("the lease-scope policy does not match %s of leases", op)
		}
	}
	for _, rule := range ls.policy.Spec.MatchConstraints.ResourceRules {
		if !slices.Equal(rule.APIGroups, []string{"coordination.k8s.io"}) || !slices.Equal(rule.Resources, []string{"leases"}) {
			t.Errorf("the lease-scope policy matches %v of %v; want leases.coordination.k8s.io only", rule.Resources, rule.APIGroups)
		}
	}
	if fp := ls.policy.Spec.FailurePolicy; fp == nil || *fp != admissionregistrationv1.Fail {
		t.Errorf("failurePolicy = %v, want Fail: an error must not let the replicas write other Leases", fp)
	}
	if ls.policy.Spec.ParamKind != nil {
		t.Errorf("paramKind = %+v, want none: the names are fixed by the install", ls.policy.Spec.ParamKind)
	}
	b := ls.binding.Spec
	if b.PolicyName != ls.policy.Name || b.ParamRef != nil || b.MatchResources != nil ||
		!slices.Equal(b.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) {
		t.Errorf("binding %s = %+v; want policy %s, no parameter, no narrowing, validationActions [Deny]", ls.binding.Name, b, ls.policy.Name)
	}
}
