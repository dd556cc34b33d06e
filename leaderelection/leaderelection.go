// Package leaderelection runs mini-kcm's controllers only while this process holds a
// Lease, and hands the Lease over safely when the process stops. It drives client-go's
// LeaderElector; what it adds, and why (docs/high-availability.md and docs/fencing.md
// give the measured figures):
//
//   - Fence: no mutating request leaves a fenced client unless this replica holds the
//     Lease by its own monotonic clock (last acquisition or renewal sent + lease
//     duration - Margin). It closes when leading stops, when a read shows another
//     holder, and before a release; an allowed write's context ends with it. A VM
//     suspended past the lease is not covered by a monotonic clock: for that,
//     ImpersonateHolder sends the holder to the apiserver's fence policy
//     (--leader-elect-apiserver-fence, deploy/fence/).
//   - Timings.StopBound: a leader cut off after its last successful renewal stops
//     acting within request timeout + retry period + renew deadline; only a longer
//     lease duration guarantees it stopped before a standby starts (the fence stops
//     its writes earlier, whatever the timings).
//   - Only the local clock decides: a standby takes over once it saw no change to the
//     Lease for its duration on its own clock, so skew between replicas is harmless.
//   - Config.LeaseWatch: a standby watches the Lease and tries at the moment it expires
//     instead of polling; it reads before it writes, so a lagging watch can only delay
//     a takeover, never hasten it.
//   - A lost Lease exits the process at once (code 1), without writing: restarting is
//     the only way to be sure no worker acts any more. With Config.KeepRunningOnLoss (a
//     sharded replica's shard Leases) the fence closes, the run drains and Run returns
//     ErrLeaseLost; workers that do not stop (ErrControllersStillRunning) still exit.
//   - SIGTERM: the run function returns only after every worker and informer stopped,
//     while the Lease is still renewed; then the Lease is released with a fresh
//     context, so a standby takes over within a retry period and never while an old
//     worker runs. client-go's ReleaseOnCancel would release while the workers still
//     run, so it stays off.
package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// ErrControllersStillRunning is wrapped by a run function that gave up waiting for its
// controllers. Run then keeps the Lease until it expires instead of releasing it, so no
// standby starts while a stuck worker of this process may still write.
var ErrControllersStillRunning = errors.New("controllers are still running")

// ErrLeaseLost is returned by Run when the Lease was lost: with
// Config.KeepRunningOnLoss, or when Config.Exit returns, which the real exit never does.
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
	// WatchDog, when set, is tied to the elector so that /healthz fails for a leader
	// that stopped renewing but did not exit. Optional.
	WatchDog *leaderelection.HealthzAdaptor
	// Exit ends the process after a lost Lease. It defaults to flushing the logs and
	// exiting; tests replace it.
	Exit func(code int)
	// Fence, when set, learns of every acquisition and renewal and is closed when the
	// Lease is lost or released (see Fence). It must be made for this Lease and
	// LeaseDuration. Optional: without it nothing is fenced.
	Fence *Fence
	// KeepRunningOnLoss makes a lost Lease end this election only, not the process:
	// Run returns ErrLeaseLost once run drained (see the package documentation). It
	// needs Fence, which keeps the draining workers from writing. A sharded replica
	// sets it, so that a shard renewal lost to a slow apiserver costs that shard
	// rather than every shard the replica holds.
	KeepRunningOnLoss bool
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

	// clock measures the standby's wait; nil means the real clock. Tests replace it.
	clock clock.Clock
}

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

