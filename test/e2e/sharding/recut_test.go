package sharding

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/sharding"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// TestARecutPausesOnlyTheShardsWhoseRangeMoves: three replicas at the default flags
// share six shards of twelve tenants, balanced. One tenant grows, chosen so that the
// balanced cut of the new weights moves some bounds and keeps others. The coordinator
// recuts on its own (at the default --shard-rebalance-period), and every shard whose
// range the new plan keeps keeps its holder and its Lease (no new acquireTime, no
// transition), and its term never stops: the audit log shows that the namespaces of
// the kept shards are written, after the recut, only by terms that started before it
// (a term's user agent names its start).
func TestARecutPausesOnlyTheShardsWhoseRangeMoves(t *testing.T) {
	f := framework.New(t)
	replicas := f.StartReplicas(3, shardedArgs(shardCount))
	// The tenants' names differ in their first characters, so that their hashes spread
	// over the hash space among the namespaces the suite's earlier tests left. Names
	// that differ only at their end (createTenants') hash close together, into
	// adjacent shards between those namespaces; a recut around one of them then moves
	// every shard that holds a tenant, and no growth of one keeps a tenant's shard
	// (three draws in four, in a model of the suite with such leftovers; about 1 in 140 with
	// these names and the growths tried below).
	tenants := createTenantsNamed(t, f, 12, 3, "t%02[2]d-%[1]s")
	waitForPods(t, f, tenants, 3)
	waitForFairShares(t, f, replicas, 2)

	// The plan settles once the coordinator weighed the filled tenants (a cut made
	// before they held pods is recut within its first looks).
	var before sharding.Epoch
	framework.Eventually(t, 2*time.Minute, func() error {
		var err error
		before, err = settledPlan(f, podsPerNamespace(t, f))
		return err
	})
	t.Logf("settled at epoch %d: %s", before.Number, before.Plan)

	// Grow the tenant whose growth, the least of 6 to 60 pods, makes a better cut that
	// keeps at least one shard.
	weights := podsPerNamespace(t, f)
	grown, size, want := "", int32(0), sharding.Epoch{}
	for pods := int32(6); pods <= 60 && grown == ""; pods += 2 {
		for _, ns := range tenants {
			w := maps.Clone(weights)
			w[ns] = int64(pods)
			// The product's Balanced picks the cut the coordinator will make; whether it
			// is due and what it keeps is computed here.
			current := imbalanceOf(before.Plan.Cuts, w)
			candidate := sharding.Balanced(w, shardCount)
			next := before.Next(before.Number+1, candidate)
			kept := keptRanges(before.Plan.Cuts, candidate.Cuts)
			// At least one tenant must be in a kept shard, to be written through the recut.
			inKept := 0
			for _, t := range tenants {
				if slices.Contains(kept, shardOf(candidate.Cuts, t)) {
					inKept++
				}
			}
			if current > 1.2 && imbalanceOf(candidate.Cuts, w)*1.1 < current && len(kept) < shardCount && inKept > 0 {
				grown, size, want = ns, pods, next
				break
			}
		}
	}
	if grown == "" {
		t.Fatalf("no tenant's growth to 6–60 pods makes a recut that keeps a shard of %s (weights %v); the test needs other tenants",
			before.Plan, weights)
	}
	t.Logf("growing %s to %d pods; the expected cut %s keeps shards %v", grown, size, want.Plan, keptRanges(before.Plan.Cuts, want.Plan.Cuts))
	// A plan that just settled may still have a shard released for its new holder:
	// compare against every shard held.
	waitForFairShares(t, f, replicas, 2)
	leasesBefore := shardLeases(t, f)
	recutFrom := time.Now()
	scaleReplicaSet(t, f, grown, size)

	var after sharding.Epoch
	framework.Eventually(t, 2*time.Minute, func() error {
		var err error
		if after, err = settledPlan(f, podsPerNamespace(t, f)); err == nil && after.Number == before.Number {
			err = fmt.Errorf("still at epoch %d", after.Number)
		}
		return err
	})
	// What moved is computed here from the cuts the plan Lease carries, not by the
	// product's Moved, so that a bug there cannot hide: a shard keeps its range when
	// both its bounds stay.
	keptShards := keptRanges(before.Plan.Cuts, after.Plan.Cuts)
	t.Logf("recut %s after the scale: epoch %d, %s; shards kept %v", time.Since(recutFrom).Round(time.Second), after.Number, after.Plan, keptShards)
	if len(keptShards) == 0 {
		t.Fatalf("the recut from %s to %s moved every shard; the test expected %s", before, after, want)
	}
	// The recut made the shards more even, by the loads computed here from the pods.
	final := podsPerNamespace(t, f)
	if b, a := imbalanceOf(before.Plan.Cuts, final), imbalanceOf(after.Plan.Cuts, final); a >= b {
		t.Errorf("the recut to %s leaves the shards less even than %s: imbalance %.2f, was %.2f", after.Plan, before.Plan, a, b)
	} else {
		t.Logf("imbalance %.2f before the recut, %.2f after it", b, a)
	}

	// Every kept shard kept its holder and Lease: no release, no new acquire.
	leasesAfter := shardLeases(t, f)
	for _, shard := range keptShards {
		b, a := leasesBefore[shard], leasesAfter[shard]
		if ptr.Deref(a.Spec.HolderIdentity, "") != ptr.Deref(b.Spec.HolderIdentity, "") || !a.Spec.AcquireTime.Equal(b.Spec.AcquireTime) ||
			ptr.Deref(a.Spec.LeaseTransitions, 0) != ptr.Deref(b.Spec.LeaseTransitions, 0) || a.Labels[sharding.LabelEpoch] != b.Labels[sharding.LabelEpoch] {
			t.Errorf("shard %d's range was kept, but its Lease changed hands: holder %q → %q, acquired %v → %v, transitions %d → %d, label %s → %s",
				shard, ptr.Deref(b.Spec.HolderIdentity, ""), ptr.Deref(a.Spec.HolderIdentity, ""), b.Spec.AcquireTime, a.Spec.AcquireTime,
				ptr.Deref(b.Spec.LeaseTransitions, 0), ptr.Deref(a.Spec.LeaseTransitions, 0), b.Labels[sharding.LabelEpoch], a.Labels[sharding.LabelEpoch])
		}
	}

	// Every moved shard's Lease carries another label: a holder of its old range can
	// never take it again.
	for shard := range shardCount {
		if b, a := leasesBefore[shard], leasesAfter[shard]; !slices.Contains(keptShards, shard) && a.Labels[sharding.LabelEpoch] == b.Labels[sharding.LabelEpoch] {
			t.Errorf("shard %d's range moved, but its Lease still carries label %s", shard, a.Labels[sharding.LabelEpoch])
		}
	}

	// Work in every tenant after the recut: the kept shards' namespaces are written by
	// the term that wrote them before it.
	for _, ns := range tenants {
		if ns != grown {
			scaleReplicaSet(t, f, ns, 4)
		}
	}
	for _, ns := range tenants {
		want := 4
		if ns == grown {
			want = int(size)
		}
		waitForPods(t, f, []string{ns}, want)
	}
	spans := termSpans(t, f, tenants)
	checked := 0
	for _, ns := range tenants {
		if !slices.Contains(keptShards, shardOf(after.Plan.Cuts, ns)) {
			continue
		}
		checked++
		var writers []string
		for _, s := range spans[ns] {
			if s.Last.After(recutFrom) {
				writers = append(writers, fmt.Sprintf("%s (%s to %s)", s.Writer, s.First.Format(time.StampMilli), s.Last.Format(time.StampMilli)))
				// The user agent names the term by the time it started, in Unix milliseconds.
				_, started, _ := strings.Cut(s.Writer, ", term ")
				ms, err := strconv.ParseInt(started, 10, 64)
				if err != nil {
					t.Errorf("namespace %s: the writer %q names no term start", ns, s.Writer)
				} else if !time.UnixMilli(ms).Before(recutFrom) {
					t.Errorf("namespace %s of kept shard %d: written after the recut by a term that started after it (%s): %s",
						ns, shardOf(after.Plan.Cuts, ns), time.UnixMilli(ms).Format(time.StampMilli), s.Writer)
				}
			}
		}
		if len(writers) != 1 {
			t.Errorf("namespace %s of kept shard %d: %d terms wrote after the recut, want its one term from before: %v", ns, shardOf(after.Plan.Cuts, ns), len(writers), writers)
		}
	}
	if checked == 0 {
		t.Errorf("no tenant is in a kept shard of %s (kept %v): nothing shows that they worked through the recut", after.Plan, keptShards)
	}
	t.Logf("kept shards %v worked through the recut (%d tenants checked)", keptShards, checked)
	assertOneWriterAtATime(t, f, tenants)
}

