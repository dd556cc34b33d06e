package controlplane

import (
	"strings"
	"testing"
)

func TestFencePolicyIsDeploysWithOnlyTheIdentitiesReplaced(t *testing.T) {
	deployed, err := FencePolicy("", "")
	if err != nil {
		t.Fatal(err)
	}
	local, err := FencePolicy("local-fence", "'local' in request.userInfo.groups")
	if err != nil {
		t.Fatal(err)
	}
	if local.Name != "local-fence" || deployed.Name != "mini-kcm-lease-fence" {
		t.Errorf("names = %q and %q", local.Name, deployed.Name)
	}
	if got := local.Spec.MatchConditions[0].Expression; got != "'local' in request.userInfo.groups" {
		t.Errorf("identities = %q", got)
	}
	if !strings.Contains(deployed.Spec.MatchConditions[0].Expression, "system:serviceaccount:kube-system:mini-kcm-replicaset-controller") {
		t.Errorf("deploy's identities = %q", deployed.Spec.MatchConditions[0].Expression)
	}
	if local.Spec.Validations[0].Expression != deployed.Spec.Validations[0].Expression ||
		len(local.Spec.MatchConstraints.ResourceRules) != len(deployed.Spec.MatchConstraints.ResourceRules) {
		t.Error("the validations or the matched resources differ from deploy/'s")
	}
}

func TestFenceBindingPointsAtTheGivenLeaseInTheGivenNamespace(t *testing.T) {
	b, err := FenceBinding(FenceBindingOptions{Name: "b", PolicyName: "p", LeaseNamespace: "kube-system", LeaseName: "l", Namespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	ref := b.Spec.ParamRef
	if b.Name != "b" || b.Spec.PolicyName != "p" || ref.Namespace != "kube-system" || ref.Name != "l" ||
		b.Spec.MatchResources.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "ns" {
		t.Errorf("binding = %+v", b)
	}
	if ref.ParameterNotFoundAction == nil || *ref.ParameterNotFoundAction != "Allow" {
		t.Errorf("parameterNotFoundAction = %v, want deploy/'s Allow", ref.ParameterNotFoundAction)
	}
}