// Run campaigns for the Lease until ctx is cancelled. While this process leads, it calls
// run with a context that is cancelled on ctx's cancellation or on a lost Lease; run must
// return only after everything it started has stopped.
//
// Run returns nil after a clean shutdown (ctx cancelled, whether leading or not), run's
// error if run returned one (the Lease is released first, unless the error wraps
// ErrControllersStillRunning), and exits the process through cfg.Exit if the Lease is
// lost, or returns ErrLeaseLost once run drained with cfg.KeepRunningOnLoss.
func Run(ctx context.Context, cfg Config, run func(ctx context.Context) error) error {
	logger := klog.FromContext(ctx)
	if cfg.KeepRunningOnLoss && cfg.Fence == nil {
		return fmt.Errorf("leader election on lease %s/%s: KeepRunningOnLoss needs a Fence, "+
			"or draining workers could write after the Lease was lost", cfg.Namespace, cfg.Name)
	}
	exit := cfg.Exit
	if exit == nil {
		exit = func(code int) { klog.FlushAndExit(klog.ExitFlushTimeout, code) }
	}
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

	// The election has a context of its own, not cancelled by SIGTERM: while the
	// controllers drain, the Lease must still be renewed. It ends when the run function
	// returned, or at once when a signal arrives while this process is a standby.
	electionCtx, stopElection := context.WithCancel(klog.NewContext(context.WithoutCancel(ctx), logger))
	defer stopElection()

	var (
		mu sync.Mutex
		// ended is set when this process ends the election on purpose; an election
		// that stops without it lost the Lease.
		ended bool
		// leading is set once run was started; afterwards a signal no longer ends the
		// election directly but through run's return.
		leading bool
		lost    bool
		runErr  error
	)
	endElection := func() {
		mu.Lock()
		ended = true
		mu.Unlock()
		stopElection()
	}
	runDone := make(chan struct{})

	if cfg.Observe != nil {
		lock = &observedLock{Interface: lock, observe: cfg.Observe}
	}
	if cfg.Fence != nil {
		lock = &fencedLock{Interface: lock, fence: cfg.Fence, takenOver: func(holder string) {
			// The apiserver says another replica holds the Lease: stop the election
			// now rather than after the renew deadline. Its end is a lost Lease (ended
			// is not set), which exits the process.
			logger.Info("The lease is held by another replica", "holder", holder)
			stopElection()
		}}
	}

	electorConfig := leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: cfg.LeaseDuration,
		RenewDeadline: cfg.RenewDeadline,
		RetryPeriod:   cfg.RetryPeriod,
		WatchDog:      cfg.WatchDog,
		// Released by Run itself, after run returned; see the package documentation.
		ReleaseOnCancel: false,
		Name:            cfg.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leaseCtx context.Context) {
				defer close(runDone)
				mu.Lock()
				if ended {
					// A signal arrived while the Lease was being acquired: do not start
					// controllers only to stop them again.
					mu.Unlock()
					return
				}
				leading = true
				mu.Unlock()

				logger.Info("Started leading")
				// run logs with the caller's logger, without the election's key/values.
				runCtx, cancel := context.WithCancel(klog.NewContext(context.WithoutCancel(leaseCtx), klog.FromContext(ctx)))
				defer cancel()
				stopOnSignal := context.AfterFunc(ctx, cancel)
				defer stopOnSignal()
				// The elector cancels leaseCtx on a lost Lease before it calls
				// OnStoppedLeading, which closes the fence: close it here first, so that
				// no draining worker finds it still open.
				stopOnLoss := context.AfterFunc(leaseCtx, func() {
					mu.Lock()
					lostNow := !ended
					mu.Unlock()
					if lostNow && cfg.Fence != nil {
						cfg.Fence.Close("lost: not renewed within the renew deadline")
					}
					cancel()
				})
				defer stopOnLoss()
				err := run(runCtx)
				mu.Lock()
				runErr = err
				mu.Unlock()
				// run returned on a signal or on its own: end the election, so that the
				// Lease is released (or left to expire) and Run returns. If the Lease
				// was lost instead, the elector is ending already.
				if leaseCtx.Err() == nil {
					endElection()
				}
			},
			OnStoppedLeading: func() {
				mu.Lock()
				lost = !ended
				wasLost := lost
				mu.Unlock()
				// Whatever ended the election, this replica no longer writes: the
				// fence closes before the release is sent or the process exits.
				if cfg.Fence != nil {
					reason := "stopped leading"
					if wasLost {
						reason = "lost: not renewed within the renew deadline"
					}
					cfg.Fence.Close(reason)
				}
				if wasLost {
					if cfg.Fence != nil {
						logger.Error(nil, "leaderelection lost", "fenceRefusedWrites", cfg.Fence.Refused(),
							"processKeepsRunning", cfg.KeepRunningOnLoss)
					} else {
						logger.Error(nil, "leaderelection lost")
					}
					if !cfg.KeepRunningOnLoss {
						exit(1)
					}
				}
			},
			OnNewLeader: func(identity string) {
				if identity != cfg.Identity {
					logger.Info("New leader observed", "leader", identity)
				}
			},
		},
	}
	elector, err := leaderelection.NewLeaderElector(electorConfig)
	if err != nil {
		return fmt.Errorf("configuring leader election on lease %s: %w", lock.Describe(), err)
	}
	if cfg.WatchDog != nil {
		cfg.WatchDog.SetLeaderElection(elector)
	}

	// A signal while standing by ends the election at once; a leader ends it only
	// after run returned.
	stopOnSignal := context.AfterFunc(ctx, func() {
		mu.Lock()
		standby := !leading
		if standby {
			ended = true
		}
		mu.Unlock()
		if standby {
			stopElection()
		}
	})
	defer stopOnSignal()

	logger.Info("Joining leader election", "leaseDuration", cfg.LeaseDuration,
		"renewDeadline", cfg.RenewDeadline, "retryPeriod", cfg.RetryPeriod, "watchingTheLease", cfg.LeaseWatch != nil)
	// The standby waits and takes the Lease at its expiry (see standby); the elector
	// then finds it held by this candidate and renews it from its first attempt. If the
	// election ended while standing by, the elector returns at once, without acquiring.
	clk := cfg.clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	newStandby(cfg, lock, clk).acquire(electionCtx)
	elector.Run(electionCtx)

	// The elector starts OnStartedLeading in a goroutine of its own and does not wait
	// for it. It did so if and only if it acquired the Lease, which it then still
	// believes it holds; wait for the callback so no goroutine outlives Run.
	mu.Lock()
	started := leading
	mu.Unlock()
	if started || elector.IsLeader() {
		<-runDone
	}

	mu.Lock()
	wasLost, err := lost, runErr
	mu.Unlock()
	if wasLost {
		// Only with KeepRunningOnLoss (or an Exit that returned): run drained, with the
		// fence closed, unless it gave up on its workers.
		if cfg.KeepRunningOnLoss && errors.Is(err, ErrControllersStillRunning) {
			logger.Error(err, "Exiting: workers of the lost lease are still running")
			exit(1)
		}
		resetLeaderMetric(electorConfig)
		registerMetrics()
		leasesLost.WithLabelValues(cfg.Name).Inc()
		return ErrLeaseLost
	}
	if errors.Is(err, ErrControllersStillRunning) {
		logger.Error(err, "Not releasing the lease while controllers may still run; standbys take over once it expires")
		return err
	}
	if releaseErr := release(electionCtx, lock, cfg.Identity, cfg.RenewDeadline); releaseErr != nil {
		logger.Error(releaseErr, "Failed to release the lease; standbys take over once it expires")
	}
	resetLeaderMetric(electorConfig)
	return err
}

// resetLeaderMetric sets leader_election_master_status of the Lease back to 0.
// client-go's elector does so on a failed renewal or when an elector is made, not on a
// release it did not do itself (ReleaseOnCancel is off) nor on an election ended by its
// context. A process that stays up after the election (a sharded replica handing a
// shard over, or losing it) would report the Lease as held: a new elector for the same
// Lease, never run, sets it to 0.
func resetLeaderMetric(cfg leaderelection.LeaderElectionConfig) {
	_, _ = leaderelection.NewLeaderElector(cfg)
}

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
