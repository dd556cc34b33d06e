package rollout

import (
	"fmt"
	"math"
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// fencepost builds a maxSurge or maxUnavailable value: a percentage when percent is set,
// an absolute number otherwise.
func fencepost(value int32, percent bool) intstr.IntOrString {
	if percent {
		return intstr.FromString(strconv.Itoa(int(value)) + "%")
	}
	return intstr.FromInt32(value)
}

// nonNegative maps any int32 onto [0, limit], so that fuzzed sizes stay within what the
// API accepts (sizes and fenceposts are validated non-negative).
func nonNegative(v int32, limit int32) int32 {
	if v < 0 {
		v = -(v + 1)
	}
	return int32(int64(v) % (int64(limit) + 1))
}

// FuzzResolveFenceposts checks the rounding of maxSurge (up) and maxUnavailable (down)
// for every valid combination, and that both are never 0 together.
func FuzzResolveFenceposts(f *testing.F) {
	f.Add(int32(10), int32(25), true, int32(25), true)
	f.Add(int32(10), int32(1), true, int32(1), true) // both round to 0
	f.Add(int32(0), int32(0), false, int32(0), false)
	f.Add(int32(math.MaxInt32), int32(100), true, int32(100), true)
	f.Add(int32(3), int32(5), false, int32(0), false)
	f.Fuzz(func(t *testing.T, desired, surgeValue int32, surgePercent bool, unavailableValue int32, unavailablePercent bool) {
		desired = nonNegative(desired, math.MaxInt32)
		surgeValue = nonNegative(surgeValue, math.MaxInt32)
		unavailableValue = nonNegative(unavailableValue, math.MaxInt32)
		if surgePercent {
			surgeValue %= 1001 // the API takes any percentage for maxSurge; keep it sane
		}
		if unavailablePercent {
			unavailableValue %= 101 // and at most 100% for maxUnavailable
		}
		maxSurge, maxUnavailable := fencepost(surgeValue, surgePercent), fencepost(unavailableValue, unavailablePercent)

		surge, unavailable, err := ResolveFenceposts(&maxSurge, &maxUnavailable, desired)
		if err != nil {
			t.Fatalf("ResolveFenceposts(%v, %v, %d): %v", maxSurge.String(), maxUnavailable.String(), desired, err)
		}
		wantSurge, wantUnavailable := int64(surgeValue), int64(unavailableValue)
		if surgePercent {
			wantSurge = (int64(surgeValue)*int64(desired) + 99) / 100
		}
		if unavailablePercent {
			wantUnavailable = int64(unavailableValue) * int64(desired) / 100
		}
		if wantSurge == 0 && wantUnavailable == 0 {
			wantUnavailable = 1
		}
		// No Deployment can run more than MaxInt32 pods: the surge is capped there.
		wantSurge = min(wantSurge, math.MaxInt32-int64(desired))
		if int64(surge) != wantSurge || int64(unavailable) != wantUnavailable {
			t.Fatalf("ResolveFenceposts(%s, %s, %d) = %d, %d; want %d, %d",
				maxSurge.String(), maxUnavailable.String(), desired, surge, unavailable, wantSurge, wantUnavailable)
		}
	})
}

// FuzzResolveFencepostsRejectsGarbage feeds arbitrary strings as fenceposts: an error is
// fine, a panic is not.
func FuzzResolveFencepostsRejectsGarbage(f *testing.F) {
	f.Add("25%", "x%", int32(10))
	f.Add("%", "-5%", int32(3))
	f.Add("99999999999999999999%", "1e3", int32(7))
	f.Fuzz(func(t *testing.T, maxSurge, maxUnavailable string, desired int32) {
		surge, unavailable := intstr.FromString(maxSurge), intstr.FromString(maxUnavailable)
		_, _, _ = ResolveFenceposts(&surge, &unavailable, desired)
	})
}

// FuzzNewRSNewReplicas checks the size a rolling update gives the new ReplicaSet: it
// never shrinks a ReplicaSet that is not above spec.replicas, never grows it beyond
// spec.replicas, and never grows the total beyond spec.replicas+maxSurge.
func FuzzNewRSNewReplicas(f *testing.F) {
	f.Add(int32(10), int32(25), true, int32(0), int32(10), int32(0))
	f.Add(int32(10), int32(3), false, int32(5), int32(8), int32(2))
	f.Add(int32(1), int32(0), false, int32(0), int32(1), int32(0))
	f.Add(int32(100), int32(100), true, int32(150), int32(0), int32(0))
	f.Add(int32(math.MaxInt32), int32(100), true, int32(0), int32(5), int32(0))
	f.Fuzz(func(t *testing.T, desired, surgeValue int32, surgePercent bool, newSize, oldA, oldB int32) {
		desired = nonNegative(desired, math.MaxInt32)
		surgeValue = nonNegative(surgeValue, math.MaxInt32)
		if surgePercent {
			surgeValue %= 1001
		}
		// The ReplicaSets' sizes are bounded so that their sum fits in int32, as it
		// must for any real cluster.
		newSize, oldA, oldB = nonNegative(newSize, 1<<29), nonNegative(oldA, 1<<29), nonNegative(oldB, 1<<29)
		d := rolling(desired, fencepost(surgeValue, surgePercent), intstr.FromInt32(1))
		newRS := replicaSet("new", newSize, 3)
		all := []*appsv1.ReplicaSet{replicaSet("old-a", oldA, 1), replicaSet("old-b", oldB, 2), newRS}

		got, err := NewRSNewReplicas(d, all, newRS)
		if err != nil {
			t.Fatal(err)
		}
		surge, _, _ := ResolveFenceposts(d.Spec.Strategy.RollingUpdate.MaxSurge, d.Spec.Strategy.RollingUpdate.MaxUnavailable, desired)
		current := int64(oldA) + int64(oldB) + int64(newSize)
		maxTotal := int64(desired) + int64(surge)
		describe := fmt.Sprintf("desired %d, maxSurge %s (%d), new %d, old %d+%d: got %d",
			desired, d.Spec.Strategy.RollingUpdate.MaxSurge.String(), surge, newSize, oldA, oldB, got)
		if got < 0 {
			t.Fatalf("negative size: %s", describe)
		}
		if newSize <= desired && (got < newSize || got > desired) {
			t.Fatalf("size outside [current, spec.replicas]: %s", describe)
		}
		if got > newSize && current-int64(newSize)+int64(got) > maxTotal {
			t.Fatalf("grew the total beyond spec.replicas+maxSurge (%d): %s", maxTotal, describe)
		}
		if got == newSize && newSize < desired && current < maxTotal {
			t.Fatalf("did not grow although there is room (total %d < %d): %s", current, maxTotal, describe)
		}

		recreate := recreate(desired)
		if got, err := NewRSNewReplicas(recreate, all, newRS); err != nil || got != desired {
			t.Fatalf("Recreate: got %d, %v; want spec.replicas %d", got, err, desired)
		}
	})
}

// FuzzReplicaSetProportion checks one ReplicaSet's share of a proportional scaling: it
// has the sign of the change, never takes the running total past the change, and never
// makes the ReplicaSet negative, whatever the max-replicas annotation says.
func FuzzReplicaSetProportion(f *testing.F) {
	f.Add(int32(5), "13", int32(20), int32(3), int32(0), int32(7), int32(0))
	f.Add(int32(5), "", int32(0), int32(0), int32(10), int32(-5), int32(0))
	f.Add(int32(8), "not a number", int32(4), int32(1), int32(13), int32(-8), int32(-3))
	f.Add(int32(1), "0", int32(1000), int32(0), int32(0), int32(999), int32(0))
	f.Add(int32(1<<29), "1", int32(math.MaxInt32-1), int32(1), int32(0), int32(math.MaxInt32), int32(0))
	f.Fuzz(func(t *testing.T, size int32, maxReplicas string, desired, surge, statusReplicas, toAdd, added int32) {
		size = nonNegative(size, 1<<29)
		desired = nonNegative(desired, math.MaxInt32)
		surge = nonNegative(surge, math.MaxInt32-desired)
		statusReplicas = nonNegative(statusReplicas, math.MaxInt32)
		// added is what earlier ReplicaSets already took: between 0 and toAdd.
		switch {
		case toAdd > 0:
			added = nonNegative(added, toAdd)
		case toAdd < 0:
			added = -nonNegative(added, -(toAdd + 1))
		default:
			added = 0
		}
		rs := withAnnotations(replicaSet("rs", size, 1), MaxReplicasAnnotation, maxReplicas)
		d := rolling(desired, intstr.FromInt32(surge), intstr.FromInt32(0))
		d.Status.Replicas = statusReplicas

		got := ReplicaSetProportion(rs, d, toAdd, added)

		describe := fmt.Sprintf("size %d, annotation %q, desired %d+%d, status %d, toAdd %d, added %d: got %d",
			size, maxReplicas, desired, surge, statusReplicas, toAdd, added, got)
		switch {
		case toAdd > 0 && (got < 0 || got > toAdd-added):
			t.Fatalf("share outside [0, toAdd-added]: %s", describe)
		case toAdd < 0 && (got > 0 || got < toAdd-added):
			t.Fatalf("share outside [toAdd-added, 0]: %s", describe)
		case toAdd == 0 && got != 0:
			t.Fatalf("a share of nothing: %s", describe)
		}
		if int64(size)+int64(got) < 0 {
			t.Fatalf("the ReplicaSet would become negative: %s", describe)
		}
	})
}
