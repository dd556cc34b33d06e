// Package leaderelection runs mini-kcm's controllers only while this process holds a
// Lease, and hands the Lease over safely when the process stops.
//
// Guarantees and limits:
//
//   - Writes are fenced in the process (Fence, attached by Config.Fence): no mutating
//     request leaves a client built with Fence.Transport unless this replica holds the
//     Lease by its own monotonic clock, that is until the send time of its last
//     successful acquisition or renewal + the lease duration - Margin (1% for clock
//     rates, plus up to 1s for the write's own latency). The fence closes at once when
//     the elector stops leading, when a read of the Lease shows another holder (which
//     also ends the election as a lost Lease, so a resumed leader steps down at its
//     first renewal attempt instead of after the renew deadline), and before a release
//     is sent. An allowed write's context ends when the fence closes. Reads, events
//     and the Lease client are not fenced. Limits: a write already sent when the fence
//     closes may still be applied by the apiserver, up to its own latency later (the
//     margin covers the usual one, not a stuck request); and the monotonic clock
//     (CLOCK_MONOTONIC) does not advance while a whole VM is suspended, so a leader on a
//     VM resumed after its lease expired believes it still holds it for the rest of the
//     lease; only a check at the apiserver (an admission policy comparing the Lease)
//     covers that. A paused process (SIGSTOP, a long GC pause, a throttled container)
//     is covered: its monotonic clock keeps running.
//   - Writes are fenced at the apiserver too, when the caller asks for it
//     (ImpersonateHolder, --leader-elect-apiserver-fence): each controller's client
//     impersonates its own user with the user extra LeaseHolderExtra = Identity, and the
//     ValidatingAdmissionPolicy FencePolicyName of deploy/fence/ refuses a write of a
//     mini-kcm identity whose extra is not the Lease's holder. That covers the suspended
//     VM and a write stuck on its way. Its limit is the apiserver's view of the Lease,
//     its watch cache: measured on a local apiserver over 35 takeovers, writes of the
//     old holder received after the takeover was answered were admitted in 3, at most
//     3.4ms after (p50 0), and admitted writes were answered up to 9.8ms after (see
//     deploy/README.md, "Fencing"). With several apiservers each lags on its own.
//   - The bound. Let t be the moment the leader sent its last successful renewal. The
//     apiserver wrote it at t or later, so no standby takes over before t + lease
//     duration. The leader learns of that renewal by t + request timeout (the Lease
//     client's timeout, see Timings.RequestTimeout), waits one retry period, then tries
//     for at most the renew deadline before it gives up and exits. So a cut-off leader
//     stops acting by t + request timeout + retry period + renew deadline
//     (Timings.StopBound), and only a lease duration longer than that guarantees that
//     it stopped before a standby started. With the fence, its writes stop earlier
//     still, at t + lease duration - Margin, whatever the timings.
//   - Every decision uses the local clock only. A standby takes over once it has seen no
//     change to the Lease for leaseDurationSeconds measured on its own clock; timestamps
//     written by other replicas are never compared with ours. Clock skew is therefore
//     harmless, but a clock running much faster than the leader's shortens the wait.
//     Keep --leader-elect-lease-duration comfortably above the bound below.
//   - Prompt takeover (Config.LeaseWatch): a standby watches the Lease, notes when it
//     saw each change, and tries at that moment + leaseDurationSeconds instead of
//     client-go's poll every 1 to 2.2 retry periods. It reads the Lease first and writes
//     it with the resourceVersion read: a renewal the watch had not delivered restarts
//     the wait, a racing write fails with a conflict and is read again. A lagging watch
//     therefore only delays a takeover (by up to a lease duration), never hastens it.
//     The elector takes over the renewals once this candidate holds the Lease.
//   - Lost lease: when the leader cannot renew within the renew deadline, or (with a
//     fence) reads the Lease with another holder, while it is not shutting down (or
//     while its controllers are draining), it logs "leaderelection lost" and exits
//     with code 1 at once. It does not release the Lease or write
//     anything else: another replica may already be leading, and restarting is the only
//     way to be sure no worker of this process acts any more.
//   - Lost lease with Config.KeepRunningOnLoss (a sharded replica's shard Leases): the
//     fence closes first, as above, so no worker writes again; then run's context is
//     cancelled and Run waits for run to drain and returns ErrLeaseLost, without
//     releasing or writing the Lease. The process stays up and may campaign again. If run
//     gives up on its workers (ErrControllersStillRunning), the process exits as above:
//     the fence keeps a stuck worker from writing, but only an exit stops it for sure.
//   - SIGTERM (the caller cancels ctx): the controllers' context is cancelled and Run
//     waits for the run function to return, which the app does only after every worker
//     stopped (bounded by --controller-shutdown-timeout) and the informers stopped. The
//     Lease is renewed during that time. Only then is the Lease released (holder "",
//     duration 1s) with a fresh context, so a standby takes over within about one retry
//     period instead of a full lease duration, and never while an old worker still runs.
//     If the run function reports that controllers are still running
//     (ErrControllersStillRunning), the Lease is not released and simply expires.
//
// This differs from client-go's LeaderElector with ReleaseOnCancel, which releases the
// Lease as soon as its context is cancelled, while OnStartedLeading is still running, and
// which also tries to release after a lost renewal. Run therefore drives the elector with
// ReleaseOnCancel off and releases the Lease itself, after the run function returned.
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
	// LeaseDuration, RenewDeadline and RetryPeriod time the election; they must satisfy
	// LeaseDuration > RenewDeadline > 1.2 × RetryPeriod.
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
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
