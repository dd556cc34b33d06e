package framework

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
)

// failureRecorder is the testing.TB a check runs with in RecordFailures: it records the
// check's failures instead of failing the test, and a Fatal ends the check's goroutine.
// Logs go to the test.
type failureRecorder struct {
	testing.TB
	mu       sync.Mutex
	failures []string
}

func (r *failureRecorder) record(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, msg)
}

func (r *failureRecorder) Error(args ...any)                 { r.record(fmt.Sprint(args...)) }
func (r *failureRecorder) Errorf(format string, args ...any) { r.record(fmt.Sprintf(format, args...)) }
func (r *failureRecorder) Fail()                             { r.record("Fail called") }
func (r *failureRecorder) FailNow()                          { r.record("FailNow called"); runtime.Goexit() }
func (r *failureRecorder) Fatal(args ...any)                 { r.record(fmt.Sprint(args...)); runtime.Goexit() }
func (r *failureRecorder) Fatalf(format string, args ...any) {
	r.record(fmt.Sprintf(format, args...))
	runtime.Goexit()
}

func (r *failureRecorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.failures) > 0
}

// The check must not skip the test from its own goroutine.
func (r *failureRecorder) Skip(args ...any) { r.Fatal(append([]any{"Skip called: "}, args...)...) }
func (r *failureRecorder) Skipf(format string, args ...any) {
	r.Fatalf("Skipf called: "+format, args...)
}
func (r *failureRecorder) SkipNow() { r.Fatal("SkipNow called") }

// RecordFailures runs check, in a goroutine of its own, with a testing.TB that records
// its failures instead of failing tb's test, and returns them: the test of a test runs a
// check against a product with a planted bug (MiniKCMBinaryWithMutation) and asserts
// that, and how, the check failed.
func RecordFailures(tb testing.TB, check func(testing.TB)) []string {
	tb.Helper()
	r := &failureRecorder{TB: tb}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(r)
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.failures...)
}
