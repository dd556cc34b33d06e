package rollout

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"

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
	t1 := template1.DeepCopy()
	t2 := template2.DeepCopy()
	delete(t1.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	delete(t2.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	return equality.Semantic.DeepEqual(t1, t2)
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
