package ha

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// leaseHolderExtra is the user extra a replica would carry on its writes, by
// impersonating itself: the Lease holder identity it believes it is.
const leaseHolderExtra = "mini-kcm.io/lease-holder"

// TestLeasePolicyRejectsWritesOfAReplicaThatNoLongerHoldsTheLease checks the design of
// the apiserver-side fence, which mini-kcm does not wire yet: a ValidatingAdmissionPolicy
// whose parameter is the Lease rejects a write whose user extra
// mini-kcm.io/lease-holder (sent as Impersonate-Extra-mini-kcm.io%2Flease-holder by a
// user that impersonates itself, authorized by `impersonate` on
// userextras/mini-kcm.io/lease-holder) is not the Lease's holder. The test runs two
// such users, a and b, without system:masters, takes the Lease from a to b, and
// measures how long the apiserver still accepts a's writes: its view of the Lease
// comes from a watch and lags the write.
func TestLeasePolicyRejectsWritesOfAReplicaThatNoLongerHoldsTheLease(t *testing.T) {
	f := framework.New(t)
	ctx := f.Context()
	ns := f.Namespace
	admin := f.Client

	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.LeaseNamespace, Name: f.LeaseName},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("holder-a")},
	}
	lease, err := admin.CoordinationV1().Leases(f.LeaseNamespace).Create(ctx, lease, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	installLeasePolicy(t, admin, ns, f.LeaseNamespace, f.LeaseName)

	a := selfImpersonatingClient(t, f, "ha-fence-"+ns[len(ns)-5:]+"-a", "holder-a")
	b := selfImpersonatingClient(t, f, "ha-fence-"+ns[len(ns)-5:]+"-b", "holder-b")
	n := 0
	write := func(c kubernetes.Interface) error {
		n++
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w-%d", n)}}
		_, err := c.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
		return err
	}

	// RBAC and the policy take effect through the apiserver's informers: wait until
	// the policy denies b, which does not hold the Lease, and a may write.
	framework.Eventually(t, time.Minute, func() error {
		if err := write(b); !fencedByPolicy(err) {
			return fmt.Errorf("a write of b, which does not hold the Lease: %v, want denied by the policy", err)
		}
		return write(a)
	})
	if err := write(b); err == nil || !strings.Contains(err.Error(), "which is held by holder-a") {
		t.Errorf("a write of b = %v, want denied naming the holder", err)
	}
	if err := write(admin); err != nil {
		t.Fatalf("a write without the extra: %v, want the policy not to apply", err)
	}

	// b takes over. From when the takeover was written, how long are a's writes still
	// accepted?
	lease.Spec.HolderIdentity = ptr.To("holder-b")
	sent := time.Now()
	if _, err := admin.CoordinationV1().Leases(f.LeaseNamespace).Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	written := time.Now()
	accepted := 0
	var deniedAt time.Time
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		err := write(a)
		if err == nil {
			accepted++
			continue
		}
		if !fencedByPolicy(err) {
			t.Fatalf("a write of a after the takeover: %v", err)
		}
		deniedAt = time.Now()
		break
	}
	if deniedAt.IsZero() {
		t.Fatalf("the apiserver still accepts writes of a 30s after b took the Lease (%d accepted)", accepted)
	}
	framework.Eventually(t, 30*time.Second, func() error { return write(b) })
	t.Logf("HA-NUMBERS lease-policy window: a's writes accepted after the takeover was written=%d, first denial %.3fs after the Lease update returned (%.3fs after it was sent)",
		accepted, deniedAt.Sub(written).Seconds(), deniedAt.Sub(sent).Seconds())
}

// installLeasePolicy installs the policy and its binding for the Lease leaseNS/leaseName,
// limited to namespace ns so that the suite's other tests are not affected, and removes
// them when the test ends.
func installLeasePolicy(t *testing.T, admin kubernetes.Interface, ns, leaseNS, leaseName string) {
	t.Helper()
	ctx := context.Background()
	name := "mini-kcm-lease-fence-" + ns[len(ns)-5:]
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			ParamKind:     &admissionregistrationv1.ParamKind{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{
							admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete,
						},
						Rule: admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*/*"}},
					},
				}},
			},
			// Only writes that say whose Lease term they belong to are checked.
			MatchConditions: []admissionregistrationv1.MatchCondition{{
				Name:       "carries-lease-holder",
				Expression: fmt.Sprintf("%q in request.userInfo.extra", leaseHolderExtra),
			}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf("has(params.spec.holderIdentity) && request.userInfo.extra[%q][0] == params.spec.holderIdentity",
					leaseHolderExtra),
				MessageExpression: fmt.Sprintf("'write fenced by the apiserver: ' + request.userInfo.username + ' writes as holder ' + "+
					"request.userInfo.extra[%q][0] + ' of lease ' + params.metadata.namespace + '/' + params.metadata.name + "+
					"', which is held by ' + (has(params.spec.holderIdentity) ? params.spec.holderIdentity : 'nobody')", leaseHolderExtra),
				Reason: ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: name,
			ParamRef: &admissionregistrationv1.ParamRef{
				Namespace: leaseNS, Name: leaseName,
				// No Lease, no holder: a write claiming to be the holder is denied.
				ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction),
			},
			MatchResources: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			},
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	if _, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, name, metav1.DeleteOptions{})
	})
	if _, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{})
	})
}

// selfImpersonatingClient returns a client for a new user, outside system:masters,
// that impersonates itself with the lease-holder extra set to holder, and grants the
// user exactly that: impersonating its own name and that one extra value, and
// writing ConfigMaps in the test's namespace.
func selfImpersonatingClient(t *testing.T, f *framework.Framework, user, holder string) kubernetes.Interface {
	t.Helper()
	ctx := f.Context()
	kubeconfig, err := f.ControlPlane.AddUser(user)
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"users"}, Verbs: []string{"impersonate"}, ResourceNames: []string{user}},
			{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"userextras/" + leaseHolderExtra},
				Verbs: []string{"impersonate"}, ResourceNames: []string{holder}},
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
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}}},
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

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Extra: map[string][]string{leaseHolderExtra: {holder}}}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// fencedByPolicy reports whether err is the lease policy's denial.
func fencedByPolicy(err error) bool {
	return err != nil && strings.Contains(err.Error(), "write fenced by the apiserver")
}
