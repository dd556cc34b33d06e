//go:build race

package sharding

// raceEnabled is set in race builds. The race detector's runtime crashed in the replica
// simulation's bubbles (go1.26.8) with a SIGSEGV: in its stack depot after a few dozen
// schedules in one process (millions of short goroutines), in a timer's channel send
// after 43, and once within the first 3s of a run whose trace was not kept.
const raceEnabled = true
