// Package leaderelection runs mini-kcm's controllers only while this process holds a
// Lease, and hands the Lease over safely when the process stops. It keeps client-go's
// Lease record and resourcelock.LeaseLock, but runs its own election (client-go's
// elector ends a term at the renew deadline and polls on the real clock); what it
// does, and why (docs/high-availability.md and docs/fencing.md give the measured
// figures and the safety argument):
//
//   - Fence: no mutating request leaves a fenced client unless this replica holds the
//     Lease by its own monotonic clock (last successful write sent + the renew
//     deadline, and never beyond lease duration - Margin). It closes when a read shows
//     another holder and before a release; an allowed write's context ends with it.
//     A VM suspended past the lease is not covered by a monotonic clock: for that,
//     ImpersonateHolder sends the holder to the apiserver's fence policy
//     (--leader-elect-apiserver-fence, deploy/fence/).
//   - Only time in contact counts: a standby takes over once it saw no change to the
//     Lease for its duration on its own clock while its own reads were answered (see
//     standby). Skew between replicas is harmless, and a stall of the apiserver that
//     every replica shares moves no Lease.
//   - A leader that cannot renew pauses, it does not abdicate: at the renew deadline
//     its fence closes and it keeps renewing with optimistic updates; the first that
//     succeeds resumes it (see term); with Config.Resume the fence reopens only once
//     the caller said its caches are fresh enough to act on after the pause.
//   - A lost Lease (a conflict, then a read showing another holder, a release or a
//     deletion) closes the fence for good, cancels the run function and waits for it;
//     Run then returns ErrLeaseLost and the caller campaigns again as a standby. The
//     process exits only if the run function's workers did not stop
//     (ErrControllersStillRunning).
//   - Timings.StopBound: a leader cut off after its last successful renewal stops
//     writing within request timeout + retry period + renew deadline; only a longer
//     lease duration guarantees it stopped before a standby starts (the fence stops
//     its writes earlier, whatever the timings).
//   - Config.LeaseWatch: a standby also watches the Lease, so that it sees a renewal
//     as it is written and tries the moment the Lease expires; it reads before it
//     writes, so a lagging watch can only delay a takeover, never hasten it.
//   - SIGTERM: the run function returns only after every worker and informer stopped,
//     while the Lease is still renewed; then the Lease is released with a fresh
//     context, so a standby takes over within a retry period and never while an old
//     worker runs.
package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// ErrControllersStillRunning is wrapped by a run function that gave up waiting for its
// controllers. Run then keeps the Lease until it expires instead of releasing it, so no
// standby starts while a stuck worker of this process may still write.
var ErrControllersStillRunning = errors.New("controllers are still running")

// ErrLeaseLost is returned by Run when the Lease was lost while leading: the fence
// closed and the run function drained. The caller may campaign again.
var ErrLeaseLost = errors.New("leaderelection lost")