// podsPerNamespace counts the live and terminating pods of every namespace, as the
// coordinator weighs them.
func podsPerNamespace(t *testing.T, f *framework.Framework) map[string]int64 {
	t.Helper()
	pods, err := f.Client.CoreV1().Pods(metav1.NamespaceAll).List(f.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	weights := map[string]int64{}
	for _, p := range pods.Items {
		weights[p.Namespace]++
	}
	return weights
}

// settledPlan returns the active plan when no handover is pending and the coordinator
// would not recut these weights.
func settledPlan(f *framework.Framework, weights map[string]int64) (sharding.Epoch, error) {
	l, err := f.Client.CoordinationV1().Leases(f.LeaseNamespace).Get(context.Background(), sharding.PlanLeaseName(f.LeaseName), metav1.GetOptions{})
	if err != nil {
		return sharding.Epoch{}, err
	}
	active, next, err := sharding.PlanOf(l)
	switch {
	case err != nil:
		return sharding.Epoch{}, err
	case active == nil || next != nil:
		return sharding.Epoch{}, fmt.Errorf("plan: active %v, next %v", active, next)
	}
	current := sharding.Imbalance(active.Plan.Loads(weights))
	if better := sharding.Imbalance(sharding.Balanced(weights, shardCount).Loads(weights)); current > 1.2 && better*1.1 < current {
		return sharding.Epoch{}, fmt.Errorf("epoch %d has imbalance %.2f; a recut to %.2f is due", active.Number, current, better)
	}
	return *active, nil
}

// The expectations of the recut are computed from docs/sharding.md's definitions, not
// with the product's Plan methods: a namespace's place is the FNV-1a-64 hash of its
// name, shard i holds [cut i-1, cut i) (from 0, to 2^64), and a shard's load is its
// namespaces' pods (an empty namespace weighs 1, as one that will fill).

// shardOf returns the shard of cuts that holds namespace ns.
func shardOf(cuts []uint64, ns string) int {
	h := fnv.New64a()
	h.Write([]byte(ns))
	hash := h.Sum64()
	shard := 0
	for shard < len(cuts) && hash >= cuts[shard] {
		shard++
	}
	return shard
}

// keptRanges returns the shards whose bounds are the same in both cuts.
func keptRanges(before, after []uint64) []int {
	bound := func(cuts []uint64, i int) (uint64, bool) { // cut i, or the end of the space
		if i < len(cuts) {
			return cuts[i], false
		}
		return 0, true
	}
	var kept []int
	for shard := range min(len(before), len(after)) + 1 {
		sameStart := shard == 0 || before[shard-1] == after[shard-1]
		be, bLast := bound(before, shard)
		ae, aLast := bound(after, shard)
		if sameStart && be == ae && bLast == aLast {
			kept = append(kept, shard)
		}
	}
	return kept
}

// imbalanceOf returns 1 + the largest deviation of a shard's load from the mean, as a
// fraction of the mean, for the weights of every namespace.
func imbalanceOf(cuts []uint64, weights map[string]int64) float64 {
	loads := make([]float64, len(cuts)+1)
	var total float64
	for ns, w := range weights {
		loads[shardOf(cuts, ns)] += float64(max(w, 1))
		total += float64(max(w, 1))
	}
	if total == 0 {
		return 1
	}
	mean := total / float64(len(loads))
	var deviation float64
	for _, l := range loads {
		deviation = max(deviation, math.Abs(l-mean))
	}
	return 1 + deviation/mean
}
