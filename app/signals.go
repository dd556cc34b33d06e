package app

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"
)

// withShutdownSignals returns a context cancelled by the first SIGTERM or SIGINT, which
// starts a graceful shutdown. A second signal calls exit(1) at once, for an operator who
// does not want to wait for the controllers to drain. stop releases the signal handlers.
func withShutdownSignals(parent context.Context, exit func(code int)) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(parent)
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, os.Interrupt)
	done := make(chan struct{})
	handled := make(chan struct{})
	go func() {
		defer close(handled)
		logger := klog.FromContext(parent)
		select {
		case sig := <-signals:
			logger.Info("Received signal, shutting down gracefully; send it again to exit at once", "signal", sig.String())
			cancel()
		case <-done:
			return
		}
		select {
		case sig := <-signals:
			logger.Info("Received second signal, exiting at once", "signal", sig.String())
			exit(1)
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(signals)
		close(done)
		<-handled
		cancel()
	}
}
