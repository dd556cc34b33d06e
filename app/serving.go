package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/options"
)

// healthEndpoints are the handlers of the three health endpoints.
type healthEndpoints struct {
	livez, healthz, readyz http.Handler
}

// newHandler returns the mux of the health, metrics and debug endpoint. It serves plain
// HTTP without authentication, so nothing on it may change state.
func newHandler(e healthEndpoints, profiling bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/livez", e.livez)
	mux.Handle("/healthz", e.healthz)
	mux.Handle("/readyz", e.readyz)
	mux.Handle("/metrics", legacyregistry.Handler())
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// server is the running HTTP server of the endpoint.
type server struct {
	srv *http.Server
	// done is closed when Serve returned.
	done chan struct{}
}

// startServing listens synchronously, so a port in use fails the start with a clear
// error, and then serves in the background until stop. It returns nil with --port=0.
func startServing(ctx context.Context, cfg options.ServingConfig, handler http.Handler) (*server, error) {
	logger := klog.FromContext(ctx)
	if cfg.Port == 0 {
		logger.Info("Serving is off (--port=0): no health probes and no metrics")
		return nil, nil
	}
	addr := net.JoinHostPort(cfg.BindAddress, strconv.Itoa(cfg.Port))
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w; choose a free --port (or --port=0 to turn serving off) or another --bind-address", addr, err)
	}
	s := &server{
		srv: &http.Server{
			Handler:           handler,
			ReadHeaderTimeout: 10 * time.Second,
			// Requests carry the process logger, for the health handlers' logs.
			BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		},
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error(err, "Serving stopped", "address", addr)
		}
	}()
	logger.Info("Serving health, metrics and debug endpoints", "address", listener.Addr().String())
	return s, nil
}

// stop lets in-flight requests finish for up to five seconds, then closes the server and
// waits for it.
func (s *server) stop() {
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
	<-s.done
}
