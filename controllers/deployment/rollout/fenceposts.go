package rollout

import (
	"fmt"
	"math"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// DesiredReplicas returns d.spec.replicas. The apiserver always defaults the field, so
// nil only reaches us from hand-built objects; it is read as the API default of 1
// instead of crashing the worker.
func DesiredReplicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// SpecReplicas returns rs.spec.replicas, reading nil as the API default of 1.
func SpecReplicas(rs *appsv1.ReplicaSet) int32 {
	if rs.Spec.Replicas == nil {
		return 1
	}
	return *rs.Spec.Replicas
}

// IsRollingUpdate reports whether the Deployment uses the RollingUpdate strategy.
func IsRollingUpdate(d *appsv1.Deployment) bool {
	return d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType
}

// HasProgressDeadline reports whether the Deployment asks for a Progressing condition:
// progressDeadlineSeconds is set and is not MaxInt32, which means "never time out".
func HasProgressDeadline(d *appsv1.Deployment) bool {
	return d.Spec.ProgressDeadlineSeconds != nil && *d.Spec.ProgressDeadlineSeconds != math.MaxInt32
}

// HasRevisionHistoryLimit reports whether old ReplicaSets are ever cleaned up:
// revisionHistoryLimit is set and is not MaxInt32, which means "keep everything".
func HasRevisionHistoryLimit(d *appsv1.Deployment) bool {
	return d.Spec.RevisionHistoryLimit != nil && *d.Spec.RevisionHistoryLimit != math.MaxInt32
}

// ResolveFenceposts turns maxSurge and maxUnavailable into absolute numbers for the
// given size: surge rounds up, unavailable rounds down, a nil value counts as 0. Both
// are resolved together because when both come out as 0 (say 1% of 10 replicas) no
// rollout could ever make progress; maxUnavailable then becomes 1, on the theory that
// surge may be blocked by quota while removing a pod never is.
func ResolveFenceposts(maxSurge, maxUnavailable *intstr.IntOrString, desired int32) (surge, unavailable int32, err error) {
	s, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(maxSurge, intstr.FromInt32(0)), int(desired), true)
	if err != nil {
		return 0, 0, fmt.Errorf("resolving maxSurge: %w", err)
	}
	u, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(maxUnavailable, intstr.FromInt32(0)), int(desired), false)
	if err != nil {
		return 0, 0, fmt.Errorf("resolving maxUnavailable: %w", err)
	}
	if s == 0 && u == 0 {
		u = 1
	}
	return clampSurge(s, desired), int32(u), nil
}

// clampSurge converts a resolved maxSurge to int32, capped so that desired+surge still
// fits: every caller adds the two, and a percentage of a huge Deployment (200% of
// 2^31-1) would otherwise wrap around to a negative maximum and stall the rollout.
func clampSurge(surge int, desired int32) int32 {
	return int32(min(int64(surge), math.MaxInt32-int64(max(desired, 0))))
}

// rollingParameters returns the Deployment's raw maxSurge and maxUnavailable; a missing
// rollingUpdate block (never stored by the apiserver) reads as both unset.
func rollingParameters(d *appsv1.Deployment) (maxSurge, maxUnavailable *intstr.IntOrString) {
	if d.Spec.Strategy.RollingUpdate == nil {
		return nil, nil
	}
	return d.Spec.Strategy.RollingUpdate.MaxSurge, d.Spec.Strategy.RollingUpdate.MaxUnavailable
}

// MaxSurge returns how many pods a rolling Deployment may run above its size; 0 for
// Recreate. An unparsable value (rejected by API validation) counts as 0.
func MaxSurge(d *appsv1.Deployment) int32 {
	if !IsRollingUpdate(d) {
		return 0
	}
	maxSurge, maxUnavailable := rollingParameters(d)
	surge, _, _ := ResolveFenceposts(maxSurge, maxUnavailable, DesiredReplicas(d))
	return surge
}

// MaxUnavailable returns how many pods a rolling Deployment may be short of its size,
// never more than the size itself; 0 for Recreate and for a Deployment scaled to 0.
func MaxUnavailable(d *appsv1.Deployment) int32 {
	desired := DesiredReplicas(d)
	if !IsRollingUpdate(d) || desired == 0 {
		return 0
	}
	maxSurge, maxUnavailable := rollingParameters(d)
	_, unavailable, _ := ResolveFenceposts(maxSurge, maxUnavailable, desired)
	return min(unavailable, desired)
}

// NewRSNewReplicas returns the size the new ReplicaSet should have now. Recreate wants
// it at full size at once. RollingUpdate grows it by whatever room is left under
// spec.replicas+maxSurge across all ReplicaSets, never beyond spec.replicas; if there is
// no room it keeps its current size.
func NewRSNewReplicas(d *appsv1.Deployment, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) (int32, error) {
	desired := DesiredReplicas(d)
	switch d.Spec.Strategy.Type {
	case appsv1.RollingUpdateDeploymentStrategyType:
		maxSurge, _ := rollingParameters(d)
		if maxSurge == nil {
			return 0, fmt.Errorf("deployment %s/%s has no rollingUpdate.maxSurge", d.Namespace, d.Name)
		}
		surge, err := intstr.GetScaledValueFromIntOrPercent(maxSurge, int(desired), true)
		if err != nil {
			return 0, fmt.Errorf("resolving maxSurge of deployment %s/%s: %w", d.Namespace, d.Name, err)
		}
		currentPodCount := SumSpecReplicas(allRSs)
		maxTotalPods := desired + clampSurge(surge, desired)
		if currentPodCount >= maxTotalPods {
			return SpecReplicas(newRS), nil
		}
		scaleUpCount := min(maxTotalPods-currentPodCount, desired-SpecReplicas(newRS))
		return SpecReplicas(newRS) + scaleUpCount, nil
	case appsv1.RecreateDeploymentStrategyType:
		return desired, nil
	default:
		return 0, fmt.Errorf("deployment strategy type %q isn't supported", d.Spec.Strategy.Type)
	}
}