// Config configures one candidate in the election.
type Config struct {
	// Client is used only for the Lease. It should be dedicated to leader election
	// (see NewClient), so that a busy controller never delays a renewal.
	Client kubernetes.Interface
	// Namespace and Name locate the Lease.
	Namespace string
	Name      string
	// Identity is this candidate's unique name (see NewIdentity).
	Identity string
	// Timings time the election; they must satisfy LeaseDuration > RenewDeadline >
	// 1.2 × RetryPeriod.
	Timings
	// EventRecorder records "<identity> became leader" and "<identity> stopped leading"
	// LeaderElection events on the Lease. Optional.
	EventRecorder resourcelock.EventRecorder
	// WatchDog, when set, fails /healthz for a leader whose renewal loop stopped
	// trying (see Watchdog). Optional.
	WatchDog *Watchdog
	// Fence, when set, learns of every acquisition and renewal, closes at the renew
	// deadline until a renewal succeeds, and closes for the term when the Lease is
	// lost or released (see Fence). It must be made for this Lease and LeaseDuration.
	// Optional: without it nothing is fenced, and a leader that cannot renew within
	// the renew deadline ends its term (Run returns ErrLeaseLost) instead of pausing.
	Fence *Fence
	// Leases, when set, is the Lease client of the election instead of Client's; the
	// sharded mode guards it (see shards.GuardEpoch).
	Leases coordinationv1client.LeasesGetter
	// Observe, when set, is called with the Lease's record after every successful read
	// or write of it by this candidate (about every retry period), so that the caller
	// can report the holder and transitions it last saw. It must return quickly; it
	// decides nothing. Optional.
	Observe func(resourcelock.LeaderElectionRecord)
	// LeaseWatch, when set, is the client of a standby's watch on the Lease (see
	// NewWatchClient): the standby then learns of every renewal as it is written and
	// tries to take the Lease the moment it expires by this candidate's clock. Without
	// it the standby reads the Lease every retry period instead, and still tries at
	// expiry. It must not time its requests out, since a watch outlives any request
	// timeout. Optional.
	LeaseWatch coordinationv1client.LeasesGetter
	// Resume, when set with a Fence, is called when a paused term resumes (a renewal
	// succeeded again), with how long it was paused: the fence stays closed until it
	// returns nil, while the renewals go on, so that the caller may first show that
	// its caches are fresh after the pause, as a takeover does. It may return an error
	// only when ctx is cancelled (the term paused again, or ended). Without it the
	// renewal reopens the fence. Optional.
	Resume func(ctx context.Context, pausedFor time.Duration) error

	// clock times the standby's wait and the term's renewals; nil means the real
	// clock. Tests replace it.
	clock clock.Clock
	// mutation plants one known bug, so that the simulation test (sim_test.go) can
	// show that its checker catches it. The zero value is the correct behaviour; only
	// that test sets it.
	mutation mutation
}

// mutation names a bug the simulation test plants on purpose (see Config.mutation).
type mutation int

const (
	noMutation mutation = iota
	// mutationNoPause leaves the fence unbounded by the renew deadline: a leader whose
	// renewals fail keeps writing until lease duration - Margin.
	mutationNoPause
	// mutationTakeAtObservation makes a standby take a held Lease as soon as it sees
	// it, instead of once it expired.
	mutationTakeAtObservation
	// mutationWaitOnFailedAcquisition makes a campaign whose acquisition Update failed
	// wait for it instead of trying again, as the old Run waited on a run function
	// that never started.
	mutationWaitOnFailedAcquisition
)

// NewIdentity returns hostname_uuid.
func NewIdentity() (string, error) {
	hostname, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("getting the hostname for the leader election identity: %w", err)
	}
	// Add a uniquifier so that two processes on one host never both become active.
	return hostname + "_" + string(uuid.NewUUID()), nil
}

// Timings are the three durations of an election.
type Timings struct {
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// minRequestTimeout keeps a Lease request from timing out on an apiserver that is only
// slow, which would cost renewals for nothing.
const minRequestTimeout = time.Second

// RequestTimeout is the timeout of one Lease request. It is at most half the renew
// deadline, so that one hung request cannot use up the deadline, and at most half of
// what the lease duration leaves beyond renew deadline + retry period, so that the
// latency of the last renewal still fits in the lease (see StopBound); but at least a
// second. With 15s/10s/2s that is 1.5s, and StopBound 13.5s < 15s.
func (t Timings) RequestTimeout() time.Duration {
	slack := t.LeaseDuration - t.RenewDeadline - t.RetryPeriod
	return max(minRequestTimeout, min(t.RenewDeadline/2, slack/2))
}

// StopBound is how long after sending its last successful renewal a cut-off leader may
// still act: the renewal's latency (up to the request timeout), one retry period, then
// the renew deadline. See the package documentation.
func (t Timings) StopBound() time.Duration {
	return t.RequestTimeout() + t.RetryPeriod + t.RenewDeadline
}

// Safe reports whether a cut-off leader always stops before a standby may take over,
// that is the lease duration exceeds StopBound.
func (t Timings) Safe() bool {
	return t.LeaseDuration > t.StopBound()
}

// NewClient returns a client for the Lease only, with its own rate limit and user agent,
// and a request timeout of t.RequestTimeout().
func NewClient(base *rest.Config, userAgent string, t Timings) (kubernetes.Interface, error) {
	client, err := kubernetes.NewForConfig(clientConfig(base, userAgent, t))
	if err != nil {
		return nil, fmt.Errorf("building the leader election client: %w", err)
	}
	return client, nil
}

// NewWatchClient returns the client of a standby's watch on the Lease (see
// Config.LeaseWatch): NewClient's, but without a request timeout, which would end
// every watch after a second.
func NewWatchClient(base *rest.Config, userAgent string) (coordinationv1client.LeasesGetter, error) {
	cfg := rest.CopyConfig(base)
	cfg.Timeout = 0
	cfg.UserAgent = userAgent
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the leader election watch client: %w", err)
	}
	return client.CoordinationV1(), nil
}

