package options

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/options/controllersflag"
)

// Content types the apiserver accepts for requests of the built-in resources.
const (
	contentTypeProtobuf = "application/vnd.kubernetes.protobuf"
	contentTypeJSON     = "application/json"
)

// GenericOptions holds the flags that concern how mini-kcm reaches the apiserver and
// which controllers it runs.
type GenericOptions struct {
	// Kubeconfig is the path of a kubeconfig file.
	Kubeconfig string
	// Master overrides the apiserver address of the kubeconfig.
	Master string
	// QPS and Burst size every client's own token bucket.
	QPS   float32
	Burst int32
	// ContentType is the encoding of requests and the preferred encoding of responses.
	ContentType string
	// Controllers is the raw --controllers list.
	Controllers []string
	// MinResyncPeriod is the lower bound of the shared informers' resync period.
	MinResyncPeriod time.Duration
	// ControllerShutdownTimeout bounds how long a stopping leader waits for its controllers.
	ControllerShutdownTimeout time.Duration
	// ControllerSyncStuckThreshold is how long one sync may run before /livez fails.
	ControllerSyncStuckThreshold time.Duration
	// ControllerStartInterval delays the start of each controller's workers by a random
	// time between it and twice it; 0 starts them at once.
	ControllerStartInterval time.Duration
	// UseServiceAccountCredentials gives each controller the credentials of a
	// ServiceAccount of its own in kube-system.
	UseServiceAccountCredentials bool
}

// NewGenericOptions returns kube-controller-manager's defaults.
func NewGenericOptions() *GenericOptions {
	return &GenericOptions{
		QPS:                          20,
		Burst:                        30,
		ContentType:                  contentTypeProtobuf,
		Controllers:                  []string{controllersflag.AllOnByDefault},
		MinResyncPeriod:              12 * time.Hour,
		ControllerShutdownTimeout:    10 * time.Second,
		ControllerSyncStuckThreshold: 5 * time.Minute,
	}
}

// AddConnectionFlags adds the flags that say which apiserver to talk to and with which
// credentials: --kubeconfig and --master. `mini-kcm leader` uses them too.
func (o *GenericOptions) AddConnectionFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig,
		"Path to a kubeconfig file with the apiserver address and credentials (the address can be overridden "+
			"by --master). With neither --kubeconfig nor --master, mini-kcm uses the in-cluster configuration "+
			"of its service account.")
	fs.StringVar(&o.Master, "master", o.Master,
		"The address of the Kubernetes API server (overrides any value in kubeconfig).")
}

// AddFlags adds the generic flags; the --controllers help lists reg's controllers.
func (o *GenericOptions) AddFlags(fs *pflag.FlagSet, reg *controllers.Registry) {
	o.AddConnectionFlags(fs)
	fs.Float32Var(&o.QPS, "kube-api-qps", o.QPS,
		"Queries per second each client may send to the apiserver. Every controller, the shared informers, "+
			"leader election and event recording have a client of their own, so one busy controller cannot "+
			"starve the others. Higher = faster reaction to large changes, but more apiserver load.")
	fs.Int32Var(&o.Burst, "kube-api-burst", o.Burst,
		"Requests each client may send at once above --kube-api-qps before it is throttled. Higher = "+
			"absorbs spikes (a scale-up of many pods) faster, but allows bigger load spikes on the apiserver.")
	fs.StringVar(&o.ContentType, "kube-api-content-type", o.ContentType,
		"Content type of requests sent to apiserver: "+contentTypeProtobuf+" (smaller and faster) or "+
			contentTypeJSON+" (readable on the wire, for debugging).")
	controllersflag.AddFlag(fs, &o.Controllers, reg)
	fs.DurationVar(&o.MinResyncPeriod, "min-resync-period", o.MinResyncPeriod,
		"The resync period in reflectors will be random between MinResyncPeriod and 2*MinResyncPeriod. A "+
			"resync re-delivers every cached object to the controllers: shorter = faster repair of missed "+
			"events, but more CPU. 0 disables resyncs.")
	fs.DurationVar(&o.ControllerShutdownTimeout, "controller-shutdown-timeout", o.ControllerShutdownTimeout,
		"How long a stopping mini-kcm waits for its controllers to finish in-flight syncs before it gives up. "+
			"The lease is released only after every controller stopped, so a longer timeout delays the "+
			"hand-over to a standby. 0 waits without limit.")
	fs.DurationVar(&o.ControllerSyncStuckThreshold, "controller-sync-stuck-threshold", o.ControllerSyncStuckThreshold,
		"How long one sync of one key may run before the controller-syncs check of /livez and /healthz fails, "+
			"naming the controller and the key, so that the liveness probe restarts a replica whose worker is "+
			"wedged. Syncs take milliseconds and every request has a timeout; a shorter threshold restarts sooner "+
			"but risks restarting a replica that is merely slow. 0 turns the check off.")
	fs.DurationVar(&o.ControllerStartInterval, "controller-start-interval", o.ControllerStartInterval,
		"Interval between starting controller managers: each controller's workers start after a random delay "+
			"between this and twice this once the caches synced, as kube-controller-manager's, which spreads "+
			"the first syncs of a new leader. Every delay is time the Lease is held without writing; 0 starts "+
			"them at once.")
	fs.BoolVar(&o.UseServiceAccountCredentials, "use-service-account-credentials", o.UseServiceAccountCredentials,
		"If true, use individual service account credentials for each controller: each writes with a token "+
			"requested for its own ServiceAccount in kube-system, mini-kcm-<controller> (e.g. "+
			"mini-kcm-replicaset-controller), so RBAC and the audit log tell the controllers apart. The names "+
			"are not kube-controller-manager's, whose accounts every cluster's bootstrap policy grants more. "+
			"The --kubeconfig credentials then only hold the Lease, read through the shared informers and "+
			"request those tokens.")
}

