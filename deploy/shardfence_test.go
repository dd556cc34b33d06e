package deploy

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/mini-kcm/mini-kcm/leaderelection"
)

// The sharded install's fence binds its policy, named as mini-kcm says, once to every
// shard Lease the replicas elect on, as their flags say: the Lease of
// --leader-elect-resource-namespace and -name with each shard's number appended, for
// --shards. A replica started with --leader-elect-apiserver-fence checks this at
// start; this test catches the drift before a rollout does.
func TestTheShardedFenceBindsEveryShardLeaseOfTheReplicas(t *testing.T) {
	m := loadKustomization(t, "sharded")
	c := only[*appsv1.StatefulSet](t, m).Spec.Template.Spec.Containers[0]
	namespace := mustFlag(t, c, "leader-elect-resource-namespace")
	lease := mustFlag(t, c, "leader-elect-resource-name")
	shards, err := strconv.Atoi(mustFlag(t, c, "shards"))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := flagValue(c.Args, "leader-elect-apiserver-fence"); v != "true" {
		t.Errorf("the sharded replicas run with --leader-elect-apiserver-fence=%s, want true: the policy refuses writes without the extras", v)
	}
	policies := all[*admissionregistrationv1.ValidatingAdmissionPolicy](m)
	if !slices.ContainsFunc(policies, func(p *admissionregistrationv1.ValidatingAdmissionPolicy) bool {
		return p.Name == leaderelection.ShardFencePolicyName && p.Spec.FailurePolicy != nil && *p.Spec.FailurePolicy == admissionregistrationv1.Ignore
	}) {
		t.Errorf("the sharded install has no policy %s with failurePolicy Ignore", leaderelection.ShardFencePolicyName)
	}
	var bound []string
	for _, b := range all[*admissionregistrationv1.ValidatingAdmissionPolicyBinding](m) {
		if b.Spec.PolicyName != leaderelection.ShardFencePolicyName {
			continue
		}
		ref := b.Spec.ParamRef
		if ref == nil || ref.ParameterNotFoundAction == nil || *ref.ParameterNotFoundAction != admissionregistrationv1.AllowAction ||
			b.Spec.MatchResources != nil || !slices.Equal(b.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) {
			t.Errorf("binding %s: %+v, want a Lease parameter that admits while missing, Deny, every namespace", b.Name, b.Spec)
			continue
		}
		bound = append(bound, ref.Namespace+"/"+ref.Name)
	}
	var want []string
	for i := range shards {
		want = append(want, fmt.Sprintf("%s/%s-%d", namespace, lease, i))
	}
	slices.Sort(bound)
	slices.Sort(want)
	if !slices.Equal(bound, want) {
		t.Errorf("the sharded fence binds %v, want exactly the shard Leases %v (make generate)", bound, want)
	}
	// The policy compares the Lease the write names, as namespace/name.
	for _, p := range policies {
		if p.Name == leaderelection.ShardFencePolicyName &&
			!strings.Contains(p.Spec.Validations[1].Expression, "request.userInfo.extra['"+leaderelection.ShardLeaseExtra+"'] != [params.metadata.namespace + '/' + params.metadata.name]") {
			t.Errorf("the sharded fence does not compare %s with its Lease parameter: %s", leaderelection.ShardLeaseExtra, p.Spec.Validations[1].Expression)
		}
	}
}

// Under the sharded fence each controller's account may impersonate itself with both
// extras, and the replicas' own account may list the bindings it checks at start.
func TestShardedReplicasMaySendTheShardLeaseAndCheckTheBindings(t *testing.T) {
	r := loadRBAC(t, "sharded")
	for _, account := range slices.Sorted(maps.Values(controllerServiceAccounts)) {
		subject := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: account, Namespace: "kube-system"}
		for _, call := range []request{
			{verb: "impersonate", resource: "serviceaccounts", namespace: "kube-system", name: account},
			{verb: "impersonate", group: "authentication.k8s.io", resource: "userextras", subresource: leaderelection.LeaseHolderExtra, name: "mini-kcm-0_0b6a"},
			{verb: "impersonate", group: "authentication.k8s.io", resource: "userextras", subresource: leaderelection.ShardLeaseExtra, name: "kube-system/mini-kube-controller-manager-3"},
		} {
			if !r.allows(t, subject, call) {
				t.Errorf("ServiceAccount %s may not %s", account, call)
			}
		}
	}
	sts := only[*appsv1.StatefulSet](t, loadKustomization(t, "sharded"))
	replicas := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: sts.Spec.Template.Spec.ServiceAccountName, Namespace: sts.Namespace}
	list := request{verb: "list", group: "admissionregistration.k8s.io", resource: "validatingadmissionpolicybindings"}
	if !r.allows(t, replicas, list) {
		t.Errorf("the replicas' ServiceAccount %s may not %s, which it does at start", replicas.Name, list)
	}
}
