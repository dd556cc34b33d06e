package sharding

import (
	"fmt"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

func TestReplicaDecisions(t *testing.T) {
	now := time.Now()
	e2 := Epoch{Number: 2, Plan: Equal(3)}
	e3 := Epoch{Number: 3, Plan: Equal(3)}
	// e3kept moves only the cut between shards 1 and 2: shard 0 keeps epoch 2's range.
	e3kept := e2.Next(3, Plan{Cuts: []uint64{e2.Plan.Cuts[0], e2.Plan.Cuts[1] + 1}})
	member := func(id string) *coordinationv1.Lease { return lease(MemberLeaseName(testBase, id), RoleMember, "", id) }
	shard := func(i int, epoch Epoch, holder string) *coordinationv1.Lease {
		return lease(ShardLeaseName(testBase, i), RoleShard, epoch.Label(i), holder)
	}
	renewed := func(l *coordinationv1.Lease) *coordinationv1.Lease { l.ResourceVersion = "2"; return l }
	// Every Lease was seen at resourceVersion 1, recent ones 1s ago and old ones a minute ago.
	seenAt := func(ago time.Duration, leases ...*coordinationv1.Lease) map[string]observation {
		seen := map[string]observation{}
		for _, l := range leases {
			seen[l.Name] = observation{resourceVersion: "1", at: now.Add(-ago)}
		}
		return seen
	}
	merge := func(ms ...map[string]observation) map[string]observation {
		out := map[string]observation{}
		for _, m := range ms {
			for k, v := range m {
				out[k] = v
			}
		}
		return out
	}
	three := []*coordinationv1.Lease{member("me"), member("b"), member("c")}

	for _, tc := range []struct {
		name      string
		leases    []*coordinationv1.Lease
		seen      map[string]observation
		elections map[int]electionView
		want      []string
	}{{
		name:   "before the first plan nothing starts",
		leases: []*coordinationv1.Lease{member("me"), shard(0, e2, "")},
		want:   nil,
	}, {
		name:      "a next plan without an active one stops every election",
		leases:    []*coordinationv1.Lease{planLease(nil, &e3), member("me")},
		elections: map[int]electionView{0: {label: e2.Label(0), leading: true}, 2: {label: e2.Label(2)}},
		want:      []string{"stop 0", "stop 2"},
	}, {
		name:      "a next plan stops the elections of the active one",
		leases:    []*coordinationv1.Lease{planLease(&e2, &e3), member("me")},
		elections: map[int]electionView{1: {label: e2.Label(1), leading: true}},
		want:      []string{"stop 1"},
	}, {
		name:      "a next plan that moves only the cut between shards 1 and 2 stops only their elections",
		leases:    []*coordinationv1.Lease{planLease(&e2, &e3kept), member("me")},
		elections: map[int]electionView{0: {label: e2.Label(0), leading: true}, 1: {label: e2.Label(1), leading: true}, 2: {label: e2.Label(2)}},
		want:      []string{"stop 1", "stop 2"},
	}, {
		name:      "once the next plan is active, the kept shard's election goes on under its old label",
		leases:    []*coordinationv1.Lease{planLease(&e3kept, nil), member("me"), shard(0, e3kept, "me"), shard(1, e3kept, ""), shard(2, e3kept, "")},
		elections: map[int]electionView{0: {label: e2.Label(0), leading: true}},
		want:      []string{"campaign 1", "campaign 2"},
	}, {
		name:   "alone, a replica campaigns for every free shard of the active epoch",
		leases: []*coordinationv1.Lease{planLease(&e2, nil), member("me"), shard(0, e2, ""), shard(1, e2, ""), shard(2, e2, "")},
		want:   []string{"campaign 0", "campaign 1", "campaign 2"},
	}, {
		name:   "while a shard Lease carries another epoch's label (a plan edited by hand) nothing is campaigned for",
		leases: []*coordinationv1.Lease{planLease(&e2, nil), member("me"), shard(0, e2, ""), shard(1, e3kept, ""), shard(2, e2, "")},
		want:   nil,
	}, {
		name:   "while a shard Lease is missing nothing is campaigned for",
		leases: []*coordinationv1.Lease{planLease(&e2, nil), member("me"), shard(0, e2, ""), shard(2, e2, "")},
		want:   nil,
	}, {
		// Delete the plan and the shard Leases that carry the highest epoch, and the
		// coordinator numbers the next epoch as one it had used before, with other cuts.
		name:      "a next plan that reuses an epoch number with other cuts stops the elections of the old cuts",
		leases:    []*coordinationv1.Lease{planLease(nil, &Epoch{Number: 2, Plan: Plan{Cuts: []uint64{1 << 62, 1 << 63}}}), member("me")},
		elections: map[int]electionView{0: {label: e2.Label(0), leading: true}, 1: {label: e2.Label(1)}, 2: {label: e2.Label(2)}},
		want:      []string{"stop 0", "stop 1", "stop 2"},
	}, {
		name: "an active plan edited by hand to other cuts under the same number stops the elections of the old cuts",
		leases: []*coordinationv1.Lease{planLease(&Epoch{Number: 2, Plan: Plan{Cuts: []uint64{1 << 62, 1 << 63}}}, nil), member("me"),
			shard(0, e2, "me"), shard(1, e2, ""), shard(2, e2, "")},
		elections: map[int]electionView{0: {label: e2.Label(0), leading: true}, 1: {label: e2.Label(1)}},
		want:      []string{"stop 0", "stop 1"},
	}, {
		name:      "an election of an older epoch stops",
		leases:    []*coordinationv1.Lease{planLease(&e3, nil), member("me"), shard(0, e3, "me")},
		elections: map[int]electionView{0: {label: e2.Label(0), leading: true}},
		want:      []string{"stop 0"},
	}, {
		name:      "above the fair share the highest held shard is handed over, one at a time",
		leases:    append([]*coordinationv1.Lease{planLease(&e2, nil), shard(0, e2, "me"), shard(1, e2, "me"), shard(2, e2, "c")}, three...),
		seen:      seenAt(time.Second, three...),
		elections: map[int]electionView{0: {label: e2.Label(0), leading: true}, 1: {label: e2.Label(1), leading: true}},
		want:      []string{"stop 1"},
	}, {
		name:   "a shard another replica renewed recently is left to it",
		leases: append([]*coordinationv1.Lease{planLease(&e2, nil), shard(0, e2, "b"), shard(1, e2, "c"), shard(2, e2, "")}, three...),
		seen:   seenAt(time.Second, append(three, shard(0, e2, "b"), shard(1, e2, "c"))...),
		want:   []string{"campaign 2"},
	}, {
		name:   "a shard whose holder stopped renewing it is taken, releasing it first",
		leases: []*coordinationv1.Lease{planLease(&e2, nil), member("me"), shard(0, e2, "gone"), shard(1, e2, "gone"), shard(2, e2, "gone")},
		seen:   merge(seenAt(time.Second, member("me")), seenAt(time.Minute, shard(0, e2, "gone"), shard(1, e2, "gone"), shard(2, e2, "gone"))),
		want:   []string{"campaign 0 breaking gone", "campaign 1 breaking gone", "campaign 2 breaking gone"},
	}, {
		name: "a shard renewed since it was seen (another resourceVersion) is not expired",
		leases: []*coordinationv1.Lease{planLease(&e2, nil), member("me"),
			renewed(shard(0, e2, "b")), renewed(shard(1, e2, "b")), renewed(shard(2, e2, "b"))},
		seen: merge(seenAt(time.Second, member("me")), seenAt(time.Minute, shard(0, e2, "b"), shard(1, e2, "b"), shard(2, e2, "b"))),
		want: nil,
	}, {
		name:      "a campaign for a shard another replica holds stops",
		leases:    append([]*coordinationv1.Lease{planLease(&e2, nil), shard(0, e2, "b"), shard(1, e2, "c"), shard(2, e2, "")}, three...),
		seen:      seenAt(time.Second, append(three, shard(0, e2, "b"), shard(1, e2, "c"))...),
		elections: map[int]electionView{0: {label: e2.Label(0)}},
		want:      []string{"campaign 2", "stop 0"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			seen := tc.seen
			if seen == nil {
				seen = seenAt(time.Second, tc.leases...)
			}
			elections := tc.elections
			if elections == nil {
				elections = map[int]electionView{}
			}
			actions, err := decideReplica(replicaView{identity: "me", base: testBase, leases: tc.leases, seen: seen, elections: elections}, now)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range actions {
				switch a.kind {
				case stopElection:
					got = append(got, fmt.Sprintf("stop %d", a.shard))
				case campaign:
					s := fmt.Sprintf("campaign %d", a.shard)
					if a.expired != nil {
						s += " breaking " + holder(a.expired)
					}
					got = append(got, s)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("decided %q, want %q", got, tc.want)
			}
		})
	}
}

func TestHandOverDecisions(t *testing.T) {
	now := time.Now()
	e2 := Epoch{Number: 2, Plan: Equal(3)}
	e3 := Epoch{Number: 3, Plan: Equal(2)}
	e3kept := e2.Next(3, Plan{Cuts: []uint64{e2.Plan.Cuts[0], e2.Plan.Cuts[1] + 1}})
	shard := func(i int, epoch Epoch, holder string) *coordinationv1.Lease {
		return lease(ShardLeaseName(testBase, i), RoleShard, epoch.Label(i), holder)
	}
	seen := func(ago time.Duration, rv string, leases ...*coordinationv1.Lease) map[string]observation {
		out := map[string]observation{}
		for _, l := range leases {
			out[l.Name] = observation{resourceVersion: rv, at: now.Add(-ago)}
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		leases   []*coordinationv1.Lease
		seen     map[string]observation
		next     *Epoch // e3 when nil
		want     []string
		wantDone bool
	}{{
		name:     "every Lease carries the next epoch: done",
		leases:   []*coordinationv1.Lease{shard(0, e3, "a"), shard(1, e3, "")},
		wantDone: true,
	}, {
		name:   "missing Leases are created, released ones relabelled, held ones waited for",
		leases: []*coordinationv1.Lease{shard(1, e2, ""), shard(2, e2, "b")},
		seen:   seen(time.Second, "1", shard(2, e2, "b")),
		want:   []string{"create 0", "relabel 1"},
	}, {
		name:   "a Lease whose holder stopped renewing it is relabelled",
		leases: []*coordinationv1.Lease{shard(0, e3, ""), shard(1, e2, "gone")},
		seen:   seen(time.Minute, "1", shard(1, e2, "gone")),
		want:   []string{"relabel 1"},
	}, {
		name:   "a Lease renewed since it was seen (another resourceVersion) is waited for",
		leases: []*coordinationv1.Lease{shard(0, e3, ""), shard(1, e2, "b")},
		seen:   seen(time.Minute, "0", shard(1, e2, "b")),
	}, {
		name:     "a held Lease whose range the next plan keeps is left alone",
		leases:   []*coordinationv1.Lease{shard(0, e3kept, "a"), shard(1, e3kept, ""), shard(2, e3kept, "b")},
		next:     &e3kept,
		seen:     seen(time.Second, "1", shard(0, e3kept, "a")),
		wantDone: true,
	}, {
		name:   "a held Lease whose range the next plan moves is waited for",
		leases: []*coordinationv1.Lease{shard(0, e2, "a"), shard(1, e2, "b"), shard(2, e2, "")},
		next:   &e3kept,
		seen:   seen(time.Second, "1", shard(0, e2, "a"), shard(1, e2, "b")),
		want:   []string{"relabel 2"},
	}, {
		name:   "a Lease the coordinator created for a deleted one is waited for until it expires",
		leases: []*coordinationv1.Lease{shard(0, e3, recreatedHolder), shard(1, e3, "")},
		seen:   seen(time.Second, "1", shard(0, e3, recreatedHolder)),
	}, {
		name:     "a Lease the coordinator created for a deleted one counts once it expired",
		leases:   []*coordinationv1.Lease{shard(0, e3, recreatedHolder), shard(1, e3, "")},
		seen:     seen(time.Minute, "1", shard(0, e3, recreatedHolder)),
		wantDone: true,
	}, {
		name:   "a Lease above a gap and beyond the next plan is relabelled",
		leases: []*coordinationv1.Lease{shard(0, e3, ""), shard(1, e3, ""), shard(3, e2, "")},
		want:   []string{"relabel 3"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			next := e3
			if tc.next != nil {
				next = *tc.next
			}
			actions, done := decideHandOver(testBase, tc.leases, tc.seen, next, now, noMutation)
			var got []string
			for _, a := range actions {
				verb := map[coordinatorActionKind]string{createShardLease: "create", relabelShardLease: "relabel"}[a.kind]
				got = append(got, fmt.Sprintf("%s %d", verb, a.shard))
			}
			if !slices.Equal(got, tc.want) || done != tc.wantDone {
				t.Errorf("decided %q (done %v), want %q (done %v)", got, done, tc.want, tc.wantDone)
			}
		})
	}
}
