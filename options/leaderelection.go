package options

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
)

// jitterFactor is client-go's leader election jitter: a renewal attempt may start up to
// 1.2 retry periods after the previous one.
const jitterFactor = 1.2

// LeaderElectionOptions holds the leader election flags, named as in every
// Kubernetes component.
type LeaderElectionOptions struct {
	// LeaderElect turns leader election on.
	LeaderElect bool
	// WarmStandby builds the controllers and runs the shared informers on every replica,
	// standbys included, so that a new leader's workers start on synced caches; the
	// workers, and with them every write, still run only on the leader. Off, a replica
	// starts its informers only once it acquired the Lease (upstream's behaviour).
	WarmStandby bool
	// APIServerFence makes every controller's client impersonate its own user with the
	// user extra mini-kcm.io/lease-holder set to this replica's leader-election
	// identity, so that the ValidatingAdmissionPolicy of deploy/fence/ refuses the
	// writes of a replica that no longer holds the Lease (see leaderelection.ImpersonateHolder).
	// The in-process fence works with or without it.
	APIServerFence bool
	// LeaseDuration is how long standbys wait after the last observed renewal before
	// they take over.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps retrying a renewal before it pauses
	// (its writes fenced until a renewal succeeds; see leaderelection).
	RenewDeadline time.Duration
	// RetryPeriod is the time between two acquisition or renewal attempts.
	RetryPeriod time.Duration
	// ResourceLock is the lock type; only "leases" exists.
	ResourceLock string
	// ResourceName and ResourceNamespace locate the Lease.
	ResourceName      string
	ResourceNamespace string
}

// Default election timings, chosen for a takeover within about five seconds of a
// leader's crash (upstream's 15s/10s/2s take 15 to 18s; pass them by flag to get
// them back). They keep leaderelection.Timings safe: the Lease request timeout is 1s,
// so a cut-off leader stops acting 1s + 0.5s + 2s = 3.5s after its last successful
// renewal was sent, 0.5s before any standby may take over at 4s. An apiserver that
// answers no renewal for the 2s renew deadline pauses the leader, and costs it the
// Lease only if a standby in contact with the apiserver all that time takes it over:
// a stall every replica shares changes no leader (docs/high-availability.md).
const (
	defaultLeaseDuration = 4 * time.Second
	defaultRenewDeadline = 2 * time.Second
	defaultRetryPeriod   = 500 * time.Millisecond
)

// NewLeaderElectionOptions returns kube-controller-manager's options with faster
// timings (see defaultLeaseDuration) and warm standbys, and with a lease name of our own
// so that mini-kcm and kube-controller-manager never fight over one lock.
func NewLeaderElectionOptions() *LeaderElectionOptions {
	return &LeaderElectionOptions{
		LeaderElect:       true,
		WarmStandby:       true,
		LeaseDuration:     defaultLeaseDuration,
		RenewDeadline:     defaultRenewDeadline,
		RetryPeriod:       defaultRetryPeriod,
		ResourceLock:      "leases",
		ResourceName:      "mini-kube-controller-manager",
		ResourceNamespace: "kube-system",
	}
}

// AddFlags adds the leader election flags to fs.
func (o *LeaderElectionOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect,
		"Start a leader election client and gain leadership before executing the main loop. Enable this when "+
			"running replicated components for high availability; with false, every replica runs the controllers.")
	fs.BoolVar(&o.WarmStandby, "leader-elect-warm-standby", o.WarmStandby,
		"Run the shared informers on standbys too, read-only, so that a new leader starts its workers on synced "+
			"caches at once instead of listing every object first. Costs each standby one set of watches and about "+
			"a leader's cache memory; standbys still write nothing. With false, a replica starts its informers "+
			"only after it acquired the lease. Ignored with --leader-elect=false.")
	fs.BoolVar(&o.APIServerFence, "leader-elect-apiserver-fence", o.APIServerFence,
		"Have the apiserver fence the controllers' writes too: each controller's client impersonates its own user "+
			"with the user extra mini-kcm.io/lease-holder set to this replica's leader-election identity, which the "+
			"ValidatingAdmissionPolicy mini-kcm-lease-fence (deploy/fence/) compares with the Lease's holder. Needs "+
			"impersonate on the user itself and on userextras/mini-kcm.io/lease-holder (checked at start). Turn it on "+
			"on every replica before installing the policy: the policy refuses a mini-kcm write without the extra. "+
			"Without it, only the in-process fence guards writes. Requires --leader-elect. With --shards above 1, "+
			"the writes also carry the shard Lease in the user extra mini-kcm.io/lease (impersonate on "+
			"userextras/mini-kcm.io/lease too), the policy is mini-kcm-shard-fence (deploy/sharded/fence/), bound "+
			"once per shard Lease, and the replica fails at start unless every shard has its binding.")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration,
		"The duration that non-leader candidates will wait after observing a leadership renewal until "+
			"attempting to acquire leadership of a led but unrenewed leader slot. This is effectively the "+
			"maximum duration that a leader can be stopped before it is replaced by another candidate. Shorter = "+
			"faster fail-over, but less tolerance for clock rate differences and apiserver latency. Upstream's "+
			"default is 15s.")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline,
		"The interval between attempts by the acting master to renew a leadership slot before it stops "+
			"leading. Must be less than the lease duration and more than 1.2 times the retry period; the lease "+
			"duration should also exceed it by the retry period plus the lease request timeout (at least 1s). "+
			"Upstream's default is 10s.")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod,
		"The duration the clients should wait between attempting acquisition and renewal of a leadership. "+
			"Shorter = faster take-over of a released lease, but more apiserver requests (a renewal from the "+
			"leader and a read from each standby per period). Upstream's default is 2s.")
	fs.StringVar(&o.ResourceLock, "leader-elect-resource-lock", o.ResourceLock,
		"The type of resource object that is used for locking during leader election. Supported options are 'leases'.")
	o.AddLeaseFlags(fs)
}

