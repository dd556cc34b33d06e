package options

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mini-kcm/mini-kcm/controllers"
	"github.com/mini-kcm/mini-kcm/controllers/deployment"
	"github.com/mini-kcm/mini-kcm/controllers/endpoints"
	"github.com/mini-kcm/mini-kcm/controllers/replicaset"
	"github.com/mini-kcm/mini-kcm/leaderelection"
)

const validKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:6443
users:
- name: admin
  user:
    token: secret
contexts:
- name: local
  context:
    cluster: local
    user: admin
current-context: local
`

// writeFile writes content into a file of a fresh temporary directory.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// parse returns options with defaults and the given command line applied.
func parse(t *testing.T, reg *controllers.Registry, args ...string) *Options {
	t.Helper()
	o := NewOptions()
	fss := o.Flags(reg)
	fs := fss.FlagSet("all")
	for _, name := range fss.Order {
		if name != "all" {
			fs.AddFlagSet(fss.FlagSets[name])
		}
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
}

func TestDefaultsMatchKubeControllerManager(t *testing.T) {
	reg := testRegistry(t)
	kubeconfig := writeFile(t, "kubeconfig", validKubeconfig)
	cfg, err := parse(t, reg, "--kubeconfig", kubeconfig).Config(reg)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RESTConfig.QPS != 20 || cfg.RESTConfig.Burst != 30 {
		t.Errorf("qps/burst = %v/%d, want 20/30", cfg.RESTConfig.QPS, cfg.RESTConfig.Burst)
	}
	if cfg.RESTConfig.ContentType != "application/vnd.kubernetes.protobuf" || !cfg.RESTConfig.DisableCompression {
		t.Errorf("content type %q, compression disabled %v", cfg.RESTConfig.ContentType, cfg.RESTConfig.DisableCompression)
	}
	if cfg.RESTConfig.Host != "https://127.0.0.1:6443" {
		t.Errorf("host = %q", cfg.RESTConfig.Host)
	}
	wantControllers := controllers.Config{
		Options: map[string]controllers.Options{
			"replicaset-controller": withWorkers(replicaset.NewOptions, 5),
			"deployment-controller": withWorkers(deployment.NewOptions, 5),
			"endpoints-controller":  &endpoints.Options{ConcurrentSyncs: 5},
		},
		Features: allFeatures,
	}
	if !reflect.DeepEqual(cfg.Controllers, wantControllers) {
		t.Errorf("controllers config = %+v, want %+v", cfg.Controllers, wantControllers)
	}
	if want := []string{"deployment-controller", "endpoints-controller", "replicaset-controller"}; !reflect.DeepEqual(cfg.EnabledControllers, want) {
		t.Errorf("enabled = %q, want %q", cfg.EnabledControllers, want)
	}
	le := cfg.LeaderElection
	if !le.LeaderElect || !le.WarmStandby || le.LeaseDuration != 4*time.Second || le.RenewDeadline != 2*time.Second ||
		le.RetryPeriod != 500*time.Millisecond || le.ResourceLock != "leases" ||
		le.ResourceName != "mini-kube-controller-manager" || le.ResourceNamespace != "kube-system" {
		t.Errorf("leader election = %+v", le)
	}
	if cfg.ControllerSyncStuckThreshold != 5*time.Minute {
		t.Errorf("stuck-sync threshold %s, want 5m", cfg.ControllerSyncStuckThreshold)
	}
	if cfg.MinResyncPeriod != 12*time.Hour || cfg.ControllerShutdownTimeout != 10*time.Second {
		t.Errorf("min resync %s, shutdown timeout %s", cfg.MinResyncPeriod, cfg.ControllerShutdownTimeout)
	}
	if cfg.ControllerStartInterval != 0 {
		t.Errorf("controller start interval %s, want 0 (upstream's)", cfg.ControllerStartInterval)
	}
	s := cfg.Serving
	if s.SecureServing.BindAddress.String() != "0.0.0.0" || s.SecureServing.BindPort != 10257 || !s.EnableProfiling || s.EnableContentionProfiling ||
		s.SecureServing.ServerCert.CertDirectory != "" || s.SecureServing.ServerCert.CertKey.CertFile != "" {
		t.Errorf("serving = %+v, want HTTPS on 0.0.0.0:10257, an in-memory certificate, profiling", s.SecureServing)
	}
	if !reflect.DeepEqual(s.Authorization.AlwaysAllowPaths, []string{"/healthz", "/readyz", "/livez"}) ||
		!reflect.DeepEqual(s.Authorization.AlwaysAllowGroups, []string{"system:masters"}) {
		t.Errorf("always allowed paths %q and groups %q, want upstream's", s.Authorization.AlwaysAllowPaths, s.Authorization.AlwaysAllowGroups)
	}
	if s.Authentication.RemoteKubeConfigFile != "" || !s.Authentication.RemoteKubeConfigFileOptional ||
		s.Authorization.RemoteKubeConfigFile != "" || !s.Authorization.RemoteKubeConfigFileOptional {
		t.Errorf("delegation kubeconfigs must default to empty and optional (in-cluster if there is one), as upstream's")
	}
	if s.Flags.FlagSets["secure serving"].Lookup("secure-port") == nil {
		t.Errorf("the config does not carry the flags for /flagz")
	}
}

func TestFlagsAreAppliedToConfig(t *testing.T) {
	reg := testRegistry(t)
	kubeconfig := writeFile(t, "kubeconfig", validKubeconfig)
	cfg, err := parse(t, reg, "--kubeconfig", kubeconfig, "--master", "https://10.0.0.1:443",
		"--kube-api-qps=5.5", "--kube-api-burst=7", "--kube-api-content-type=application/json",
		"--controllers=*,-endpoint", "--concurrent-replicaset-syncs=2", "--concurrent-deployment-syncs=3",
		"--concurrent-endpoint-syncs=4", "--endpoint-updates-batch-period=500ms",
		"--min-resync-period=1h", "--controller-shutdown-timeout=30s",
		"--leader-elect=false", "--secure-port=0", "--bind-address=127.0.0.1", "--profiling=false",
		"--authentication-kubeconfig=/authn", "--authorization-kubeconfig=/authz", "--authorization-always-allow-paths=/healthz",
		"--feature-gates=PodDeletionCost=false", "--contention-profiling", "--controller-start-interval=2s",
	).Config(reg)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RESTConfig.Host != "https://10.0.0.1:443" || cfg.RESTConfig.QPS != 5.5 || cfg.RESTConfig.Burst != 7 ||
		cfg.RESTConfig.ContentType != "application/json" {
		t.Errorf("rest config host %q qps %v burst %d content type %q", cfg.RESTConfig.Host, cfg.RESTConfig.QPS,
			cfg.RESTConfig.Burst, cfg.RESTConfig.ContentType)
	}
	want := controllers.Config{
		Options: map[string]controllers.Options{
			"replicaset-controller": withWorkers(replicaset.NewOptions, 2),
			"deployment-controller": withWorkers(deployment.NewOptions, 3),
			"endpoints-controller":  &endpoints.Options{ConcurrentSyncs: 4, UpdatesBatchPeriod: 500 * time.Millisecond},
		},
		Features: features(DeploymentReplicaSetTerminatingReplicas, StaleControllerConsistencyReplicaSet),
	}
	if !reflect.DeepEqual(cfg.Controllers, want) {
		t.Errorf("controllers config = %+v, want %+v", cfg.Controllers, want)
	}
	if want := []string{"deployment-controller", "replicaset-controller"}; !reflect.DeepEqual(cfg.EnabledControllers, want) {
		t.Errorf("enabled = %q, want %q", cfg.EnabledControllers, want)
	}
	if cfg.LeaderElection.LeaderElect || cfg.MinResyncPeriod != time.Hour || cfg.ControllerShutdownTimeout != 30*time.Second ||
		cfg.ControllerStartInterval != 2*time.Second || !cfg.Serving.EnableContentionProfiling {
		t.Errorf("config = %+v", cfg)
	}
	if s := cfg.Serving; s.SecureServing.BindAddress.String() != "127.0.0.1" || s.SecureServing.BindPort != 0 || s.EnableProfiling ||
		s.Authentication.RemoteKubeConfigFile != "/authn" || s.Authorization.RemoteKubeConfigFile != "/authz" ||
		!reflect.DeepEqual(s.Authorization.AlwaysAllowPaths, []string{"/healthz"}) {
		t.Errorf("serving = %+v %+v %+v", s.SecureServing, s.Authentication, s.Authorization)
	}
}

func TestValidateReportsEveryBadFlag(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string // substrings, one per expected error, in order
	}{
		{"zero qps", []string{"--kube-api-qps=0"}, []string{"--kube-api-qps must be greater than 0, got 0"}},
		{"negative qps", []string{"--kube-api-qps=-1"}, []string{"--kube-api-qps must be greater than 0, got -1"}},
		{"zero burst", []string{"--kube-api-burst=0"}, []string{"--kube-api-burst must be greater than 0, got 0"}},
		{"unknown content type", []string{"--kube-api-content-type=text/plain"},
			[]string{`--kube-api-content-type must be "application/vnd.kubernetes.protobuf" or "application/json", got "text/plain"`}},
		{"negative resync", []string{"--min-resync-period=-1s"}, []string{"--min-resync-period must not be negative, got -1s"}},
		{"negative shutdown timeout", []string{"--controller-shutdown-timeout=-1s"},
			[]string{"--controller-shutdown-timeout must not be negative, got -1s"}},
		{"negative stuck-sync threshold", []string{"--controller-sync-stuck-threshold=-1s"},
			[]string{"--controller-sync-stuck-threshold must not be negative (0 turns the check off), got -1s"}},
		{"negative start interval", []string{"--controller-start-interval=-1s"},
			[]string{"--controller-start-interval must not be negative (0 starts the controllers at once), got -1s"}},
		{"hidden metrics of a version that is not the previous one", []string{"--show-hidden-metrics-for-version=1.99"},
			[]string{`(--show-hidden-metrics-for-version, --disabled-metrics, --allow-metric-labels, --allow-metric-labels-manifest): metrics.showHiddenMetricsForVersion: Invalid value: "1.99"`}},
		{"unknown controller", []string{"--controllers=*,-foo"}, []string{`"foo" is not in the list of known controllers`}},
		{"zero replicaset workers", []string{"--concurrent-replicaset-syncs=0"},
			[]string{"--concurrent-replicaset-syncs must be greater than 0, got 0"}},
		{"negative deployment workers", []string{"--concurrent-deployment-syncs=-2"},
			[]string{"--concurrent-deployment-syncs must be greater than 0, got -2"}},
		{"zero endpoint workers", []string{"--concurrent-endpoint-syncs=0"},
			[]string{"--concurrent-endpoint-syncs must be greater than 0, got 0"}},
		{"negative batch period", []string{"--endpoint-updates-batch-period=-1s"},
			[]string{"--endpoint-updates-batch-period must not be negative, got -1s"}},
		{"lock type", []string{"--leader-elect-resource-lock=endpoints"},
			[]string{`--leader-elect-resource-lock must be "leases", got "endpoints"`}},
		{"lease name", []string{"--leader-elect-resource-name=Bad_Name"},
			[]string{`--leader-elect-resource-name "Bad_Name" is not a valid Lease name`}},
		{"lease namespace", []string{"--leader-elect-resource-namespace="},
			[]string{`--leader-elect-resource-namespace "" is not a valid namespace name`}},
		{"lease not longer than renew", []string{"--leader-elect-lease-duration=10s", "--leader-elect-renew-deadline=10s"},
			[]string{"--leader-elect-lease-duration (10s) must be greater than --leader-elect-renew-deadline (10s)"}},
		{"renew not longer than 1.2 retry", []string{"--leader-elect-renew-deadline=10s", "--leader-elect-lease-duration=15s", "--leader-elect-retry-period=9s"},
			[]string{"--leader-elect-renew-deadline (10s) must be greater than 1.2 × --leader-elect-retry-period (9s) = 10.8s"}},
		{"fractional lease", []string{"--leader-elect-lease-duration=15500ms"},
			[]string{"--leader-elect-lease-duration must be a whole number of seconds, got 15.5s"}},
		{"non-positive durations", []string{"--leader-elect-lease-duration=0", "--leader-elect-renew-deadline=-1s", "--leader-elect-retry-period=0"},
			[]string{"--leader-elect-lease-duration must be greater than 0, got 0s",
				"--leader-elect-renew-deadline must be greater than 0, got -1s",
				"--leader-elect-retry-period must be greater than 0, got 0s"}},
		{"secure port too high", []string{"--secure-port=65536"}, []string{"--secure-port 65536 must be between"}},
		{"negative secure port", []string{"--secure-port=-1"}, []string{"--secure-port -1 must be between 0 and 65535, inclusive. 0 for turning off secure port"}},
		{"the removed insecure port", []string{"--port=10252"},
			[]string{"--port=10252: the plain-HTTP port was removed; mini-kcm serves HTTPS with authentication on --secure-port (default 10257, 0 turns serving off): replace --port with --secure-port"}},
		{"a certificate without its key", []string{"--tls-cert-file=/tls.crt"},
			[]string{`--tls-cert-file="/tls.crt" and --tls-private-key-file="": give both (a certificate and its key) or neither (a self-signed certificate)`}},
		{"zero shards", []string{"--shards=0"}, []string{"--shards=0 is out of range: use 1 (a single leader) to 64"}},
		{"shards without leader election", []string{"--shards=3", "--leader-elect=false"},
			[]string{"--shards=3 needs --leader-elect=true: shards are handed out through Leases"}},
		{"a rebalance threshold of perfect balance", []string{"--shard-rebalance-threshold=1"},
			[]string{"--shard-rebalance-threshold=1 must be above 1 (1 is a perfect balance); the default is 1.2"}},
		{"a rebalance period too short", []string{"--shard-rebalance-period=10ms"},
			[]string{"--shard-rebalance-period=10ms is too short: use at least 1s"}},
		{"several at once", []string{"--secure-port=-1", "--kube-api-burst=0", "--controllers=foo"},
			[]string{"--kube-api-burst", `"foo" is not in the list`, "--secure-port"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := testRegistry(t)
			kubeconfig := writeFile(t, "kubeconfig", validKubeconfig)
			errs := parse(t, reg, append([]string{"--kubeconfig", kubeconfig}, tc.args...)...).Validate(reg)
			if len(errs) != len(tc.want) {
				t.Fatalf("got %d errors %v, want %d", len(errs), errs, len(tc.want))
			}
			for i, want := range tc.want {
				if !strings.Contains(errs[i].Error(), want) {
					t.Errorf("error %d = %q, want it to contain %q", i, errs[i], want)
				}
			}
		})
	}
}

func TestLeaderElectionTimingErrorsSayHowToFixThem(t *testing.T) {
	reg := testRegistry(t)
	kubeconfig := writeFile(t, "kubeconfig", validKubeconfig)
	errs := parse(t, reg, "--kubeconfig", kubeconfig, "--leader-elect-lease-duration=10s", "--leader-elect-renew-deadline=10s",
		"--leader-elect-retry-period=9s").Validate(reg)
	if len(errs) != 2 {
		t.Fatalf("errors = %v, want two", errs)
	}
	for i, fix := range []string{"raise the lease duration or lower the renew deadline", "raise the renew deadline or lower the retry period"} {
		if !strings.Contains(errs[i].Error(), fix) {
			t.Errorf("error %q does not say %q", errs[i], fix)
		}
	}
}

func TestLeaderElectionTimingIsNotCheckedWithoutLeaderElection(t *testing.T) {
	reg := testRegistry(t)
	kubeconfig := writeFile(t, "kubeconfig", validKubeconfig)
	o := parse(t, reg, "--kubeconfig", kubeconfig, "--leader-elect=false", "--leader-elect-lease-duration=1s",
		"--leader-elect-resource-lock=configmaps")
	if errs := o.Validate(reg); len(errs) > 0 {
		t.Errorf("unexpected errors: %v", errs)
	}
}

func TestAPIServerFenceWithoutLeaderElectionNamesBothFlags(t *testing.T) {
	reg := testRegistry(t)
	kubeconfig := writeFile(t, "kubeconfig", validKubeconfig)
	errs := parse(t, reg, "--kubeconfig", kubeconfig, "--leader-elect=false", "--leader-elect-apiserver-fence").Validate(reg)
	if len(errs) != 1 {
		t.Fatalf("errors = %v, want exactly one", errs)
	}
	for _, want := range []string{"--leader-elect-apiserver-fence requires --leader-elect", "set --leader-elect=true"} {
		if !strings.Contains(errs[0].Error(), want) {
			t.Errorf("error %q does not say %q", errs[0], want)
		}
	}
}

// Sharded mode has an apiserver fence of its own (deploy/sharded/fence/, one binding
// per shard Lease), so the flag goes with --shards; the bindings are checked at start.
func TestShardsGoWithTheAPIServerFence(t *testing.T) {
	reg := testRegistry(t)
	kubeconfig := writeFile(t, "kubeconfig", validKubeconfig)
	o := parse(t, reg, "--kubeconfig", kubeconfig, "--shards=3", "--leader-elect-apiserver-fence")
	if errs := o.Validate(reg); len(errs) > 0 {
		t.Fatalf("--shards=3 --leader-elect-apiserver-fence: %v, want it valid", errs)
	}
	cfg, err := o.Config(reg)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Sharding.Shards != 3 || !cfg.LeaderElection.APIServerFence {
		t.Errorf("shards %d, apiserver fence %t reached the Config, want 3 and true", cfg.Sharding.Shards, cfg.LeaderElection.APIServerFence)
	}
}

func TestAPIServerFenceIsOffByDefaultAndAppliedToConfig(t *testing.T) {
	reg := testRegistry(t)
	kubeconfig := writeFile(t, "kubeconfig", validKubeconfig)
	if NewLeaderElectionOptions().APIServerFence {
		t.Error("--leader-elect-apiserver-fence is on by default; it needs RBAC and a policy that a plain cluster lacks")
	}
	cfg, err := parse(t, reg, "--kubeconfig", kubeconfig, "--leader-elect-apiserver-fence").Config(reg)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.LeaderElection.APIServerFence {
		t.Error("--leader-elect-apiserver-fence did not reach the Config")
	}
}

func TestKubeconfigProblemsNameTheFileAndTheFix(t *testing.T) {
	dir := t.TempDir()
	unreadable := filepath.Join(dir, "unreadable")
	if err := os.Mkdir(unreadable, 0o700); err != nil { // reading a directory fails
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		kubeconfig string
		want       []string
	}{
		{"missing file", filepath.Join(dir, "nope"),
			[]string{`--kubeconfig "` + filepath.Join(dir, "nope") + `" does not exist`, "pass the path of an existing kubeconfig file"}},
		{"unreadable file", unreadable, []string{`--kubeconfig "` + unreadable + `" cannot be read`, "check the path and its permissions"}},
		{"malformed file", writeFile(t, "bad", "clusters: [oops"),
			[]string{"is not a valid kubeconfig file", "kubectl --kubeconfig"}},
		{"no current context", writeFile(t, "empty", "apiVersion: v1\nkind: Config\n"),
			[]string{"cannot build a client configuration", "current-context"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := testRegistry(t)
			errs := parse(t, reg, "--kubeconfig", tc.kubeconfig).Validate(reg)
			if len(errs) != 1 {
				t.Fatalf("got errors %v, want exactly one", errs)
			}
			for _, want := range tc.want {
				if !strings.Contains(errs[0].Error(), want) {
					t.Errorf("error %q does not contain %q", errs[0], want)
				}
			}
		})
	}
}

func TestNoKubeconfigOutsideAPodAsksForOne(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	reg := testRegistry(t)
	errs := parse(t, reg).Validate(reg)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "pass --kubeconfig=") {
		t.Errorf("errors = %v, want one asking for --kubeconfig", errs)
	}
}

func TestConfigReturnsAggregatedValidationErrors(t *testing.T) {
	reg := testRegistry(t)
	kubeconfig := writeFile(t, "kubeconfig", validKubeconfig)
	_, err := parse(t, reg, "--kubeconfig", kubeconfig, "--secure-port=-1", "--controllers=foo").Config(reg)
	if err == nil || !strings.HasPrefix(err.Error(), "[") || !strings.Contains(err.Error(), "--secure-port") ||
		!strings.Contains(err.Error(), `"foo"`) {
		t.Errorf("error = %v, want both problems in one aggregate", err)
	}
}

func TestFlagsAreGroupedInSections(t *testing.T) {
	fss := NewOptions().Flags(testRegistry(t))
	want := map[string][]string{
		"generic":               {"kubeconfig", "master", "kube-api-qps", "kube-api-burst", "kube-api-content-type", "controllers", "min-resync-period", "controller-shutdown-timeout", "controller-sync-stuck-threshold", "feature-gates"},
		"leader election":       {"leader-elect", "leader-elect-warm-standby", "leader-elect-apiserver-fence", "leader-elect-lease-duration", "leader-elect-renew-deadline", "leader-elect-retry-period", "leader-elect-resource-lock", "leader-elect-resource-name", "leader-elect-resource-namespace"},
		"secure serving":        {"bind-address", "secure-port", "cert-dir", "tls-cert-file", "tls-private-key-file", "tls-min-version", "tls-cipher-suites"},
		"authentication":        {"authentication-kubeconfig", "client-ca-file", "requestheader-client-ca-file", "authentication-skip-lookup"},
		"authorization":         {"authorization-kubeconfig", "authorization-always-allow-paths"},
		"replicaset-controller": {"concurrent-replicaset-syncs"},
		"deployment-controller": {"concurrent-deployment-syncs"},
		"endpoints-controller":  {"concurrent-endpoint-syncs", "endpoint-updates-batch-period"},
		"sharding":              {"shards", "shard-rebalance-threshold", "shard-rebalance-period"},
		"debugging":             {"profiling"},
		"logs":                  {"v", "logging-format"},
		"misc":                  {"version", "help"},
	}
	for section, flags := range want {
		fs, ok := fss.FlagSets[section]
		if !ok {
			t.Errorf("no section %q in %q", section, fss.Order)
			continue
		}
		for _, name := range flags {
			if fs.Lookup(name) == nil {
				t.Errorf("section %q has no flag --%s", section, name)
			}
		}
	}
}

// TestDefaultElectionTimingsAreSafe checks the defaults against the rule of
// leaderelection.Timings: a cut-off leader stops acting before a standby may take over.
func TestDefaultElectionTimingsAreSafe(t *testing.T) {
	le := NewLeaderElectionOptions()
	if errs := le.Validate(); len(errs) != 0 {
		t.Fatalf("default leader election options are invalid: %v", errs)
	}
	timings := leaderelection.Timings{LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod}
	if !timings.Safe() {
		t.Errorf("default timings %+v are not safe: a cut-off leader may act for %s, longer than the lease",
			timings, timings.StopBound())
	}
}

// TestDefaultElectionTimingsAreWhatTheSimulatorRuns pins the shipped timings: the
// election simulator (leaderelection/sim_test.go, simTimings) runs at a copy of them,
// since leaderelection cannot import options, and derives its schedules and bounds
// from them. Changing a default fails here, so that the copy is changed with it.
func TestDefaultElectionTimingsAreWhatTheSimulatorRuns(t *testing.T) {
	le := NewLeaderElectionOptions()
	got := [3]time.Duration{le.LeaseDuration, le.RenewDeadline, le.RetryPeriod}
	if want := [3]time.Duration{4 * time.Second, 2 * time.Second, 500 * time.Millisecond}; got != want {
		t.Errorf("default lease duration, renew deadline and retry period are %v, want %v: change simTimings in "+
			"leaderelection/sim_test.go to the new defaults, derive its constants again, and then this test", got, want)
	}
}

// withWorkers returns a controller's default options with n workers.
func withWorkers(newOptions func() controllers.Options, n int32) controllers.Options {
	o := newOptions().(*controllers.WorkersOptions)
	o.ConcurrentSyncs = n
	return o
}
