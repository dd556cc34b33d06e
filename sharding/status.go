package sharding

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// LeaseSet is what the Leases of one base say about the shards, as a reader that does
// not decide reads them: a replica's /statusz and `mini-kcm leader`.
type LeaseSet struct {
	// Active and Next are the plan's epochs (see PlanOf); Active is nil before the
	// coordinator's first plan.
	Active, Next *Epoch
	// Live are the holders of the membership Leases that have not expired, sorted.
	Live []string
	// Shards are the shard Leases by shard number.
	Shards map[int]*coordinationv1.Lease
}

// ReadLeaseSet sorts the Leases of base by their role. expired is the reader's view of
// LeaseExpired: its observations, or ExpiredByRenewTime for a reader that reads once.
// An unreadable plan is returned as the error, with the rest of the set and what
// PlanOf could read.
func ReadLeaseSet(base string, leases []*coordinationv1.Lease, expired func(*coordinationv1.Lease) bool) (LeaseSet, error) {
	set := LeaseSet{Shards: map[int]*coordinationv1.Lease{}}
	var planErr error
	for _, l := range leases {
		switch l.Labels[LabelRole] {
		case RolePlan:
			set.Active, set.Next, planErr = PlanOf(l)
		case RoleMember:
			if !expired(l) {
				set.Live = append(set.Live, holder(l))
			}
		case RoleShard:
			if i, ok := ShardOf(base, l.Name); ok {
				set.Shards[i] = l
			}
		}
	}
	sort.Strings(set.Live)
	return set, planErr
}

// Range formats shard i's range of namespace hashes under e, "[0x…, 0x…)".
func (e Epoch) Range(i int) string {
	start, end := e.Plan.Bounds(i)
	return fmt.Sprintf("[%s, %s)", start, end)
}

// Status says, for /statusz, the plan, the shards this replica holds or campaigns
// for, and its fair share, e.g. "6 shards, plan epoch 2 | holding 1 [0x…, 0x…), 4 [0x…,
// 0x…) | campaigning for none | 3 live replicas, fair share 2 | coordinating".
func (r *Replica) Status() string {
	all, _ := r.leases.List(labels.Everything())
	now := r.now()
	set, _ := ReadLeaseSet(r.Base, all, func(l *coordinationv1.Lease) bool { return r.seen.expired(l, now) })
	active, next, live := set.Active, set.Next, len(set.Live)
	parts := []string{fmt.Sprintf("%d shards", r.Shards)}
	switch {
	case active == nil:
		parts[0] += ", no plan yet"
	case next != nil:
		parts[0] += fmt.Sprintf(", plan epoch %d handing over to %d", active.Number, next.Number)
	default:
		parts[0] += fmt.Sprintf(", plan epoch %d", active.Number)
	}
	r.mu.Lock()
	var held, campaigning []string
	for shard, e := range r.elections {
		switch {
		case e.leading.Load() && active != nil && e.label == active.Label(shard) && shard < active.Plan.Shards():
			held = append(held, fmt.Sprintf("%d %s", shard, active.Range(shard)))
		case e.leading.Load():
			held = append(held, fmt.Sprintf("%d (epoch %s, handing over)", shard, e.label))
		default:
			campaigning = append(campaigning, strconv.Itoa(shard))
		}
	}
	r.mu.Unlock()
	sort.Strings(held)
	sort.Strings(campaigning)
	parts = append(parts, "holding "+namesOrNone(held), "campaigning for "+namesOrNone(campaigning),
		fmt.Sprintf("%d live replicas, fair share %d", live, fairShare(r.Shards, live)))
	if dropped := r.outOfRange.dropped.Load(); dropped > 0 || r.unfilteredAtStart.Load() {
		parts = append(parts, fmt.Sprintf("the apiserver ignores shardSelector: %d objects outside their shard dropped, memory not reduced", dropped))
	}
	if r.coordinator.coordinating.Load() {
		parts = append(parts, "coordinating (cuts the namespaces)")
	}
	return strings.Join(parts, " | ")
}

func namesOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
