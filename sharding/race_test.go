//go:build race

package sharding

// raceEnabled is set in race builds: the race detector's runtime keeps a stack trace
// per goroutine it ever saw, and crashes (SIGSEGV in its stack depot) after the millions
// of short goroutines of a few dozen replica schedules in one process.
const raceEnabled = true
