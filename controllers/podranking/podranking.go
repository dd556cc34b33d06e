// Package podranking orders a controller's active pods by how cheap they are to lose,
// as upstream's ActivePodsWithRanks does, so that a scale-down deletes the same pods
// kube-controller-manager would: those that are not running or not serving yet first,
// then the ones the user marked cheap, then those doubled up on a node, then the
// youngest.
package podranking

import (
	"math"
	"strconv"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/mini-kcm/mini-kcm/controllers/podstate"
)

// DeletionCostAnnotation lets users rank pods of one ReplicaSet for scale-down: pods with
// a lower cost are deleted first. Values are int32; missing or invalid means 0.
const DeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

// phaseOrder puts pods that do the least work first: Pending, then Unknown, then
// Running (and any other phase, which cannot occur for active pods).
var phaseOrder = map[v1.PodPhase]int{v1.PodPending: 0, v1.PodUnknown: 1, v1.PodRunning: 2}

// ActivePodsWithRanks sorts Pods so that the pod to delete first comes first. Rank[i]
// belongs to Pods[i] (the number of related active pods on its node); Swap keeps them
// together. Sorting applies these rules in turn until one tells the two pods apart:
//
//  1. a pod not yet scheduled to a node before a scheduled one;
//  2. Pending before Unknown before Running;
//  3. not ready before ready;
//  4. lower pod-deletion-cost before higher, unless IgnoreDeletionCost is set;
//  5. higher rank before lower (a pod sharing its node with more related pods);
//  6. among ready pods, ready for a shorter time before longer;
//  7. more container restarts before fewer, then more sidecar restarts before fewer;
//  8. created more recently before older (a missing timestamp counts as newest);
//  9. with Now set, by UID.
//
// Rules 6 and 8 compare times in log2 buckets of their age relative to Now, so that
// pods of similar age are picked in pseudo-random (UID) order rather than always the
// very newest; a zero Now compares the times exactly. The UID comes last, after rule 8,
// which keeps the order a strict weak order (see newerFirst for the one difference
// from upstream this makes).
type ActivePodsWithRanks struct {
	// Pods are the candidates; they usually come from a cache and are not modified.
	Pods []*v1.Pod
	// Rank holds one rank per pod.
	Rank []int
	// Now is the reference time of the logarithmic comparisons.
	Now metav1.Time
	// IgnoreDeletionCost skips rule 4, as upstream does with its PodDeletionCost
	// feature gate off.
	IgnoreDeletionCost bool
}

// Len implements sort.Interface.
func (s ActivePodsWithRanks) Len() int { return len(s.Pods) }

// Swap implements sort.Interface.
func (s ActivePodsWithRanks) Swap(i, j int) {
	s.Pods[i], s.Pods[j] = s.Pods[j], s.Pods[i]
	s.Rank[i], s.Rank[j] = s.Rank[j], s.Rank[i]
}

// Less implements sort.Interface: it reports whether pod i should be deleted before pod j.
func (s ActivePodsWithRanks) Less(i, j int) bool {
	pi, pj := s.Pods[i], s.Pods[j]
	// 1. Unscheduled before scheduled.
	if pi.Spec.NodeName != pj.Spec.NodeName && (pi.Spec.NodeName == "" || pj.Spec.NodeName == "") {
		return pi.Spec.NodeName == ""
	}
	// 2. Pending < Unknown < Running.
	if phaseOrder[pi.Status.Phase] != phaseOrder[pj.Status.Phase] {
		return phaseOrder[pi.Status.Phase] < phaseOrder[pj.Status.Phase]
	}
	// 3. Not ready before ready.
	readyI, readyJ := podstate.IsReady(pi), podstate.IsReady(pj)
	if readyI != readyJ {
		return !readyI
	}
	// 4. Lower deletion cost first.
	if !s.IgnoreDeletionCost {
		if ci, cj := DeletionCost(pi), DeletionCost(pj); ci != cj {
			return ci < cj
		}
	}
	// 5. Doubled up before alone.
	if s.Rank[i] != s.Rank[j] {
		return s.Rank[i] > s.Rank[j]
	}
	// 6. Ready for less time first.
	if readyI && readyJ {
		if less, decided := newerFirst(podstate.ReadyTime(pi), podstate.ReadyTime(pj), s.Now); decided {
			return less
		}
	}
	// 7. More restarts first.
	if more, differ := moreRestarts(pi, pj); differ {
		return more
	}
	// 8. Newer first, then by UID within one age bucket.
	if less, decided := newerFirst(pi.CreationTimestamp, pj.CreationTimestamp, s.Now); decided {
		return less
	}
	if s.Now.IsZero() {
		return false
	}
	return pi.UID < pj.UID
}

