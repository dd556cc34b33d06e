package sharding

// mutation names a bug the simulation test (sim_test.go) plants on purpose, to show
// that its schedules catch it (see Config.mutation). The product never sets one.
//
// Two bugs the issue listed are no longer bugs since a label names its range: a new
// epoch keeping a moved shard's Since, and a new epoch number ignoring the shard
// Leases' labels, only let an epoch number repeat, which the labels tolerate.
type mutation int

const (
	noMutation mutation = iota
	// mutationRelabelHeld makes a handover relabel shard Leases that are still held.
	mutationRelabelHeld
	// mutationCreateReleased creates missing shard Leases released instead of held by
	// the coordinator for a lease duration.
	mutationCreateReleased
	// mutationPendingStopsNothing makes a pending plan stop no election.
	mutationPendingStopsNothing
	// mutationNoWaitForRecreatedHold makes a handover done while a recreated shard
	// Lease is still held by the coordinator.
	mutationNoWaitForRecreatedHold
	// mutationObserveIgnoresVersion makes an observation keep the time a Lease was
	// first seen when its resourceVersion changes.
	mutationObserveIgnoresVersion
	// mutationNoLabelGuard runs shard elections without GuardEpoch.
	mutationNoLabelGuard
	// mutationCampaignUnsettled lets a replica campaign under an active plan while
	// some shard Lease still carries another label.
	mutationCampaignUnsettled
)

// plantedMutation is set by the linker only, for the end-to-end test that shows the
// audit-log checks catch a replica whose shard informers keep every namespace
// (test/e2e/foundation, the range filter's mutation test):
//
//	go build -ldflags "-X github.com/mini-kcm/mini-kcm/sharding.plantedMutation=no-range-filter"
//
// A release build leaves it empty; a replica of a build that set it says so at start.
var plantedMutation string

// rangeFilterOff makes every shard's range filter admit every object: the planted bug
// "range filter off".
var rangeFilterOff = plantedMutation == "no-range-filter"
