package app

import (
	"os"
	"strconv"

	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/mini-kcm/mini-kcm/app/serving"
	"github.com/mini-kcm/mini-kcm/leaderelection"
	"github.com/mini-kcm/mini-kcm/options"
)

// runMode is how a replica runs the controllers.
type runMode int

const (
	// withoutElection (--leader-elect=false): no Lease; the replica runs the controllers
	// at once, and so does every other replica.
	withoutElection runMode = iota
	// warmStandby (the default): one leader on one Lease; a standby builds the
	// controllers and syncs the informers before it leads (see takeOver).
	warmStandby
	// coldStandby (--leader-elect-warm-standby=false): one leader on one Lease; a
	// standby only campaigns, and a term starts from nothing (controllerManager.run).
	coldStandby
	// sharded (--shards above 1): active-active, one Lease per shard of the namespaces
	// (package sharding); the main Lease's holder coordinates.
	sharded
)

// replicaMode is the run mode of this replica and everything that follows from it: its
// identity, its write fence, the settings of its elections, and how the start log and
// /statusz/replica describe it. It is decided once, from the options, by newReplicaMode;
// the rest of app asks it rather than the options.
type replicaMode struct {
	run runMode
	// identity is this replica's leader-election identity, the holder it writes into
	// its Leases; empty without leader election.
	identity string
	// namespace and name are the Lease's; sharded, the main Lease's, whose name is the
	// base of the shard Leases' names.
	namespace, name string
	timings         leaderelection.Timings
	// fence guards the writes of every client built from the process's clients.Builder;
	// nil without leader election. Sharded, nothing acquires it: a shard term's clients
	// have the shard Lease's fence instead, and the process's own clients (events,
	// probes, token requests) only send what passes every fence.
	fence *leaderelection.Fence
	// apiserverFence is --leader-elect-apiserver-fence: the controllers' writes carry
	// the Lease holder for the apiserver's admission policy.
	apiserverFence bool
	// inProcessFenceOff leaves fence out of the clients' transports (NoInProcessFenceEnv,
	// e2e tests only).
	inProcessFenceOff bool
	// shards is --shards.
	shards int
}

// newReplicaMode decides the run mode from the options. Only a replica that elects
// gets an identity and a fence.
func newReplicaMode(cfg *options.Config) (*replicaMode, error) {
	le := cfg.LeaderElection
	m := &replicaMode{
		namespace: le.ResourceNamespace, name: le.ResourceName,
		timings:        leaderelection.Timings{LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod},
		apiserverFence: le.LeaderElect && le.APIServerFence,
		shards:         cfg.Sharding.Shards,
	}
	switch {
	case !le.LeaderElect:
		m.run = withoutElection
		return m, nil
	case cfg.Sharding.Shards > 1:
		m.run = sharded
	case le.WarmStandby:
		m.run = warmStandby
	default:
		m.run = coldStandby
	}
	var err error
	if m.identity, err = leaderelection.NewIdentity(); err != nil {
		return nil, err
	}
	m.fence = leaderelection.NewFence(m.lease(), m.timings.LeaseDuration, nil)
	m.inProcessFenceOff, _ = strconv.ParseBool(os.Getenv(NoInProcessFenceEnv))
	return m, nil
}

// singleLeader reports whether one leader runs every controller on one Lease: a warm
// or a cold standby.
func (m *replicaMode) singleLeader() bool { return m.run == warmStandby || m.run == coldStandby }

// lease is the (main) Lease's namespace/name.
func (m *replicaMode) lease() string { return m.namespace + "/" + m.name }

// String names the mode for the start log.
func (m *replicaMode) String() string {
	switch m.run {
	case withoutElection:
		return "without leader election (--leader-elect=false): the controllers run at once, on every replica"
	case warmStandby:
		return "one leader on Lease " + m.lease() + ", warm standbys (the informers run before the election)"
	case coldStandby:
		return "one leader on Lease " + m.lease() + ", cold standbys (--leader-elect-warm-standby=false)"
	default:
		return "sharded (--shards=" + strconv.Itoa(m.shards) + "): a Lease per shard; the holder of " + m.lease() + " coordinates"
	}
}