func clientConfig(base *rest.Config, userAgent string, t Timings) *rest.Config {
	cfg := rest.CopyConfig(base)
	cfg.Timeout = t.RequestTimeout()
	cfg.UserAgent = userAgent
	return cfg
}

// Run campaigns for the Lease until ctx is cancelled or one term ended. While this
// process leads, it calls run with a context that is cancelled on ctx's cancellation or
// on a lost Lease; run must return only after everything it started has stopped.
//
// Run returns nil after a clean shutdown (ctx cancelled, whether leading or not), run's
// error if run returned one (the Lease is released first, unless the error wraps
// ErrControllersStillRunning), and ErrLeaseLost once run drained after the Lease was
// lost, joined with run's error if that wraps ErrControllersStillRunning.
func Run(ctx context.Context, cfg Config, run func(ctx context.Context) error) error {
	logger := klog.FromContext(ctx)
	if err := cfg.Timings.validate(); err != nil {
		return fmt.Errorf("configuring leader election on lease %s/%s: %w", cfg.Namespace, cfg.Name, err)
	}
	registerMetrics()
	// A candidate reports the Lease from the start, as client-go's elector does: 0
	// until it leads.
	leaderStatus.WithLabelValues(cfg.Name).Set(0)
	leases := cfg.Leases
	if leases == nil {
		leases = cfg.Client.CoordinationV1()
	}
	var lock resourcelock.Interface = &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Name},
		Client:     leases,
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity, EventRecorder: cfg.EventRecorder},
	}
	logger = klog.LoggerWithValues(logger, "lease", lock.Describe(), "identity", cfg.Identity)
	if cfg.Observe != nil {
		lock = &observedLock{Interface: lock, observe: cfg.Observe}
	}
	if cfg.Fence != nil {
		// Nothing of an earlier term runs any more: its Run returned after it drained.
		cfg.Fence.newTerm()
		if cfg.mutation != mutationNoPause {
			cfg.Fence.bound(cfg.RenewDeadline)
		}
		lock = &fencedLock{Interface: lock, fence: cfg.Fence}
	}
	clk := cfg.clock
	if clk == nil {
		clk = clock.RealClock{}
	}

	// The election has a context of its own, not cancelled by SIGTERM: while the
	// controllers drain, the Lease must still be renewed.
	electionCtx := klog.NewContext(context.WithoutCancel(ctx), logger)
	logger.Info("Joining leader election", "leaseDuration", cfg.LeaseDuration,
		"renewDeadline", cfg.RenewDeadline, "retryPeriod", cfg.RetryPeriod, "watchingTheLease", cfg.LeaseWatch != nil)
	// A signal while standing by ends the campaign at once.
	acquired, sent, ok := newStandby(cfg, lock, clk).acquire(klog.NewContext(ctx, logger))
	if !ok {
		return nil
	}
	leaderStatus.WithLabelValues(cfg.Name).Set(1)
	defer leaderStatus.WithLabelValues(cfg.Name).Set(0)
	lock.RecordEvent("became leader")
	logger.Info("Started leading")

	// run logs with the caller's logger, without the election's key/values.
	runCtx, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRun()
	stopOnSignal := context.AfterFunc(ctx, cancelRun)
	defer stopOnSignal()
	done := make(chan struct{})
	var runErr error
	go func() {
		defer close(done)
		runErr = run(runCtx)
	}()

	t := &term{lock: lock, identity: cfg.Identity, Timings: cfg.Timings, clock: clk, fenced: cfg.Fence != nil,
		health: cfg.WatchDog, name: cfg.Name, fence: cfg.Fence, resume: cfg.Resume}
	end, why := t.keep(electionCtx, done, acquired, sent)
	if cfg.Fence != nil {
		// This replica no longer writes: the fence closes before the workers of a lost
		// term learn of the loss, and before the Lease is released.
		reason := "stopped leading"
		if end == leaseLost {
			reason = "lost: " + why
		}
		cfg.Fence.Close(reason)
	}
	if end == leaseLost {
		cancelRun()
		<-done
		leasesLost.WithLabelValues(cfg.Name).Inc()
		updateStats(cfg.Name, func(s *LeaseStats) { s.Losses++ })
		lock.RecordEvent("stopped leading")
		var refused int64
		if cfg.Fence != nil {
			refused = cfg.Fence.RefusedWrites()
		}
		logger.Error(nil, "leaderelection lost", "reason", why, "fenceRefusedWrites", refused, "next", "standing by")
		if errors.Is(runErr, ErrControllersStillRunning) {
			return errors.Join(ErrLeaseLost, runErr)
		}
		return ErrLeaseLost
	}
	if errors.Is(runErr, ErrControllersStillRunning) {
		logger.Error(runErr, "Not releasing the lease while controllers may still run; standbys take over once it expires")
		return runErr
	}
	if cfg.Fence != nil {
		if waited := cfg.Fence.settle(electionCtx); waited > 0 {
			logger.Info("Waited for unanswered writes before releasing the lease", "waited", waited.Round(time.Millisecond))
		}
	}
	if releaseErr := release(electionCtx, lock, cfg.Identity, cfg.RenewDeadline); releaseErr != nil {
		logger.Error(releaseErr, "Failed to release the lease; standbys take over once it expires")
	}
	lock.RecordEvent("stopped leading")
	return runErr
}

