package sharding

import (
	"fmt"
	"hash/fnv"
	"sort"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// A replica's decisions are a pure function of what it has observed: decide takes a
// view (the Leases as last seen, when each was seen to change, and this replica's own
// elections) and the time, and returns the actions to take. The replica's loop
// (Replica.reconcile) only builds the view and carries the actions out, so that the
// protocol can be tested case by case, without an apiserver or goroutines.

// replicaView is what a replica knows when it decides.
type replicaView struct {
	// identity is this replica's holder identity; base names the Leases.
	identity, base string
	// leases are the Leases of base as last listed; seen tells when each was last seen
	// to change, by this replica's clock (see observations).
	leases []*coordinationv1.Lease
	seen   map[string]observation
	// elections are this replica's running shard elections, by shard.
	elections map[int]electionView
	// mutation is Config.mutation, for the simulation test.
	mutation mutation
}

// electionView is one of the replica's shard elections.
type electionView struct {
	// label is the Epoch.Label of the range the election works for.
	label    string
	leading  bool
	stopping bool
}

// actionKind is what an action does.
type actionKind int

const (
	// stopElection cancels a shard's election: its term drains, then the Lease is
	// released.
	stopElection actionKind = iota
	// campaign starts an election for a shard under an epoch.
	campaign
)

// action is one decision of a replica.
type action struct {
	kind  actionKind
	shard int
	// why says, for the log, why an election stops.
	why string
	// epoch is the epoch a campaign works for; expired, when set, is the shard Lease
	// the replica saw expire in another replica's hands (see breakExpired).
	epoch   Epoch
	expired *coordinationv1.Lease
}

// expiredAt reports whether l has expired (LeaseExpired) for a reader that observed
// seen: a Lease not seen, or seen at another resourceVersion, has just changed.
func expiredAt(l *coordinationv1.Lease, seen map[string]observation, now time.Time) bool {
	return LeaseExpired(l, changedAt(seen, l), now)
}

// decideReplica returns the elections to stop and to start so that the replica holds
// its fair share of the active plan's shards. While a next plan is pending it stops
// the elections of the shards whose range the next plan moves, keeps the others, and
// starts none.
// It returns errors only for an unreadable plan, which it then ignores.
func decideReplica(v replicaView, now time.Time) ([]action, error) {
	var (
		actions      []action
		active, next *Epoch
		planErr      error
		byName       = map[string]*coordinationv1.Lease{}
		live         int
		stopping     = map[int]bool{}
	)
	for shard, e := range v.elections {
		stopping[shard] = e.stopping
	}
	stop := func(shard int, why string) {
		if stopping[shard] {
			return
		}
		stopping[shard] = true
		actions = append(actions, action{kind: stopElection, shard: shard, why: why})
	}
	for _, l := range v.leases {
		byName[l.Name] = l
		switch l.Labels[LabelRole] {
		case RolePlan:
			var err error
			if active, next, err = PlanOf(l); err != nil {
				active, next, planErr = nil, nil, err
			}
		case RoleMember:
			if !expiredAt(l, v.seen, now) {
				live++
			}
		}
	}
	shards := sortedShards(v.elections)
	// A next plan stops the elections of the shards whose range it moves, with or
	// without an active plan (a recreated plan Lease has only a next one, whose ranges
	// are all new): they are handed over to it. A shard whose range stays keeps its
	// Lease's label, its holder and its workers.
	if next != nil {
		if v.mutation == mutationPendingStopsNothing {
			return actions, planErr
		}
		for _, shard := range shards {
			if v.elections[shard].label != next.Label(shard) || shard >= next.Plan.Shards() {
				stop(shard, fmt.Sprintf("the plan moves to epoch %d, which moves the shard's range", next.Number))
			}
		}
		return actions, planErr
	}
	if active == nil {
		return actions, planErr // the coordinator has not cut the namespaces yet
	}
	for _, shard := range shards {
		if e := v.elections[shard]; e.label != active.Label(shard) || shard >= active.Plan.Shards() {
			stop(shard, fmt.Sprintf("the shard's range is epoch %s's, the plan at epoch %d gives it epoch %s's", e.label, active.Number, active.Label(shard)))
		}
	}

	count := active.Plan.Shards()
	share := fairShare(count, live)
	var leading, campaigning []int
	for _, shard := range shards {
		switch {
		case stopping[shard]:
		case v.elections[shard].leading:
			leading = append(leading, shard)
		default:
			campaigning = append(campaigning, shard)
		}
	}
	for _, shard := range campaigning {
		if l := byName[ShardLeaseName(v.base, shard)]; l != nil && holder(l) != v.identity && !expiredAt(l, v.seen, now) {
			stop(shard, "another replica holds it")
		}
	}
	if len(leading) > share {
		// One at a time: the next pass sees whether the others still need to go.
		stop(leading[len(leading)-1], fmt.Sprintf("holding %d shards, above the fair share of %d for %d live replicas", len(leading), share, live))
		return actions, planErr
	}
	// Campaign only under a settled plan, one whose shard Leases all carry its labels:
	// the coordinator activates a plan only then, but a plan edited by hand, or a shard
	// Lease re-created with an old label, is active before its Leases are relabelled,
	// and a shard taken under the new cuts could overlap the old range of a neighbour
	// whose holder has not stopped yet. The coordinator relabels those Leases once
	// released or expired, as in a handover.
	for shard := range count {
		l := byName[ShardLeaseName(v.base, shard)]
		if (l == nil || l.Labels[LabelEpoch] != active.Label(shard)) && v.mutation != mutationCampaignUnsettled {
			return actions, planErr
		}
	}
	wanted := share - len(leading)
	for _, shard := range campaigning {
		if !stopping[shard] {
			wanted--
		}
	}
	// Start where this replica's identity hashes to, so that replicas starting
	// together do not all campaign for shard 0 first.
	h := fnv.New32a()
	h.Write([]byte(v.identity))
	offset := int(h.Sum32() % uint32(count))
	for k := 0; k < count && wanted > 0; k++ {
		shard := (offset + k) % count
		l := byName[ShardLeaseName(v.base, shard)]
		if _, ours := v.elections[shard]; ours || l == nil || l.Labels[LabelEpoch] != active.Label(shard) {
			continue
		}
		other := holder(l) != "" && holder(l) != v.identity
		if other && !expiredAt(l, v.seen, now) {
			continue
		}
		a := action{kind: campaign, shard: shard, epoch: *active}
		if other {
			a.expired = l
		}
		actions = append(actions, a)
		wanted--
	}
	return actions, planErr
}

func sortedShards(elections map[int]electionView) []int {
	shards := make([]int, 0, len(elections))
	for shard := range elections {
		shards = append(shards, shard)
	}
	sort.Ints(shards)
	return shards
}
