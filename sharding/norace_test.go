//go:build !race

package sharding

// raceEnabled is set in race builds (see race_test.go).
const raceEnabled = false