// logStart logs the mode and the write fence, and warns of unsafe election timings.
func (m *replicaMode) logStart(logger klog.Logger) {
	logger.Info("Run mode", "mode", m.String(), "identity", m.identity)
	if m.inProcessFenceOff {
		logger.Error(nil, "TEST ONLY: the in-process write fence is off: this replica writes whether or not it holds its Lease, "+
			"and only the apiserver's admission policy stops a stale holder; never set this outside e2e tests", "env", NoInProcessFenceEnv)
	}
	logger.Info("Write fence", "mode", m.fenceText())
	if m.run != withoutElection && !m.timings.Safe() {
		// Upstream accepts such timings, so this is a warning, not a validation error.
		logger.Info("Warning: --leader-elect-lease-duration should exceed --leader-elect-renew-deadline + --leader-elect-retry-period + the Lease request timeout, or a partitioned leader may still act after a standby took over",
			"leaseDuration", m.timings.LeaseDuration, "renewDeadline", m.timings.RenewDeadline, "retryPeriod", m.timings.RetryPeriod,
			"requestTimeout", m.timings.RequestTimeout(), "leaderMayActFor", m.timings.StopBound())
	}
}

// fenceText says which layers fence this replica's writes, for the start log and
// /statusz:
//
//   - "off (no leader election)": --leader-elect=false, every replica writes;
//   - "in-process": writes leave the process only while it holds the Lease by its own
//     clock (leaderelection.Fence);
//   - "in-process and apiserver (...)": also --leader-elect-apiserver-fence, the
//     controllers' writes carry the lease-holder extra that the ValidatingAdmissionPolicy
//     of deploy/fence/ compares with the Lease. The binary cannot tell whether that
//     policy is installed (reading it would need a grant it has no other use for); the
//     text says what this replica sends. Sharded, the writes also carry the shard Lease,
//     and the policy is deploy/sharded/fence/'s, bound once per shard Lease.
func (m *replicaMode) fenceText() string {
	var text string
	switch {
	case m.run == withoutElection:
		return "off (no leader election)"
	case m.run == sharded && m.apiserverFence:
		text = "in-process, one fence per shard Lease, and apiserver (ValidatingAdmissionPolicy " +
			leaderelection.ShardFencePolicyName + ", one binding per shard Lease)"
	case m.run == sharded:
		text = "in-process, one fence per shard Lease"
	case m.apiserverFence:
		text = "in-process and apiserver (ValidatingAdmissionPolicy " + leaderelection.FencePolicyName + ")"
	default:
		text = "in-process"
	}
	if m.inProcessFenceOff {
		text += "; IN-PROCESS FENCE OFF (" + NoInProcessFenceEnv + ", for e2e tests only)"
	}
	return text
}

// role says what the replica does now, for /statusz/replica; the Lease's details
// follow it there (replicaStatus.leaderElection).
func (m *replicaMode) role(r serving.Role) string {
	standby := "warm"
	if m.run == coldStandby {
		standby = "cold"
	}
	switch {
	case m.run == sharded:
		return "sharded: a Lease per shard (see Shards)"
	case m.run == withoutElection && r == serving.RoleLeading:
		return "not electing (--leader-elect=false), running the controllers without a Lease"
	case m.run == withoutElection:
		return "not electing (--leader-elect=false), starting"
	case r == serving.RoleStandby:
		return "standby (" + standby + ")"
	case r == serving.RoleLeading:
		return "leading (" + standby + " standby mode)"
	default:
		return "starting (waiting for the apiserver)"
	}
}

// electionClients returns the clients of a candidate for the mode's Leases: client
// reads and writes the Lease, with a request timeout from the timings, on a connection
// of its own (leaderelection.NewClient); watch is a standby's watch on it. agent names
// the user in the audit log.
func (m *replicaMode) electionClients(base *rest.Config, agent string) (kubernetes.Interface, coordinationv1client.LeasesGetter, error) {
	client, err := leaderelection.NewClient(base, userAgent(agent), m.timings)
	if err != nil {
		return nil, nil, err
	}
	watch, err := leaderelection.NewWatchClient(base, userAgent(agent))
	if err != nil {
		return nil, nil, err
	}
	return client, watch, nil
}

// election returns the settings of this replica's election for the main Lease that
// follow from the mode: the client, the Lease, the identity and the timings.
func (m *replicaMode) election(client kubernetes.Interface) leaderelection.Config {
	return leaderelection.Config{Client: client, Namespace: m.namespace, Name: m.name, Identity: m.identity, Timings: m.timings}
}

// NoInProcessFenceEnv, when set to true, leaves the in-process write fence
// (leaderelection.Fence) out of every client: a replica then writes whether or not it
// holds its Lease, and only the apiserver's admission policy
// (--leader-elect-apiserver-fence) stops a stale holder. It exists for e2e tests only,
// which prove that policy alone (test/e2e/sharding's frozen-holder test); it is not a
// supported setting, and the replica logs an error at start when it is set.
const NoInProcessFenceEnv = "MINI_KCM_E2E_NO_INPROCESS_FENCE"