// AddLeaseFlags adds the flags that locate the Lease. `mini-kcm leader` uses them too.
func (o *LeaderElectionOptions) AddLeaseFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ResourceName, "leader-elect-resource-name", o.ResourceName,
		"The name of resource object that is used for locking during leader election.")
	fs.StringVar(&o.ResourceNamespace, "leader-elect-resource-namespace", o.ResourceNamespace,
		"The namespace of resource object that is used for locking during leader election.")
}

// Validate checks the lock and the timing of the election. client-go panics at run time
// on inconsistent durations; checking them here turns that into a flag error that says
// which flags to change.
func (o *LeaderElectionOptions) Validate() []error {
	if !o.LeaderElect {
		if o.APIServerFence {
			return []error{fmt.Errorf("--leader-elect-apiserver-fence requires --leader-elect: the apiserver fences writes " +
				"by the Lease's holder, and without leader election there is no Lease; drop --leader-elect-apiserver-fence " +
				"or set --leader-elect=true")}
		}
		return nil
	}
	var errs []error
	if o.ResourceLock != "leases" {
		errs = append(errs, fmt.Errorf(`--leader-elect-resource-lock must be "leases", got %q: only Lease objects are supported as locks`, o.ResourceLock))
	}
	for _, msg := range validation.IsDNS1123Subdomain(o.ResourceName) {
		errs = append(errs, fmt.Errorf("--leader-elect-resource-name %q is not a valid Lease name: %s", o.ResourceName, msg))
	}
	for _, msg := range validation.IsDNS1123Label(o.ResourceNamespace) {
		errs = append(errs, fmt.Errorf("--leader-elect-resource-namespace %q is not a valid namespace name: %s", o.ResourceNamespace, msg))
	}

	positive := true
	for _, d := range []struct {
		flag  string
		value time.Duration
	}{
		{"leader-elect-lease-duration", o.LeaseDuration},
		{"leader-elect-renew-deadline", o.RenewDeadline},
		{"leader-elect-retry-period", o.RetryPeriod},
	} {
		if d.value <= 0 {
			errs = append(errs, fmt.Errorf("--%s must be greater than 0, got %s", d.flag, d.value))
			positive = false
		}
	}
	if !positive {
		return errs
	}
	if o.LeaseDuration%time.Second != 0 || o.LeaseDuration < time.Second {
		errs = append(errs, fmt.Errorf("--leader-elect-lease-duration must be a whole number of seconds, got %s: "+
			"the Lease stores it in seconds", o.LeaseDuration))
	}
	if o.LeaseDuration <= o.RenewDeadline {
		errs = append(errs, fmt.Errorf("--leader-elect-lease-duration (%s) must be greater than --leader-elect-renew-deadline (%s): "+
			"a leader keeps acting until its renew deadline, so a standby must wait longer than that before it takes over; "+
			"raise the lease duration or lower the renew deadline", o.LeaseDuration, o.RenewDeadline))
	}
	if minRenew := time.Duration(jitterFactor * float64(o.RetryPeriod)); o.RenewDeadline <= minRenew {
		errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline (%s) must be greater than 1.2 × --leader-elect-retry-period (%s) = %s: "+
			"otherwise a single slow renewal attempt loses the lease; raise the renew deadline or lower the retry period",
			o.RenewDeadline, o.RetryPeriod, minRenew))
	}
	return errs
}
