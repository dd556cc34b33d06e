package sharding

import (
	"testing"
	"time"
)

// A stall of the apiserver longer than a Lease's duration must not expire the Lease by
// the contact clock: only maxGap of it counts.
func TestTheContactClockDoesNotCountAStall(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start
	c := &contactClock{maxGap: 1500 * time.Millisecond, real: func() time.Time { return now }}
	step := func(d time.Duration, answered bool) {
		now = now.Add(d)
		if answered {
			c.answered(now)
		}
	}
	step(0, true)
	for range 4 {
		step(500*time.Millisecond, true)
	}
	if got := c.Now().Sub(start); got != 2*time.Second {
		t.Fatalf("in contact for 2s: clock advanced %s", got)
	}
	for range 60 { // a 30s stall: no answer
		step(500*time.Millisecond, false)
	}
	if got := c.Now().Sub(start); got != 3500*time.Millisecond {
		t.Errorf("30s into a stall: clock advanced %s, want 2s + the 1.5s tolerance", got)
	}
	step(500*time.Millisecond, true)
	if got := c.Now().Sub(start); got != 3500*time.Millisecond {
		t.Errorf("at the first answer after the stall: clock advanced %s, want 3.5s (monotonic, no jump)", got)
	}
	step(time.Second, true)
	if got := c.Now().Sub(start); got != 4500*time.Millisecond {
		t.Errorf("1s in contact after the stall: clock advanced %s, want 4.5s", got)
	}
	before := c.Now()
	step(200*time.Millisecond, false)
	if !c.Now().After(before) {
		t.Error("the clock stood still within the tolerance after an answer")
	}
}
