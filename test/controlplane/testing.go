package controlplane

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
)

// StartForTest starts a control plane for one test (or benchmark) and stops it when
// the test ends. A failed test logs the end of every component's log. SIGINT and
// SIGTERM stop the control plane before the test binary exits.
//
// Suites that share one control plane across tests start it in TestMain instead; see
// the e2e framework.
func StartForTest(tb testing.TB, opts Options) *ControlPlane {
	tb.Helper()
	if opts.Logf == nil {
		opts.Logf = tb.Logf
	}
	cp, err := Start(context.Background(), opts)
	if err != nil {
		tb.Fatalf("starting control plane: %v", err)
	}
	stopSignals := StopOnSignal(func() { _ = cp.Stop() })
	tb.Cleanup(func() {
		stopSignals()
		if tb.Failed() {
			tb.Log(cp.LogTails(40))
		}
		if err := cp.Stop(); err != nil {
			tb.Errorf("stopping control plane: %v", err)
		}
	})
	return cp
}

// LogTails returns the last n lines of every component's log, for failure reports.
func (cp *ControlPlane) LogTails(n int) string {
	var out string
	for _, name := range []string{Etcd, KubeAPIServer, KubeScheduler, KWOK, KubeControllerManager, Containerd, Kubelet, KubeProxy} {
		if _, err := os.Stat(cp.LogPath(name)); err != nil {
			continue
		}
		out += fmt.Sprintf("---- last %d lines of %s ----\n%s\n", n, cp.LogPath(name), Tail(cp.LogPath(name), n))
	}
	return out
}

// StopOnSignal runs stop and exits the process with status 1 when SIGINT or SIGTERM
// arrives. It returns a function that stops listening. Test binaries use it so that an
// interrupted run removes its directories; the children would die with the parent
// anyway.
func StopOnSignal(stop func()) (cancel func()) {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-signals:
			fmt.Fprintf(os.Stderr, "received %v: stopping the local control plane\n", sig)
			stop()
			os.Exit(1)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(signals)
		close(done)
	}
}
