// Package sharding cuts the namespaces of a cluster into shards that mini-kcm replicas
// can work on independently (issue #17): everything a controller relates (a Deployment,
// its ReplicaSets and their pods; a Service, its pods and its Endpoints) lives in one
// namespace, so a shard is a set of whole namespaces.
//
// The apiserver filters lists and watches by shard (the ShardedListAndWatch feature,
// KEP-5866): a shardSelector keeps the objects whose field hashes into a range of the
// FNV-1a-64 space [0, 2^64). FNV-1a barely spreads names that differ only in their last
// characters: tenant-000 … tenant-099 fall into 0.08% of the space, so ranges of equal
// width would put them all into one shard. A Plan therefore cuts the space where the
// namespaces that exist are, at the weighted quantiles of their hashes, so that each
// shard holds about the same number of objects.
package sharding

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	apisharding "k8s.io/apimachinery/pkg/sharding"
)

// NamespaceKey is the field the shards hash: the object's namespace.
const NamespaceKey = "object.metadata.namespace"

// Plan cuts the hash space into len(Cuts)+1 shards: shard i holds the hashes in
// [Cuts[i-1], Cuts[i]), where the first shard starts at 0 and the last ends at 2^64.
// Cuts are strictly increasing and never 0.
type Plan struct {
	Cuts []uint64
}

// Hash returns a namespace's place in the hash space, as the apiserver computes it.
func Hash(namespace string) uint64 {
	h, err := strconv.ParseUint(apisharding.HashField(namespace), 16, 64)
	if err != nil {
		panic(fmt.Sprintf("sharding.HashField returned a value that is not 16 hex digits: %v", err)) // cannot happen
	}
	return h
}

// Shards returns the number of shards.
func (p Plan) Shards() int { return len(p.Cuts) + 1 }

// Shard returns the shard a namespace belongs to.
func (p Plan) Shard(namespace string) int {
	h := Hash(namespace)
	// The first cut above h ends h's shard.
	i, found := slices.BinarySearch(p.Cuts, h)
	if found {
		return i + 1
	}
	return i
}

// Selector returns the apiserver's shardSelector of shard i, which also matches objects
// on the client (sharding.Selector.Matches) where the apiserver cannot filter.
func (p Plan) Selector(i int) apisharding.Selector {
	start, end := p.Bounds(i)
	return apisharding.NewSelector(apisharding.ShardRangeRequirement{Key: NamespaceKey, Start: start, End: end})
}

// Bounds returns shard i's range [start, end) in the selector's hex notation; the last
// shard ends at 2^64.
func (p Plan) Bounds(i int) (start, end string) {
	start, end = "0x0000000000000000", "0x10000000000000000"
	if i > 0 {
		start = fmt.Sprintf("0x%016x", p.Cuts[i-1])
	}
	if i < len(p.Cuts) {
		end = fmt.Sprintf("0x%016x", p.Cuts[i])
	}
	return start, end
}

// hashes returns the first and the last hash of shard i's range.
func (p Plan) hashes(i int) (first, last uint64) {
	last = math.MaxUint64
	if i > 0 {
		first = p.Cuts[i-1]
	}
	if i < len(p.Cuts) {
		last = p.Cuts[i] - 1
	}
	return first, last
}

// Validate checks that the cuts are strictly increasing and not 0.
func (p Plan) Validate() error {
	for i, c := range p.Cuts {
		if c == 0 || i > 0 && c <= p.Cuts[i-1] {
			return fmt.Errorf("shard plan %s: cuts must be strictly increasing and above 0", p)
		}
	}
	return nil
}

// String returns the cuts as comma-separated hex numbers, the form Parse reads: how
// replicas agree on a plan through an object in the cluster.
func (p Plan) String() string {
	parts := make([]string, len(p.Cuts))
	for i, c := range p.Cuts {
		parts[i] = fmt.Sprintf("0x%016x", c)
	}
	return strings.Join(parts, ",")
}

// Parse reads what String wrote.
func Parse(s string) (Plan, error) {
	var p Plan
	if s == "" {
		return p, nil
	}
	for _, part := range strings.Split(s, ",") {
		c, err := strconv.ParseUint(strings.TrimPrefix(part, "0x"), 16, 64)
		if err != nil || !strings.HasPrefix(part, "0x") {
			return Plan{}, fmt.Errorf("shard plan %q: %q is not a 0x-prefixed 64-bit hex number", s, part)
		}
		p.Cuts = append(p.Cuts, c)
	}
	return p, p.Validate()
}

// Equal returns n shards of equal width, the plan for a cluster whose namespaces are
// not known yet.
func Equal(n int) Plan {
	var p Plan
	for i := 1; i < n; i++ {
		// i * 2^64 / n, without overflow.
		hi, lo := bits.Mul64(uint64(i), math.MaxUint64)
		q, _ := bits.Div64(hi, lo, uint64(n))
		p.Cuts = append(p.Cuts, q+1)
	}
	return p
}

