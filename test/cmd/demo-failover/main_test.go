package main

import (
	"strings"
	"syscall"
	"testing"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// TestDemoHandsOverOnSIGTERMAndSIGKILLAndTheNewLeadersReconcile runs the whole demo, as
// `make demo-failover` does, with its output in the test log: with the default election
// timings and deploy/'s RBAC, the leader hands over after SIGTERM (releasing the Lease
// and exiting 0) and after SIGKILL, each new leader is a different replica, scales the
// sample app, and `mini-kcm leader` reports both. Takeover times are printed, not
// asserted: the machine may be loaded.
func TestDemoHandsOverOnSIGTERMAndSIGKILLAndTheNewLeadersReconcile(t *testing.T) {
	res, err := run(t.Context(), t.Output(), config{
		binary:    framework.MiniKCMBinary(t),
		deployDir: "../../../deploy",
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.dataRaces) > 0 {
		t.Errorf("replicas reported data races: %v", res.dataRaces)
	}
	if len(res.takeovers) != 2 {
		t.Fatalf("%d takeovers, want 2", len(res.takeovers))
	}
	graceful, crash := res.takeovers[0], res.takeovers[1]
	for _, tk := range res.takeovers {
		if tk.from == "" || tk.to == "" || tk.from == tk.to {
			t.Errorf("after %v the lease went from %q to %q, want another replica", tk.signal, tk.from, tk.to)
		}
	}
	if graceful.signal != syscall.SIGTERM || graceful.exitCode != 0 || !graceful.released {
		t.Errorf("SIGTERM: the leader exited with %d, released the lease: %v; want 0 and true", graceful.exitCode, graceful.released)
	}
	if crash.signal != syscall.SIGKILL || crash.exitCode != -1 {
		t.Errorf("SIGKILL: the leader exited with %d, want -1 (killed)", crash.exitCode)
	}
	if graceful.scaledTo != 4 || crash.scaledTo != 5 {
		t.Errorf("the sample app was scaled to %d and %d, want 4 and 5", graceful.scaledTo, crash.scaledTo)
	}
	// `mini-kcm leader` names the holder, and afterwards counts both transitions and
	// the candidates the LeaderElection events recorded.
	if !strings.Contains(res.leaderBefore, "Transitions:     0") || !strings.Contains(res.leaderBefore, graceful.from) {
		t.Errorf("mini-kcm leader before the failovers does not show %s holding an unchanged lease:\n%s", graceful.from, res.leaderBefore)
	}
	if !strings.Contains(res.leaderAfter, "Transitions:     2") || !strings.Contains(res.leaderAfter, "Holder:          "+crash.to) {
		t.Errorf("mini-kcm leader after the failovers does not show %s holding the lease after 2 transitions:\n%s", crash.to, res.leaderAfter)
	}
	for _, identity := range []string{graceful.from, graceful.to, crash.to} {
		if !strings.Contains(res.leaderAfter, identity) {
			t.Errorf("mini-kcm leader after the failovers does not list candidate %s:\n%s", identity, res.leaderAfter)
		}
	}
	t.Logf("DEMO-TAKEOVER SIGTERM %.2fs SIGKILL %.2fs", graceful.took.Seconds(), crash.took.Seconds())
}
