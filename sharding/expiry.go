package sharding

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
)

// One rule says when a Lease has expired, for every reader of the Leases: a replica's
// decisions (decideReplica, decideHandOver), the coordinator, /statusz and
// `mini-kcm leader`. It is client-go's: a held Lease expires once it has not changed
// for longer than its leaseDurationSeconds, counted from the last change the reader
// knows of. Readers differ only in what they know of that change:
//
//   - a replica lists the Leases again and again and counts from when it saw a
//     Lease's resourceVersion change, by its own clock (observations), so that the
//     replicas' clocks may differ;
//   - a reader that reads once (`mini-kcm leader`) knows only the holder's renewTime,
//     by the holder's clock (ExpiredByRenewTime).

// LeaseExpired reports whether l may be taken from its holder at now: it is released
// (no holder), or it has not changed for longer than its duration since changed, the
// last change the reader knows of. The rule errs on the side of the holder:
//
//   - changed nil means the reader knows of no change: it sees the Lease for the first
//     time (or at a new resourceVersion), so the Lease has just changed and is not
//     expired;
//   - a change after now (the holder's clock ahead of the reader's) is not expired;
//   - exactly the duration after the change is not expired yet;
//   - a Lease without a duration (or a negative one) expires as soon as any time has
//     passed since its change, as client-go's election reads it.
func LeaseExpired(l *coordinationv1.Lease, changed *time.Time, now time.Time) bool {
	if holder(l) == "" {
		return true
	}
	if changed == nil {
		return false
	}
	d := time.Duration(max(ptr.Deref(l.Spec.LeaseDurationSeconds, 0), 0)) * time.Second
	return now.Sub(*changed) > d
}

// ExpiredByRenewTime is LeaseExpired for a reader that read l once and so never saw it
// change: the last change it knows of is the holder's renewTime, by the holder's
// clock. A held Lease without a renewTime is not expired: nothing tells this reader
// when it changed (a replica would count from when it first saw it).
func ExpiredByRenewTime(l *coordinationv1.Lease, now time.Time) bool {
	var changed *time.Time
	if l.Spec.RenewTime != nil {
		changed = &l.Spec.RenewTime.Time
	}
	return LeaseExpired(l, changed, now)
}

// changedAt returns when a reader that observed seen last saw l change: nil when it has
// not seen l at its current resourceVersion (see LeaseExpired).
func changedAt(seen map[string]observation, l *coordinationv1.Lease) *time.Time {
	s, ok := seen[l.Name]
	if !ok || s.resourceVersion != l.ResourceVersion {
		return nil
	}
	return &s.at
}

// holder returns a Lease's holder identity, "" when released.
func holder(l *coordinationv1.Lease) string {
	return ptr.Deref(l.Spec.HolderIdentity, "")
}