// Validate checks the client settings, --controllers and the kubeconfig.
func (o *GenericOptions) Validate(reg *controllers.Registry) []error {
	var errs []error
	if o.QPS <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps must be greater than 0, got %v", o.QPS))
	}
	if o.Burst <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-burst must be greater than 0, got %d", o.Burst))
	}
	if o.ContentType != contentTypeProtobuf && o.ContentType != contentTypeJSON {
		errs = append(errs, fmt.Errorf("--kube-api-content-type must be %q or %q, got %q",
			contentTypeProtobuf, contentTypeJSON, o.ContentType))
	}
	if o.MinResyncPeriod < 0 {
		errs = append(errs, fmt.Errorf("--min-resync-period must not be negative, got %s", o.MinResyncPeriod))
	}
	if o.ControllerShutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("--controller-shutdown-timeout must not be negative, got %s", o.ControllerShutdownTimeout))
	}
	if o.ControllerSyncStuckThreshold < 0 {
		errs = append(errs, fmt.Errorf("--controller-sync-stuck-threshold must not be negative (0 turns the check off), got %s", o.ControllerSyncStuckThreshold))
	}
	if o.ControllerStartInterval < 0 {
		errs = append(errs, fmt.Errorf("--controller-start-interval must not be negative (0 starts the controllers at once), got %s", o.ControllerStartInterval))
	}
	errs = append(errs, controllersflag.Unknown(reg, o.Controllers)...)
	if _, err := o.RESTConfig(); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// RESTConfig loads the client configuration from --kubeconfig and --master, or from
// the pod's service account when both are empty, and tunes it for a controller manager.
// It reads local files only; it does not contact the apiserver. Errors name the file
// and say how to fix it, since a wrong path is the most common first-run mistake.
func (o *GenericOptions) RESTConfig() (*rest.Config, error) {
	var cfg *rest.Config
	switch {
	case o.Kubeconfig == "" && o.Master == "":
		inCluster, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("neither --kubeconfig nor --master is set and mini-kcm is not running in a pod (%w); "+
				"pass --kubeconfig=<path to a kubeconfig file>", err)
		}
		cfg = inCluster
	default:
		if o.Kubeconfig != "" {
			if err := checkKubeconfigFile(o.Kubeconfig); err != nil {
				return nil, err
			}
		}
		loaded, err := clientcmd.BuildConfigFromFlags(o.Master, o.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("cannot build a client configuration from --kubeconfig=%q --master=%q: %w; "+
				"check that the kubeconfig has a current-context with a cluster server, or pass --master",
				o.Kubeconfig, o.Master, err)
		}
		cfg = loaded
		if err := checkUsable(cfg); err != nil {
			return nil, fmt.Errorf("the client configuration from --kubeconfig=%q --master=%q is unusable: %w; "+
				"check the cluster's server URL and the certificate and key data of its user", o.Kubeconfig, o.Master, err)
		}
	}
	// Like upstream: the apiserver and mini-kcm usually share a fast network, where
	// gzip costs more CPU than it saves time.
	cfg.DisableCompression = true
	cfg.ContentType = o.ContentType
	cfg.QPS = o.QPS
	cfg.Burst = int(o.Burst)
	return cfg, nil
}

// checkKubeconfigFile distinguishes a missing or unreadable file from a malformed one,
// which clientcmd reports in the same terse way.
func checkKubeconfigFile(path string) error {
	if _, err := os.ReadFile(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("--kubeconfig %q does not exist; pass the path of an existing kubeconfig file "+
				"(for example $HOME/.kube/config)", path)
		}
		return fmt.Errorf("--kubeconfig %q cannot be read (%w); check the path and its permissions", path, err)
	}
	if _, err := clientcmd.LoadFromFile(path); err != nil {
		return fmt.Errorf("--kubeconfig %q is not a valid kubeconfig file (%w); check it with "+
			"`kubectl --kubeconfig %s config view`", path, err, path)
	}
	return nil
}

// checkUsable builds, without contacting anyone, what every client would build from cfg:
// the server URL and the TLS transport. clientcmd accepts a kubeconfig whose server is
// not a URL or whose certificate data is not PEM, and the client built later would fail
// without naming the file.
func checkUsable(cfg *rest.Config) error {
	if _, _, err := rest.DefaultServerUrlFor(cfg); err != nil {
		return err
	}
	if _, err := rest.TransportFor(cfg); err != nil {
		return err
	}
	return nil
}