// newerFirst applies rules 6 and 8 to two times and reports whether they decide: a zero
// time counts as the newest; without Now the times are compared exactly, with Now only
// their log2 age buckets are, so two times in one bucket do not decide.
//
// Upstream breaks a tie within one bucket by UID right away when the two times differ,
// but goes on to the next rules when they are equal. That is not a strict weak order:
// pods a and b ready in the same second (a restarted more) and c ready a minute later
// can give a < b < c < a, and sort.Sort then picks victims by the order the cache
// listed the pods in. Here the UID is the last rule instead, after restarts and the
// creation bucket; outcomes differ from upstream only for pods whose ready times differ
// within one bucket and whose restarts or creation buckets differ.
func newerFirst(ti, tj metav1.Time, now metav1.Time) (less, decided bool) {
	if now.IsZero() || ti.IsZero() || tj.IsZero() {
		if ti.Equal(&tj) {
			return false, false
		}
		return afterOrZero(ti, tj), true
	}
	if diff := logRankDiff(ti, tj, now); diff != 0 {
		return diff < 0, true
	}
	return false, false
}

// RankByColocation wraps podsToRank with ranks equal to the number of active pods among
// relatedPods (usually the pods of every ReplicaSet of the same Deployment) on the same
// node, so that a scale-down spreads the remaining pods across nodes. relatedPods
// should include podsToRank. Unscheduled pods all share the node "".
func RankByColocation(podsToRank, relatedPods []*v1.Pod, now metav1.Time) ActivePodsWithRanks {
	perNode := map[string]int{}
	for _, pod := range relatedPods {
		if podstate.IsActive(pod) {
			perNode[pod.Spec.NodeName]++
		}
	}
	ranks := make([]int, len(podsToRank))
	for i, pod := range podsToRank {
		ranks[i] = perNode[pod.Spec.NodeName]
	}
	return ActivePodsWithRanks{Pods: podsToRank, Rank: ranks, Now: now}
}

// DeletionCost returns the pod's pod-deletion-cost annotation, or 0 if it is missing or
// not a canonical int32 (a leading "+" or zero is invalid, as in the apiserver).
func DeletionCost(pod *v1.Pod) int32 {
	value, ok := pod.Annotations[DeletionCostAnnotation]
	if !ok || !canonicalFirstDigit(value) {
		return 0
	}
	cost, err := strconv.ParseInt(value, 10, 32)
	if err != nil {
		return 0
	}
	return int32(cost)
}

func canonicalFirstDigit(s string) bool {
	if s == "" {
		return false
	}
	return s[0] == '-' || s == "0" || (s[0] >= '1' && s[0] <= '9')
}

// afterOrZero reports whether t1 is after t2, counting a zero time as after any other.
func afterOrZero(t1, t2 metav1.Time) bool {
	if t1.IsZero() || t2.IsZero() {
		return t1.IsZero()
	}
	return t1.After(t2.Time)
}

// logRankDiff compares the base-2 logarithms of the ages of t1 and t2 at now; a time
// in the future (or exactly now) gets bucket -1.
func logRankDiff(t1, t2, now metav1.Time) int64 {
	bucket := func(t metav1.Time) int64 {
		if age := now.Sub(t.Time); age > 0 {
			return int64(math.Log2(float64(age)))
		}
		return -1
	}
	return bucket(t1) - bucket(t2)
}

// maxRestarts returns the highest restart count among the pod's regular containers and
// among its sidecars (init containers with restartPolicy Always).
func maxRestarts(pod *v1.Pod) (regular, sidecar int32) {
	for _, c := range pod.Status.ContainerStatuses {
		regular = max(regular, c.RestartCount)
	}
	sidecars := sets.New[string]()
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			sidecars.Insert(c.Name)
		}
	}
	for _, c := range pod.Status.InitContainerStatuses {
		if sidecars.Has(c.Name) {
			sidecar = max(sidecar, c.RestartCount)
		}
	}
	return regular, sidecar
}

// moreRestarts reports whether pi restarted more than pj (regular containers first,
// then sidecars), and whether they differ at all.
func moreRestarts(pi, pj *v1.Pod) (more, differ bool) {
	ri, si := maxRestarts(pi)
	rj, sj := maxRestarts(pj)
	if ri != rj {
		return ri > rj, true
	}
	if si != sj {
		return si > sj, true
	}
	return false, false
}
