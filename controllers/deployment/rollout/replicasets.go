package rollout

import (
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
)

// CompareByCreation orders ReplicaSets oldest first, breaking ties by name, so that
// every choice that depends on age is deterministic.
func CompareByCreation(a, b *appsv1.ReplicaSet) int {
	if a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return strings.Compare(a.Name, b.Name)
	}
	if a.CreationTimestamp.Before(&b.CreationTimestamp) {
		return -1
	}
	return 1
}

// CompareBySizeOlder orders ReplicaSets largest first, ties oldest first. Proportional
// scaling uses it when shrinking, so old ReplicaSets give up pods before newer ones.
func CompareBySizeOlder(a, b *appsv1.ReplicaSet) int {
	if sa, sb := SpecReplicas(a), SpecReplicas(b); sa != sb {
		return int(sb) - int(sa)
	}
	return CompareByCreation(a, b)
}

// CompareBySizeNewer orders ReplicaSets largest first, ties newest first. Proportional
// scaling uses it when growing, so newer ReplicaSets get the extra pods first.
func CompareBySizeNewer(a, b *appsv1.ReplicaSet) int {
	if sa, sb := SpecReplicas(a), SpecReplicas(b); sa != sb {
		return int(sb) - int(sa)
	}
	return CompareByCreation(b, a)
}

// CompareByRevision orders ReplicaSets by revision, lowest first; when either revision is
// unparsable or both are equal it falls back to creation order. Cleanup deletes from the
// front of this order.
func CompareByRevision(a, b *appsv1.ReplicaSet) int {
	ra, errA := Revision(a)
	rb, errB := Revision(b)
	if errA != nil || errB != nil || ra == rb {
		return CompareByCreation(a, b)
	}
	if ra < rb {
		return -1
	}
	return 1
}

// SortedByCreation returns a copy of rsList ordered oldest first.
func SortedByCreation(rsList []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	sorted := slices.Clone(rsList)
	slices.SortFunc(sorted, CompareByCreation)
	return sorted
}

// FilterActive returns the ReplicaSets that ought to have pods (spec.replicas > 0).
func FilterActive(rsList []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var active []*appsv1.ReplicaSet
	for _, rs := range rsList {
		if rs != nil && SpecReplicas(rs) > 0 {
			active = append(active, rs)
		}
	}
	return active
}

// SumSpecReplicas adds up spec.replicas.
func SumSpecReplicas(rsList []*appsv1.ReplicaSet) int32 { return sum(rsList, SpecReplicas) }

// SumStatusReplicas adds up status.replicas: the pods that exist.
func SumStatusReplicas(rsList []*appsv1.ReplicaSet) int32 {
	return sum(rsList, func(rs *appsv1.ReplicaSet) int32 { return rs.Status.Replicas })
}

// SumReadyReplicas adds up status.readyReplicas.
func SumReadyReplicas(rsList []*appsv1.ReplicaSet) int32 {
	return sum(rsList, func(rs *appsv1.ReplicaSet) int32 { return rs.Status.ReadyReplicas })
}

// SumAvailableReplicas adds up status.availableReplicas.
func SumAvailableReplicas(rsList []*appsv1.ReplicaSet) int32 {
	return sum(rsList, func(rs *appsv1.ReplicaSet) int32 { return rs.Status.AvailableReplicas })
}

// sum adds up count over the ReplicaSets of rsList, skipping nil ones.
func sum(rsList []*appsv1.ReplicaSet, count func(*appsv1.ReplicaSet) int32) int32 {
	var total int32
	for _, rs := range rsList {
		if rs != nil {
			total += count(rs)
		}
	}
	return total
}

// SumTerminatingReplicas adds up status.terminatingReplicas. A ReplicaSet its controller
// has never synced (observedGeneration 0, no count) is skipped; one that was synced but
// reports no count makes the sum unknown (nil), because a partial sum would understate
// how many pods are still shutting down.
func SumTerminatingReplicas(rsList []*appsv1.ReplicaSet) *int32 {
	var total int32
	for _, rs := range rsList {
		switch {
		case rs == nil:
		case rs.Status.ObservedGeneration == 0 && rs.Status.TerminatingReplicas == nil:
		case rs.Status.TerminatingReplicas == nil:
			return nil
		default:
			total += *rs.Status.TerminatingReplicas
		}
	}
	return &total
}

// FindNewReplicaSet returns the ReplicaSet whose template equals the Deployment's
// (ignoring the hash label), or nil. Should there be several, as can happen after an
// upgrade changes how templates are defaulted, the oldest one wins so the choice is
// stable across syncs.
func FindNewReplicaSet(d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	for _, rs := range SortedByCreation(rsList) {
		if EqualIgnoreHash(&rs.Spec.Template, &d.Spec.Template) {
			return rs
		}
	}
	return nil
}

// FindOldReplicaSets returns every ReplicaSet but the new one, oldest first.
func FindOldReplicaSets(d *appsv1.Deployment, rsList []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	newRS := FindNewReplicaSet(d, rsList)
	var old []*appsv1.ReplicaSet
	for _, rs := range SortedByCreation(rsList) {
		if newRS != nil && rs.UID == newRS.UID {
			continue
		}
		old = append(old, rs)
	}
	return old
}

// FindActiveOrLatest returns the ReplicaSet a scaling event should resize on its own:
// the only active one, or, when none is active, the new one or else the newest old one.
// It returns nil when several are active, which calls for proportional scaling.
func FindActiveOrLatest(newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	if newRS == nil && len(oldRSs) == 0 {
		return nil
	}
	newestFirst := SortedByCreation(oldRSs)
	slices.Reverse(newestFirst)
	active := FilterActive(append(newestFirst, newRS))
	switch len(active) {
	case 0:
		if newRS != nil {
			return newRS
		}
		return newestFirst[0]
	case 1:
		return active[0]
	default:
		return nil
	}
}

// IsSaturated reports whether the new ReplicaSet holds the whole Deployment: its size,
// its desired-replicas annotation and its available pods all equal spec.replicas. The
// annotation check makes sure the ReplicaSet was sized for the current spec, not for an
// earlier one that happened to have the same number.
func IsSaturated(d *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	if rs == nil {
		return false
	}
	desired, err := strconv.Atoi(rs.Annotations[DesiredReplicasAnnotation])
	if err != nil {
		return false
	}
	want := DesiredReplicas(d)
	return SpecReplicas(rs) == want && int32(desired) == want && rs.Status.AvailableReplicas == want
}
