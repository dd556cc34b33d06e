package options

import (
	"time"

	apiserveroptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/rest"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/mini-kcm/mini-kcm/controllers"
)

// Config is the validated configuration of one mini-kcm process.
type Config struct {
	// RESTConfig reaches the apiserver, with --kube-api-qps, --kube-api-burst and
	// --kube-api-content-type applied. Every client is built from a copy of it.
	RESTConfig *rest.Config
	// EnabledControllers lists, sorted, the canonical names of the controllers to run.
	EnabledControllers []string
	// Controllers holds the settings handed to the controllers.
	Controllers controllers.Config
	// MinResyncPeriod is the lower bound of the shared informers' resync period.
	MinResyncPeriod time.Duration
	// ControllerShutdownTimeout bounds the wait for controllers on shutdown; 0 waits forever.
	ControllerShutdownTimeout time.Duration
	// ControllerSyncStuckThreshold is how long one sync may run before /livez fails; 0
	// turns the check off.
	ControllerSyncStuckThreshold time.Duration
	// ControllerStartInterval delays each controller's start by a random time between it
	// and twice it.
	ControllerStartInterval time.Duration
	// UseServiceAccountCredentials gives each controller a ServiceAccount's credentials.
	UseServiceAccountCredentials bool
	// LeaderElection configures the election.
	LeaderElection LeaderElectionOptions
	// Sharding configures active-active mode; Shards 1 is a single leader.
	Sharding ShardingOptions
	// Serving configures the health, metrics and debug endpoint.
	Serving ServingConfig
}

// ServingConfig configures the HTTPS endpoint. The app applies the options (listens,
// loads or generates the certificate, builds the delegating authenticator and
// authorizer) when serving starts, because the authenticator may read its
// configuration from the apiserver, which this package never contacts.
type ServingConfig struct {
	// SecureServing is where and how to listen; BindPort 0 means no serving.
	SecureServing *apiserveroptions.SecureServingOptions
	// Authentication delegates authentication to the apiserver.
	Authentication *apiserveroptions.DelegatingAuthenticationOptions
	// Authorization delegates authorization to the apiserver.
	Authorization *apiserveroptions.DelegatingAuthorizationOptions
	// EnableProfiling serves /debug/pprof.
	EnableProfiling bool
	// EnableContentionProfiling turns block profiling on, with EnableProfiling only.
	EnableContentionProfiling bool
	// Flags are every flag of the command, for /flagz.
	Flags cliflag.NamedFlagSets
}
