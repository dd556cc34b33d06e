package controlplane

import (
	"bufio"
	"bytes"
	"fmt"
	"os"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// The sharded install's fence (deploy/sharded/fence/), read from the repository as
// deploy/fence/ is (see leasefence.go), with the same two replacements: the users it
// applies to, and which Leases the bindings take, for which namespaces.
const (
	shardFencePolicyFile   = "deploy/sharded/fence/policy.yaml"
	shardFenceBindingsFile = "deploy/sharded/fence/bindings.yaml"
)

// ShardFencePolicy reads deploy/sharded/fence/policy.yaml; with identities set, that
// CEL expression replaces the condition that selects mini-kcm's users. It keeps the
// policy's name, which a sharded replica looks its bindings up by.
func ShardFencePolicy(identities string) (*admissionregistrationv1.ValidatingAdmissionPolicy, error) {
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	if err := decodeRepoFile(shardFencePolicyFile, policy); err != nil {
		return nil, err
	}
	if err := selectIdentities(policy, shardFencePolicyFile, identities); err != nil {
		return nil, err
	}
	return policy, nil
}

// ShardFenceBindings reads the first binding of deploy/sharded/fence/bindings.yaml and
// returns one like it per shard Lease leaseNamespace/leaseName-0 … -(shards-1), named
// after prefix, for the objects of namespaces only (nil: of every namespace, as
// deploy/sharded/ binds them).
func ShardFenceBindings(prefix, leaseNamespace, leaseName string, shards int, namespaces []string) ([]*admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	path, err := repoFile(shardFenceBindingsFile)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", shardFenceBindingsFile, err)
	}
	doc, err := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data))).Read()
	if err != nil {
		return nil, fmt.Errorf("reading the first binding of %s: %w", shardFenceBindingsFile, err)
	}
	obj, _, err := strictDecoder.Decode(doc, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("decoding %s: %w", shardFenceBindingsFile, err)
	}
	template, ok := obj.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
	if !ok || template.Spec.ParamRef == nil {
		return nil, fmt.Errorf("%s starts with a %T, want a ValidatingAdmissionPolicyBinding with a paramRef", shardFenceBindingsFile, obj)
	}
	var bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
	for i := range shards {
		b := template.DeepCopy()
		b.Name = fmt.Sprintf("%s-%d", prefix, i)
		b.Spec.ParamRef.Namespace = leaseNamespace
		b.Spec.ParamRef.Name = fmt.Sprintf("%s-%d", leaseName, i)
		if namespaces != nil {
			b.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{
					Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: namespaces,
				}},
			}}
		}
		bindings = append(bindings, b)
	}
	return bindings, nil
}