// Balanced returns n shards whose heaviest load is as light as whole namespaces allow.
// weights holds, per namespace, the work it brings (its objects); a namespace is never
// split, so one that outweighs a fair share makes a shard of its own. The cuts fall
// halfway between the last namespace of a shard and the first of the next, so that a
// namespace created later lands in the shard of its nearest neighbours. With fewer
// namespaces than shards, the plan is Equal(n).
//
// The shards are contiguous runs of the namespaces sorted by hash. Two cuttings are
// tried: at the weighted quantiles, which spreads the load evenly in the usual case,
// and the one with the lightest possible heaviest shard (the linear partition problem:
// a binary search over loads, each tried by filling shards greedily). The quantiles win
// unless their heaviest shard is heavier, so no plan of contiguous ranges, equal ranges
// included, has a lighter heaviest shard.
func Balanced(weights map[string]int64, n int) Plan {
	if n <= 1 {
		return Plan{}
	}
	points := make([]point, 0, len(weights))
	for ns, w := range weights {
		points = append(points, point{Hash(ns), max(w, 1)}) // an empty namespace still exists, and will fill
	}
	if len(points) < n {
		return Equal(n)
	}
	slices.SortFunc(points, func(a, b point) int { return cmp.Compare(a.hash, b.hash) })
	starts := quantileStarts(points, n)
	if lightest := lightestStarts(points, n); heaviestOf(points, lightest) < heaviestOf(points, starts) {
		starts = lightest
	}
	var p Plan
	for _, s := range starts[1:] {
		p.Cuts = append(p.Cuts, midpoint(points[s-1].hash, points[s].hash))
	}
	return p
}

// point is a namespace in the hash space.
type point struct {
	hash   uint64
	weight int64
}

// A cutting of points into shards is written as the index of each shard's first point;
// every shard has at least one.

// quantileStarts cuts where the first k shards together weigh closest to k/n of the
// total: aiming at the cumulative target keeps one shard's rounding from carrying into
// the next.
func quantileStarts(points []point, n int) []int {
	var total int64
	for _, pt := range points {
		total += pt.weight
	}
	starts := []int{0}
	var cum int64
	next := 0
	for k := 1; k < n; k++ {
		target := float64(total) * float64(k) / float64(n)
		first := next
		// Take points while that brings the shards closer to the target, at least one,
		// and leave at least one for each shard still to cut.
		for next < len(points)-(n-k) {
			with := float64(cum + points[next].weight)
			if next > first && math.Abs(with-target) > math.Abs(float64(cum)-target) {
				break
			}
			cum += points[next].weight
			next++
		}
		starts = append(starts, next)
	}
	return starts
}

// lightestStarts cuts so that the heaviest shard is as light as possible.
func lightestStarts(points []point, n int) []int {
	// fill starts a new shard whenever the next point would take the current one
	// past limit.
	fill := func(limit int64) []int {
		starts := []int{0}
		var load int64
		for i, pt := range points {
			if load+pt.weight > limit {
				starts = append(starts, i)
				load = 0
			}
			load += pt.weight
		}
		return starts
	}
	var lo, hi int64
	for _, pt := range points {
		lo, hi = max(lo, pt.weight), hi+pt.weight
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		if len(fill(mid)) <= n {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	starts := fill(lo)
	// Fewer shards than n were enough: split the heaviest shard of more than one point
	// where its first part reaches half its load, until there are n. Splitting never
	// makes the heaviest heavier.
	for len(starts) < n {
		best, bestLoad := -1, int64(-1)
		for s := range starts {
			if first, end := starts[s], shardEnd(starts, s, len(points)); end-first > 1 {
				if load := sum(points[first:end]); load > bestLoad {
					best, bestLoad = s, load
				}
			}
		}
		first, end := starts[best], shardEnd(starts, best, len(points))
		split, load := first+1, points[first].weight
		for split < end-1 && 2*(load+points[split].weight) <= bestLoad {
			load += points[split].weight
			split++
		}
		starts = slices.Insert(starts, best+1, split)
	}
	return starts
}

// heaviestOf returns the load of the heaviest shard of a cutting.
func heaviestOf(points []point, starts []int) int64 {
	var heaviest int64
	for s := range starts {
		heaviest = max(heaviest, sum(points[starts[s]:shardEnd(starts, s, len(points))]))
	}
	return heaviest
}

// shardEnd returns the index after the last point of shard s.
func shardEnd(starts []int, s, n int) int {
	if s+1 < len(starts) {
		return starts[s+1]
	}
	return n
}

func sum(points []point) int64 {
	var total int64
	for _, pt := range points {
		total += pt.weight
	}
	return total
}

// midpoint returns a cut c with a < c <= b, halfway between them.
func midpoint(a, b uint64) uint64 {
	return a + (b-a)/2 + 1
}

// Loads returns the weight of each shard of p.
func (p Plan) Loads(weights map[string]int64) []int64 {
	loads := make([]int64, p.Shards())
	for ns, w := range weights {
		loads[p.Shard(ns)] += max(w, 1)
	}
	return loads
}

// Imbalance returns 1 + the largest deviation of a shard's load from the mean load, as
// a fraction of the mean: 1 is perfect balance, 1.2 means every shard is within 20% of
// the mean, n means one of n shards holds everything. Both sides count: a replica holds
// whole shards, so it is within 20% of its share of the pods, above or below, only if
// each of its shards is.
func Imbalance(loads []int64) float64 {
	var total int64
	for _, l := range loads {
		total += l
	}
	if total == 0 {
		return 1
	}
	mean := float64(total) / float64(len(loads))
	var deviation float64
	for _, l := range loads {
		deviation = max(deviation, math.Abs(float64(l)-mean))
	}
	return 1 + deviation/mean
}
