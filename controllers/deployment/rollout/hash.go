package rollout

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/dump"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ComputeHash returns the pod-template-hash of a template: FNV-32a over the template's
// deterministic dump, followed by the collision count (when set) as a little-endian
// uint32 in 8 bytes, encoded with the API's "safe" alphabet. It must match upstream bit
// for bit, because a different hash for the same template would make a restarted or
// replaced controller create a second ReplicaSet for an unchanged Deployment.
func ComputeHash(template *corev1.PodTemplateSpec, collisionCount *int32) string {
	hasher := fnv.New32a()
	// dump.ForHash is deprecated in favour of k8s.io/utils/dump.ForHash, which it wraps
	// unchanged; k8s.io/utils is not one of our direct dependencies.
	//lint:ignore SA1019 identical output to the replacement, see above.
	fmt.Fprintf(hasher, "%v", dump.ForHash(*template))
	if collisionCount != nil {
		collisionCountBytes := make([]byte, 8)
		binary.LittleEndian.PutUint32(collisionCountBytes, uint32(*collisionCount))
		hasher.Write(collisionCountBytes)
	}
	return rand.SafeEncodeString(fmt.Sprint(hasher.Sum32()))
}

// EqualIgnoreHash reports whether two templates are semantically equal once the
// pod-template-hash label is removed from both. The label is ignored because a
// Deployment's template never carries it, and because the hash of an unchanged template
// can change when the API types gain fields.
func EqualIgnoreHash(template1, template2 *corev1.PodTemplateSpec) bool {
	// A Deployment's template is compared with every ReplicaSet of the Deployment,
	// several times per sync, and the reflective comparison below dominated the
	// controller's CPU. Most pairs are a template and an older one that differs in a
	// label, an image or an environment variable, which plain string comparisons tell.
	if differInStrings(template1, template2) {
		return false
	}
	// Equal templates, the other common case, mostly have equal encodings too.
	if sameEncoding(template1, template2) {
		return true
	}
	t1 := template1.DeepCopy()
	t2 := template2.DeepCopy()
	delete(t1.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	delete(t2.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	return equality.Semantic.DeepEqual(t1, t2)
}

// differInStrings reports whether two templates certainly differ, once the hash label
// is ignored: in their other labels, their annotations, or the names, images, commands,
// arguments or literal environment values of their containers. It compares only string
// fields and lengths, which semantic equality compares exactly (with nil and empty
// slices and maps equal), so it never finds equal templates different; the differences
// it cannot see are left to the deep comparison.
func differInStrings(t1, t2 *corev1.PodTemplateSpec) bool {
	return !stringMapsEqual(t1.Labels, t2.Labels, appsv1.DefaultDeploymentUniqueLabelKey) ||
		!stringMapsEqual(t1.Annotations, t2.Annotations, "") ||
		containersDiffer(t1.Spec.InitContainers, t2.Spec.InitContainers) ||
		containersDiffer(t1.Spec.Containers, t2.Spec.Containers)
}

// sameEncoding reports whether two templates, hash label removed, have the same
// protobuf encoding, which makes them semantically equal: every field of a pod template
// is encoded, maps in key order, quantities in their canonical form and times as
// instants, and what the encoding does not tell apart (nil and empty lists and maps)
// semantic equality does not either. Semantically equal templates may still encode
// differently (a quantity spelled 1Gi or 1073741824), so false means "compare deeply".
func sameEncoding(t1, t2 *corev1.PodTemplateSpec) bool {
	b1, err := withoutHashLabel(t1).Marshal()
	if err != nil {
		return false
	}
	b2, err := withoutHashLabel(t2).Marshal()
	return err == nil && bytes.Equal(b1, b2)
}

// withoutHashLabel returns a shallow copy of t whose labels lack the hash label; t
// itself is not modified.
func withoutHashLabel(t *corev1.PodTemplateSpec) *corev1.PodTemplateSpec {
	if _, ok := t.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; !ok {
		return t
	}
	c := *t
	c.Labels = make(map[string]string, len(t.Labels)-1)
	for k, v := range t.Labels {
		if k != appsv1.DefaultDeploymentUniqueLabelKey {
			c.Labels[k] = v
		}
	}
	return &c
}

// stringMapsEqual compares two maps, nil and empty alike, ignoring the key ignore
// (none if empty).
func stringMapsEqual(a, b map[string]string, ignore string) bool {
	size := func(m map[string]string) int {
		if _, ok := m[ignore]; ok && ignore != "" {
			return len(m) - 1
		}
		return len(m)
	}
	if size(a) != size(b) {
		return false
	}
	for k, v := range a {
		if k == ignore && ignore != "" {
			continue
		}
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// containersDiffer reports whether two container lists differ in length or in a
// container's name, image, command, arguments or environment variable names and
// literal values.
func containersDiffer(a, b []corev1.Container) bool {
	if len(a) != len(b) {
		return true
	}
	for i := range a {
		ca, cb := &a[i], &b[i]
		if ca.Name != cb.Name || ca.Image != cb.Image ||
			!slices.Equal(ca.Command, cb.Command) || !slices.Equal(ca.Args, cb.Args) || len(ca.Env) != len(cb.Env) {
			return true
		}
		for j := range ca.Env {
			if ca.Env[j].Name != cb.Env[j].Name || ca.Env[j].Value != cb.Env[j].Value {
				return true
			}
		}
	}
	return false
}

// ReplicaSetName returns "<deployment>-<hash>", truncating the Deployment name so the
// result fits in a DNS-1123 subdomain. The name is deterministic so that a retried create
// hits AlreadyExists instead of creating a duplicate.
func ReplicaSetName(deploymentName, hash string) string {
	const separator = "-"
	maxDeploymentNameLength := validation.DNS1123SubdomainMaxLength - len(separator) - len(hash)
	if len(deploymentName) > maxDeploymentNameLength && maxDeploymentNameLength > 0 {
		deploymentName = deploymentName[:maxDeploymentNameLength]
	}
	return deploymentName + separator + hash
}
