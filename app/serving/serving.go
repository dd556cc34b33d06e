// Package serving is the process's HTTPS endpoint: the health endpoints and their
// checks (/livez, /healthz, /readyz, see HealthChecks and Readiness), /metrics,
// /debug/pprof, the library's /statusz and /flagz, and /statusz/replica, a page of the
// lines the caller gives it. It serves what it is handed and does not know how the
// replica runs (single leader, warm standby or sharded); app wires that in.
package serving

import (
	"context"
	"fmt"
	"net"
	"net/http"
	goruntime "runtime"
	"time"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/flagz"
	"k8s.io/apiserver/pkg/server/mux"
	"k8s.io/apiserver/pkg/server/routes"
	"k8s.io/apiserver/pkg/server/statusz"
	"k8s.io/component-base/compatibility"
	"k8s.io/component-base/metrics/legacyregistry"
	controllermanager "k8s.io/controller-manager/app"
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/options"
)

// componentName names mini-kcm in /statusz and /flagz.
const componentName = "mini-kcm"

// shutdownTimeout bounds how long in-flight requests may finish on shutdown.
const shutdownTimeout = 5 * time.Second

// NewHandler returns the mux of the endpoint, before authentication and authorization:
// the health endpoints with a path per check (see HealthChecks), /metrics, /debug/pprof
// (with profiling), /flagz, /statusz (reporting version) and this replica's own
// /statusz/replica with replicaFields. The handler chain of Start guards all of it; only
// the health endpoints' root paths are always allowed (--authorization-always-allow-paths).
func NewHandler(version string, health HealthChecks, profiling bool, flags flagz.Reader, replicaFields []StatuszField) http.Handler {
	m := mux.NewPathRecorderMux(componentName)
	health.install(m)
	m.Handle("/metrics", legacyregistry.Handler())
	if profiling {
		// Upstream's set, which leaves out /debug/pprof/cmdline: the command line can
		// carry secrets even for a caller allowed to profile.
		routes.Profiling{}.Install(m)
	}
	if flags != nil {
		flagz.Install(m, componentName, flags)
	}
	m.Handle(replicaStatuszPath, replicaStatusz(replicaFields))
	// Installed last, so that its list of paths names every other endpoint.
	statusz.Install(m, componentName, statusz.NewRegistry(effectiveVersion(version), statusz.WithListedPaths(m.ListedPaths())))
	return m
}

// effectiveVersion is this build's version as /statusz reports it; a version that does
// not parse (a build without any version information) is reported as v0.0.0.
func effectiveVersion(version string) compatibility.EffectiveVersion {
	v, err := utilversion.ParseSemantic(version)
	if err != nil {
		v = utilversion.MajorMinor(0, 0)
	}
	return compatibility.NewEffectiveVersion(v, false, utilversion.MajorMinor(0, 0), utilversion.MajorMinor(0, 0))
}

// Server is the running HTTPS server of the endpoint.
type Server struct {
	// stopCh, when closed, stops the server.
	stopCh chan struct{}
	// stopped is closed once in-flight requests finished and the server returned.
	stopped <-chan struct{}
}

// Start listens synchronously, so that a port in use fails the start with a
// clear error; builds the certificate (a self-signed one without --tls-cert-file), the
// delegating authenticator and authorizer, as kube-controller-manager does; and serves
// in the background until stop. It returns nil with --secure-port=0.
//
// The certificate files, the client CA and the front-proxy CA are reloaded when they
// change, by the library's dynamic certificate controllers, which run until stop.
func Start(ctx context.Context, cfg options.ServingConfig, handler http.Handler) (*Server, error) {
	logger := klog.FromContext(ctx)
	if cfg.SecureServing == nil || cfg.SecureServing.BindPort == 0 {
		logger.Info("Serving is off (--secure-port=0): no health probes and no metrics")
		return nil, nil
	}
	if cfg.EnableProfiling && cfg.EnableContentionProfiling {
		// --contention-profiling: sample every blocking event for /debug/pprof/block.
		goruntime.SetBlockProfileRate(1)
	}
	// The self-signed certificate names localhost and 127.0.0.1 (and the bind address
	// when it is not 0.0.0.0), like upstream's.
	if err := cfg.SecureServing.MaybeDefaultWithSelfSignedCerts("localhost", nil, []net.IP{net.IPv4(127, 0, 0, 1)}); err != nil {
		return nil, fmt.Errorf("creating the self-signed serving certificate: %w; set --tls-cert-file and --tls-private-key-file, "+
			"or a writable --cert-dir", err)
	}
	var servingInfo *genericapiserver.SecureServingInfo
	if err := cfg.SecureServing.ApplyTo(&servingInfo); err != nil {
		return nil, fmt.Errorf("serving on %s:%d: %w; choose a free --secure-port (or --secure-port=0 to turn serving off) or another --bind-address",
			cfg.SecureServing.BindAddress, cfg.SecureServing.BindPort, err)
	}
	var authn genericapiserver.AuthenticationInfo
	if err := cfg.Authentication.ApplyTo(&authn, servingInfo, nil); err != nil {
		_ = servingInfo.Listener.Close()
		return nil, fmt.Errorf("setting up delegated authentication: %w; check --authentication-kubeconfig (it must be allowed to "+
			"create tokenreviews and read configmap kube-system/extension-apiserver-authentication), or set --client-ca-file "+
			"and --requestheader-client-ca-file, or --authentication-skip-lookup", err)
	}
	var authz genericapiserver.AuthorizationInfo
	if err := cfg.Authorization.ApplyTo(&authz); err != nil {
		_ = servingInfo.Listener.Close()
		return nil, fmt.Errorf("setting up delegated authorization: %w; check --authorization-kubeconfig", err)
	}

	s := &Server{stopCh: make(chan struct{})}
	// kube-controller-manager's chain, innermost first: authorization, authentication (a
	// failure answers 401), request info, no caching, request logging at -v=3 and panic
	// recovery. Importing it costs 8 packages and 12 KB of binary over writing it out.
	chain := controllermanager.BuildHandlerChain(handler, &authz, &authn)
	stopped, _, err := servingInfo.Serve(chain, shutdownTimeout, s.stopCh)
	if err != nil {
		_ = servingInfo.Listener.Close()
		return nil, fmt.Errorf("serving HTTPS on %s: %w", servingInfo.Listener.Addr(), err)
	}
	s.stopped = stopped
	logger.Info("Serving health, metrics, debug, statusz and flagz endpoints over HTTPS", "address", servingInfo.Listener.Addr().String())
	return s, nil
}

// Stop lets in-flight requests finish for up to shutdownTimeout, then closes the server
// and waits for it. It does nothing on a nil Server (serving off).
func (s *Server) Stop() {
	if s == nil {
		return
	}
	close(s.stopCh)
	<-s.stopped
}