// validate checks the timings as client-go's elector does.
func (t Timings) validate() error {
	switch {
	case t.LeaseDuration <= t.RenewDeadline:
		return errors.New("leaseDuration must be greater than renewDeadline")
	case t.RenewDeadline <= time.Duration(jitterFactor*float64(t.RetryPeriod)):
		return fmt.Errorf("renewDeadline must be greater than retryPeriod*%.1f", jitterFactor)
	case t.LeaseDuration < 1 || t.RenewDeadline < 1 || t.RetryPeriod < 1:
		return errors.New("leaseDuration, renewDeadline and retryPeriod must be greater than zero")
	}
	return nil
}

// jitterFactor is client-go's bound between the renew deadline and the retry period.
const jitterFactor = 1.2

// release gives up the Lease if this candidate still holds it: holder "" and a duration
// of one second, as client-go's ReleaseOnCancel does, so standbys take over at their next
// retry. It reads the Lease first and never overwrites another holder's record.
func release(ctx context.Context, lock resourcelock.Interface, identity string, timeout time.Duration) error {
	logger := klog.FromContext(ctx)
	// The election context may be done; the release needs a fresh one.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	for {
		record, _, err := lock.Get(ctx)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading lease %s: %w", lock.Describe(), err)
		}
		if record.HolderIdentity != identity {
			// Never acquired, or already taken over: nothing of ours to release.
			return nil
		}
		now := metav1.Now()
		err = lock.Update(ctx, resourcelock.LeaderElectionRecord{
			HolderIdentity:       "",
			LeaseDurationSeconds: 1,
			AcquireTime:          now,
			RenewTime:            now,
			LeaderTransitions:    record.LeaderTransitions,
		})
		if apierrors.IsConflict(err) {
			// A renewal that was in flight when the election stopped changed the
			// Lease after our read; read it again.
			continue
		}
		if err != nil {
			return fmt.Errorf("releasing lease %s: %w", lock.Describe(), err)
		}
		logger.Info("Released the lease")
		return nil
	}
}
