package options

import (
	"fmt"
	"net"

	"github.com/spf13/pflag"
)

// ServingOptions holds the flags of the health, metrics and debug endpoint.
type ServingOptions struct {
	// BindAddress is the IP address to listen on.
	BindAddress string
	// Port is the TCP port; 0 turns serving off.
	Port int
}

// NewServingOptions returns kube-controller-manager's address and port.
func NewServingOptions() *ServingOptions {
	return &ServingOptions{BindAddress: "0.0.0.0", Port: 10257}
}

// AddFlags adds the serving flags to fs.
func (o *ServingOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.BindAddress, "bind-address", o.BindAddress,
		"The IP address on which to serve /healthz, /livez, /readyz, /metrics and /debug/pprof (plain HTTP). "+
			"0.0.0.0 serves on all interfaces, so probes and Prometheus can reach it; 127.0.0.1 keeps it local.")
	fs.IntVar(&o.Port, "port", o.Port,
		"The port on which to serve the health, metrics and debug endpoints. 0 turns serving off, and with it "+
			"health probes and metrics.")
}

// Validate checks the address and the port.
func (o *ServingOptions) Validate() []error {
	var errs []error
	if net.ParseIP(o.BindAddress) == nil {
		errs = append(errs, fmt.Errorf("--bind-address must be an IP address such as 0.0.0.0 or 127.0.0.1, got %q", o.BindAddress))
	}
	if o.Port < 0 || o.Port > 65535 {
		errs = append(errs, fmt.Errorf("--port must be between 0 and 65535 (0 turns serving off), got %d", o.Port))
	}
	return errs
}

// DebuggingOptions holds the flags of the debug handlers.
type DebuggingOptions struct {
	// EnableProfiling serves /debug/pprof.
	EnableProfiling bool
}

// NewDebuggingOptions returns upstream's default: profiling on.
func NewDebuggingOptions() *DebuggingOptions {
	return &DebuggingOptions{EnableProfiling: true}
}

// AddFlags adds the debugging flags to fs.
func (o *DebuggingOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.EnableProfiling, "profiling", o.EnableProfiling,
		"Enable profiling via web interface host:port/debug/pprof/. Useful to diagnose CPU and memory use; "+
			"turn it off where the serving port is reachable by untrusted clients.")
}
