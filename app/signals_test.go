package app

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"
)

func TestFirstSignalCancelsAndSecondExitsAtOnce(t *testing.T) {
	exited := make(chan int, 1)
	ctx, stop := withShutdownSignals(context.Background(), func(code int) { exited <- code })
	defer stop()
	self, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}

	if err := self.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the first SIGTERM did not cancel the context")
	}
	select {
	case code := <-exited:
		t.Fatalf("the first signal exited with %d", code)
	default:
	}

	if err := self.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exited:
		if code != 1 {
			t.Errorf("exit code = %d, want 1", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the second SIGTERM did not exit")
	}
}
