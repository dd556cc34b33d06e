package rollout

import (
	"math"

	appsv1 "k8s.io/api/apps/v1"
)

// ReplicaSetProportion returns by how much one active ReplicaSet should change when a
// scaling event distributes toAdd replicas (negative when shrinking) over several
// ReplicaSets, of which added have been handed out already. The share is clamped so
// that the running total never overshoots toAdd; a ReplicaSet of size 0 never grows,
// because proportions of zero are meaningless.
//
// The share also never goes against the direction of the scaling. Upstream lets it:
// when the max-replicas annotation is missing, the fallback base (status.replicas) can
// be stale, and a ReplicaSet would then grow during a scale-down (or shrink during a
// scale-up), to be corrected by the leftover handed to another ReplicaSet.
func ReplicaSetProportion(rs *appsv1.ReplicaSet, d *appsv1.Deployment, toAdd, added int32) int32 {
	if rs == nil || SpecReplicas(rs) == 0 || toAdd == 0 || toAdd == added {
		return 0
	}
	fraction := replicaSetFraction(rs, d)
	allowed := toAdd - added
	if toAdd > 0 {
		return max(min(fraction, allowed), 0)
	}
	return min(max(fraction, allowed), 0)
}

// replicaSetFraction scales the ReplicaSet's size by the ratio of the Deployment's new
// maximum (spec.replicas+maxSurge) to the maximum recorded in its max-replicas
// annotation, and returns the difference, rounded half away from zero like upstream.
// When the annotation is missing or 0 (a third party removed it), the Deployment's
// status.replicas stands in; if that is 0 too, the ReplicaSet is left alone.
func replicaSetFraction(rs *appsv1.ReplicaSet, d *appsv1.Deployment) int32 {
	if DesiredReplicas(d) == 0 {
		return -SpecReplicas(rs)
	}
	deploymentMaxReplicas := int64(DesiredReplicas(d)) + int64(MaxSurge(d))
	maxBeforeScale, ok, _ := nonNegativeInt32Annotation(rs, MaxReplicasAnnotation)
	if !ok || maxBeforeScale == 0 {
		maxBeforeScale = d.Status.Replicas
		if maxBeforeScale == 0 {
			return 0
		}
	}
	// The product is taken in 64 bits; upstream multiplies in int32 and would overflow
	// only for sizes no cluster reaches.
	newSize := float64(int64(SpecReplicas(rs))*deploymentMaxReplicas) / float64(maxBeforeScale)
	return int32(min(math.Round(newSize), math.MaxInt32)) - SpecReplicas(rs)
}
