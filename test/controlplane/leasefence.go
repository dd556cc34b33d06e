package controlplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
)

// The apiserver half of mini-kcm's write fence is the ValidatingAdmissionPolicy and
// binding of deploy/fence/, read from the repository so that what e2e tests and
// `make run` install is what operators install. Two things differ by nature outside a
// real installation, and only those are replaced:
//
//   - which users the policy applies to: deploy/ lists mini-kcm's ServiceAccounts and
//     certificate user by name, the local control plane's replicas have other names
//     (the condition named FenceIdentitiesCondition);
//   - which Lease is the parameter, and where: e2e tests elect on a Lease of their own
//     and bind the policy to their own namespace only.
const (
	// FenceIdentitiesCondition is the policy's match condition that selects mini-kcm's
	// users.
	FenceIdentitiesCondition = "mini-kcm-identities"
	fencePolicyFile          = "deploy/fence/policy.yaml"
	fenceBindingFile         = "deploy/fence/binding.yaml"
)

// FencePolicy reads deploy/fence/policy.yaml. With name set, the policy is renamed;
// with identities set, that CEL expression replaces the condition that selects
// mini-kcm's users.
func FencePolicy(name, identities string) (*admissionregistrationv1.ValidatingAdmissionPolicy, error) {
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	if err := decodeRepoFile(fencePolicyFile, policy); err != nil {
		return nil, err
	}
	if name != "" {
		policy.Name = name
	}
	if err := selectIdentities(policy, fencePolicyFile, identities); err != nil {
		return nil, err
	}
	return policy, nil
}

// selectIdentities replaces the match condition FenceIdentitiesCondition of policy, read
// from file, with the CEL expression identities; empty keeps it.
func selectIdentities(policy *admissionregistrationv1.ValidatingAdmissionPolicy, file, identities string) error {
	if identities == "" {
		return nil
	}
	for i := range policy.Spec.MatchConditions {
		if policy.Spec.MatchConditions[i].Name == FenceIdentitiesCondition {
			policy.Spec.MatchConditions[i].Expression = identities
			return nil
		}
	}
	return fmt.Errorf("%s has no match condition %q to select the local replicas' users", file, FenceIdentitiesCondition)
}

// FenceBindingOptions adapt deploy/fence/binding.yaml; empty fields keep its values.
type FenceBindingOptions struct {
	// Name of the binding, and PolicyName of the policy it binds.
	Name, PolicyName string
	// LeaseNamespace and LeaseName locate the Lease whose holder the policy compares.
	LeaseNamespace, LeaseName string
	// Namespace, when set, limits the binding to the objects of that namespace.
	Namespace string
}

// FenceBinding reads deploy/fence/binding.yaml and adapts it with opts.
func FenceBinding(opts FenceBindingOptions) (*admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	if err := decodeRepoFile(fenceBindingFile, binding); err != nil {
		return nil, err
	}
	if binding.Spec.ParamRef == nil {
		return nil, fmt.Errorf("%s has no paramRef", fenceBindingFile)
	}
	set := func(field *string, value string) {
		if value != "" {
			*field = value
		}
	}
	set(&binding.Name, opts.Name)
	set(&binding.Spec.PolicyName, opts.PolicyName)
	set(&binding.Spec.ParamRef.Namespace, opts.LeaseNamespace)
	set(&binding.Spec.ParamRef.Name, opts.LeaseName)
	if opts.Namespace != "" {
		binding.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{"kubernetes.io/metadata.name": opts.Namespace},
		}}
	}
	return binding, nil
}

// InstallFencePolicy creates the policy, or replaces the spec of one of that name.
func InstallFencePolicy(ctx context.Context, client kubernetes.Interface, policy *admissionregistrationv1.ValidatingAdmissionPolicy) error {
	policies := client.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	_, err := policies.Create(ctx, policy, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var existing *admissionregistrationv1.ValidatingAdmissionPolicy
		if existing, err = policies.Get(ctx, policy.Name, metav1.GetOptions{}); err == nil {
			existing.Spec = policy.Spec
			_, err = policies.Update(ctx, existing, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("installing ValidatingAdmissionPolicy %s: %w", policy.Name, err)
	}
	return nil
}

// InstallFenceBinding creates the binding, or replaces the spec of one of that name.
func InstallFenceBinding(ctx context.Context, client kubernetes.Interface, binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding) error {
	bindings := client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	_, err := bindings.Create(ctx, binding, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var existing *admissionregistrationv1.ValidatingAdmissionPolicyBinding
		if existing, err = bindings.Get(ctx, binding.Name, metav1.GetOptions{}); err == nil {
			existing.Spec = binding.Spec
			_, err = bindings.Update(ctx, existing, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("installing ValidatingAdmissionPolicyBinding %s: %w", binding.Name, err)
	}
	return nil
}

// strictDecoder rejects unknown fields, so a manifest this package cannot represent
// fails loudly instead of being installed in part.
var strictDecoder = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

// decodeRepoFile decodes the single object of a file of the repository into into.
func decodeRepoFile(rel string, into any) error {
	path, err := repoFile(rel)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading %s: %w", rel, err)
	}
	obj, _, err := strictDecoder.Decode(data, nil, nil)
	if err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	switch into := into.(type) {
	case *admissionregistrationv1.ValidatingAdmissionPolicy:
		p, ok := obj.(*admissionregistrationv1.ValidatingAdmissionPolicy)
		if !ok {
			return fmt.Errorf("%s holds a %T, want a ValidatingAdmissionPolicy", rel, obj)
		}
		*into = *p
	case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
		b, ok := obj.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
		if !ok {
			return fmt.Errorf("%s holds a %T, want a ValidatingAdmissionPolicyBinding", rel, obj)
		}
		*into = *b
	}
	return nil
}

// repoRoot is the checkout the tests and `make run` run in, which holds deploy/: the
// nearest directory above the working directory whose go.mod is mini-kcm's module.
// (Not this file's build path, which -trimpath, as make test builds, leaves relative.)
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for start := dir; ; {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			isMiniKCMModule(data) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no mini-kcm checkout (a go.mod of module github.com/mini-kcm/mini-kcm) at or above %s: run from the checkout", start)
		}
		dir = parent
	}
}

// isMiniKCMModule says whether a go.mod declares mini-kcm's module.
func isMiniKCMModule(goMod []byte) bool {
	for _, line := range strings.Split(string(goMod), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`) == "github.com/mini-kcm/mini-kcm"
		}
	}
	return false
}

// repoFile is the path of rel (slash-separated) in the checkout.
func repoFile(rel string) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, filepath.FromSlash(rel)), nil
}
