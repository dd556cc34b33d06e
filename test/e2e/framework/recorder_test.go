package framework

import (
	"slices"
	"testing"
)

func TestRecordFailuresKeepsEveryFailureAndAFatalEndsOnlyTheCheck(t *testing.T) {
	reached := false
	got := RecordFailures(t, func(tb testing.TB) {
		tb.Helper()
		tb.Errorf("first %d", 1)
		tb.Error("second")
		if !tb.Failed() {
			t.Error("Failed() = false after Errorf")
		}
		tb.Fatalf("fatal %s", "third")
		reached = true
	})
	if want := []string{"first 1", "second", "fatal third"}; !slices.Equal(got, want) {
		t.Errorf("recorded %q, want %q", got, want)
	}
	if reached {
		t.Error("the check went on after Fatalf")
	}
	if got := RecordFailures(t, func(testing.TB) {}); len(got) != 0 {
		t.Errorf("a passing check recorded %q", got)
	}
}
