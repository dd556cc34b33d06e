package options

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/pflag"
	apiserveroptions "k8s.io/apiserver/pkg/server/options"
)

// SecurePort is kube-controller-manager's serving port (k8s.io/cloud-provider's
// ports.KubeControllerManagerPort), which mini-kcm keeps so that operators' probes,
// network policies and scrape configs work unchanged.
const SecurePort = 10257

// ServingOptions holds the flags of the HTTPS endpoint (health, metrics, debug, statusz,
// flagz): where it listens and with which certificate, and how it authenticates and
// authorizes its clients. The three parts are k8s.io/apiserver's, configured as
// kube-controller-manager configures them, so every flag keeps upstream's name,
// default and help text.
type ServingOptions struct {
	// SecureServing is --secure-port, --bind-address, --cert-dir, --tls-*.
	SecureServing *apiserveroptions.SecureServingOptions
	// Authentication is --authentication-kubeconfig, --client-ca-file,
	// --requestheader-*, --authentication-skip-lookup, ...: TokenReview, client
	// certificates and front-proxy headers, delegated to the apiserver.
	Authentication *apiserveroptions.DelegatingAuthenticationOptions
	// Authorization is --authorization-kubeconfig, --authorization-always-allow-paths,
	// ...: SubjectAccessReview delegated to the apiserver, with /healthz, /readyz and
	// /livez always allowed and system:masters allowed everything.
	Authorization *apiserveroptions.DelegatingAuthorizationOptions

	// removedPort records a use of the removed --port, so that Validate can point at
	// --secure-port instead of pflag's bare "unknown flag".
	removedPort removedFlag
}

// NewServingOptions returns kube-controller-manager's serving defaults: HTTPS on
// 0.0.0.0:10257 with an in-memory self-signed certificate, and authentication and
// authorization kubeconfigs that may be empty (then the in-cluster configuration is
// used if there is one, and delegation is off otherwise).
func NewServingOptions() *ServingOptions {
	o := &ServingOptions{
		SecureServing:  apiserveroptions.NewSecureServingOptions(),
		Authentication: apiserveroptions.NewDelegatingAuthenticationOptions(),
		Authorization:  apiserveroptions.NewDelegatingAuthorizationOptions(),
	}
	o.Authentication.RemoteKubeConfigFileOptional = true
	o.Authorization.RemoteKubeConfigFileOptional = true
	// An empty --cert-dir generates the self-signed certificate in memory, as upstream:
	// nothing is written to disk unless the operator asks for a directory.
	o.SecureServing.ServerCert.CertDirectory = ""
	o.SecureServing.ServerCert.PairName = "mini-kcm"
	o.SecureServing.BindPort = SecurePort
	return o
}

// AddFlags adds the serving flags to the three sections kube-controller-manager uses.
func (o *ServingOptions) AddFlags(secureServing, authentication, authorization *pflag.FlagSet) {
	o.SecureServing.AddFlags(secureServing)
	o.Authentication.AddFlags(authentication)
	o.Authorization.AddFlags(authorization)
	secureServing.Var(&o.removedPort, "port", "Removed: mini-kcm serves only HTTPS; use --secure-port.")
	_ = secureServing.MarkHidden("port")
}

// Validate checks the serving flags and rejects the removed --port.
func (o *ServingOptions) Validate() []error {
	var errs []error
	if o.removedPort.set {
		errs = append(errs, fmt.Errorf("--port=%s: the plain-HTTP port was removed; mini-kcm serves HTTPS with authentication "+
			"on --secure-port (default %d, 0 turns serving off): replace --port with --secure-port", o.removedPort.value, SecurePort))
	}
	errs = append(errs, o.SecureServing.Validate()...)
	errs = append(errs, o.Authentication.Validate()...)
	errs = append(errs, o.Authorization.Validate()...)
	if cert, key := o.SecureServing.ServerCert.CertKey.CertFile, o.SecureServing.ServerCert.CertKey.KeyFile; (cert == "") != (key == "") {
		errs = append(errs, fmt.Errorf("--tls-cert-file=%q and --tls-private-key-file=%q: give both (a certificate and its key) or neither "+
			"(a self-signed certificate)", cert, key))
	}
	return errs
}

// removedFlag is the value of a flag that no longer works: it accepts any value and
// remembers it, for an error message that names the replacement.
type removedFlag struct {
	set   bool
	value string
}

func (f *removedFlag) String() string { return f.value }
func (f *removedFlag) Type() string   { return "removed" }
func (f *removedFlag) Set(v string) error {
	if _, err := strconv.Atoi(v); err != nil {
		return errors.New("this flag was removed; use --secure-port")
	}
	f.set, f.value = true, v
	return nil
}

// DebuggingOptions holds the flags of the debug handlers.
type DebuggingOptions struct {
	// EnableProfiling serves /debug/pprof.
	EnableProfiling bool
	// EnableContentionProfiling records every blocking event for /debug/pprof/block,
	// with --profiling only, as upstream.
	EnableContentionProfiling bool
}

// NewDebuggingOptions returns upstream's defaults: profiling on, contention profiling
// off. Profiling is safe on because /debug/pprof is authorized like every path but the
// health endpoints.
func NewDebuggingOptions() *DebuggingOptions {
	return &DebuggingOptions{EnableProfiling: true}
}

// AddFlags adds the debugging flags to fs.
func (o *DebuggingOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.EnableProfiling, "profiling", o.EnableProfiling,
		"Enable profiling via web interface host:port/debug/pprof/. Requests are authorized like /metrics "+
			"(get on the non-resource URL /debug/pprof/*), so only callers granted it can read profiles.")
	fs.BoolVar(&o.EnableContentionProfiling, "contention-profiling", o.EnableContentionProfiling,
		"Enable block profiling (/debug/pprof/block), if profiling is enabled. It samples every blocking event "+
			"of every goroutine, which costs CPU on a busy process: turn it on while investigating, not for good.")
}
