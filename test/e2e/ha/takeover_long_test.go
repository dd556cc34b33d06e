//go:build long

package ha

import (
	"fmt"
	"testing"
)

// The takeover measurements of issue 24, run by make test-long: SIGKILL → the Lease
// names a new holder, five runs at the default timings and at upstream's (target:
// the lease duration + 0.5s), and the lagging-standby takeovers ten times each. They
// log their numbers with the prefixes HA-NUMBERS and HA-TAKEOVER.

func TestLongSIGKILLToNewHolderAtDefaultTimings(t *testing.T) {
	measureSIGKILLToNewHolder(t, defaultTimings, failoverRuns)
}

func TestLongSIGKILLToNewHolderAtUpstreamTimings(t *testing.T) {
	measureSIGKILLToNewHolder(t, upstreamTimings, failoverRuns)
}

// laggingTakeoverRuns is how often each lagging-standby story runs.
const laggingTakeoverRuns = 10

func TestLongTakeoversOnALaggingCacheCreateAndDeleteExactlyWhatTheScaleAsks(t *testing.T) {
	for i := range laggingTakeoverRuns {
		t.Run(fmt.Sprintf("scale-up-%d", i), func(t *testing.T) { runLaggingTakeover(t, 0, 50, informerLag, "") })
		t.Run(fmt.Sprintf("scale-down-%d", i), func(t *testing.T) { runLaggingTakeover(t, 50, 10, informerLag, "") })
	}
}
