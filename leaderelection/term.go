package leaderelection

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// term keeps the Lease while this candidate leads: it renews it every retry period with
// an optimistic update on the resourceVersion it last wrote, until the run function
// returned or the Lease is lost. It replaces the renew loop of client-go's elector,
// which ends the term at the renew deadline; a term here pauses instead:
//
//   - A renewal that succeeds proves that nobody wrote the Lease since this term's
//     previous write, so the Lease is ours for a lease duration from when it was sent
//     (the fence opens, or stays open, until then minus its margin).
//   - No successful renewal for the renew deadline pauses the term: the fence is
//     closed by its clock (see Fence.bound), the workers keep running but write
//     nothing, and renewals go on. The next one that succeeds resumes the term. A
//     stall of the apiserver that every replica shares therefore changes no leader:
//     the standbys do not count the stall either (see standby).
//   - A conflict means somebody wrote the Lease. The term reads it: a record this term
//     wrote (a renewal whose answer was lost, applied after all) or one that still
//     names this candidate with only its metadata changed is adopted and renewed from;
//     any other holder, an empty holder or a deleted Lease means the Lease is lost.
//
// Without a fence nothing keeps the run function from writing while paused, so a term
// without one ends at the renew deadline instead, as client-go's does.
type term struct {
	lock     resourcelock.Interface
	identity string
	Timings
	clock clock.Clock
	// fenced is set when a fence guards the run function's writes.
	fenced bool
	// health reports to the watchdog that the term still tries to renew.
	health *Watchdog
	// name is the Lease's name, for metrics.
	name string

	// record is what this term last wrote successfully, or adopted.
	record resourcelock.LeaderElectionRecord
	// renewed is when the last successful write was sent.
	renewed time.Time
	// attempts are the records this term sent since its last success: any of them may
	// have been applied although its answer was lost.
	attempts []resourcelock.LeaderElectionRecord
	// pausedAt is when the term paused; zero while it is not paused.
	pausedAt time.Time

	// fence and resume, when both are set, keep the fence of a term that paused closed
	// after the renewal that resumes it, until resume returned (see Config.Resume).
	fence  *Fence
	resume func(ctx context.Context, pausedFor time.Duration) error
	// resuming is the resume in progress, if any.
	resuming *resumption
}

// resumption is one call of the term's resume, in a goroutine the term waits for.
type resumption struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// maxAttempts bounds term.attempts: a renewal sent more than that many attempts ago
// and applied only now is not recognised, and the Lease is then taken for lost, which
// is safe.
const maxAttempts = 64

// termEnd says why a term ended.
type termEnd int

const (
	// runReturned: the run function returned; the Lease is still this term's.
	runReturned termEnd = iota
	// leaseLost: another holder, a release or a deletion was read, or a term without a
	// fence reached the renew deadline.
	leaseLost
)

// keep renews the Lease until done is closed (runReturned) or the Lease is lost
// (leaseLost, with the reason). The term starts from the acquisition's record, sent at
// sent.
func (t *term) keep(ctx context.Context, done <-chan struct{}, acquired resourcelock.LeaderElectionRecord, sent time.Time) (termEnd, string) {
	logger := klog.FromContext(ctx)
	t.record, t.renewed = acquired, sent
	t.health.leading(t)
	defer t.health.standing(t)
	defer t.stopResuming()
	defer updateStats(t.name, func(s *LeaseStats) { s.PausedSince = time.Time{} })
	next := sent.Add(t.RetryPeriod)
	for {
		now := t.clock.Now()
		if !now.Before(t.renewed.Add(t.RenewDeadline)) && t.pausedAt.IsZero() {
			if !t.fenced {
				return leaseLost, fmt.Sprintf("not renewed within the renew deadline (%s), and no fence to pause the writes", t.RenewDeadline)
			}
			t.pausedAt = now
			if t.holdsOnResume() {
				// Held from the pause on: the renewal that resumes the term reopens the
				// fence by its clock, and the hold must already be there.
				t.stopResuming()
				t.fence.hold("resuming after a pause: writes pass again once the caches are shown fresh")
			}
			pauses.WithLabelValues(t.name).Inc()
			// A paused leader does no leader's work: it is not reported as the master.
			leaderStatus.WithLabelValues(t.name).Set(0)
			updateStats(t.name, func(s *LeaseStats) { s.Pauses++; s.PausedSince = now })
			logger.Error(nil, "Paused leading: the lease was not renewed within the renew deadline; writes are fenced until a renewal succeeds",
				"renewDeadline", t.RenewDeadline, "lastRenewal", now.Sub(t.renewed).Round(time.Millisecond))
		}
		if wait := next.Sub(now); wait > 0 {
			// Wake at the renew deadline too, to pause on time.
			if untilDeadline := t.renewed.Add(t.RenewDeadline).Sub(now); t.pausedAt.IsZero() && untilDeadline > 0 && untilDeadline < wait {
				wait = untilDeadline
			}
			timer := t.clock.NewTimer(wait)
			select {
			case <-done:
				timer.Stop()
				return runReturned, ""
			case <-timer.C():
				continue
			}
		}
		select {
		case <-done:
			return runReturned, ""
		default:
		}
		sent := t.clock.Now()
		next = sent.Add(t.RetryPeriod)
		lost, why := t.renew(ctx, sent)
		if lost {
			return leaseLost, why
		}
	}
}

// renew sends one renewal, and reads the Lease after a conflict. It reports whether
// the Lease is lost, and why.
func (t *term) renew(ctx context.Context, sent time.Time) (lost bool, why string) {
	logger := klog.FromContext(ctx)
	t.health.attempt(t)
	record := t.record
	record.RenewTime = metav1.NewTime(sent)
	record.HolderIdentity = t.identity
	if len(t.attempts) == maxAttempts {
		t.attempts = t.attempts[1:]
	}
	t.attempts = append(t.attempts, record)
	reqCtx, cancel := context.WithTimeout(ctx, t.RequestTimeout())
	defer cancel()
	err := t.lock.Update(reqCtx, record)
	if err == nil {
		t.succeeded(ctx, record, sent)
		return false, ""
	}
	if !apierrors.IsConflict(err) {
		logger.V(2).Info("Failed to renew the lease; trying again", "err", err, "sinceLastRenewal", t.clock.Since(t.renewed).Round(time.Millisecond))
		return false, ""
	}
	// Somebody wrote the Lease since this term's last write: read what it holds.
	current, _, err := t.lock.Get(reqCtx)
	switch {
	case apierrors.IsNotFound(err):
		return true, "the lease was deleted"
	case err != nil:
		logger.V(2).Info("Failed to read the lease after a conflicting renewal; trying again", "err", err)
		return false, ""
	case current.HolderIdentity != t.identity:
		if current.HolderIdentity == "" {
			return true, "the lease was released by another writer"
		}
		return true, fmt.Sprintf("taken over by %q", current.HolderIdentity)
	}
	// Still ours: one of this term's renewals applied after its answer was lost, or a
	// change of the Lease's metadata only. Renew from what was read, at once.
	if !t.wroteThis(*current) {
		logger.Info("The lease names this replica in a record this term did not write; renewing from it", "record", current)
	}
	t.record = *current
	t.attempts = t.attempts[:0]
	sent = t.clock.Now()
	record = t.record
	record.RenewTime = metav1.NewTime(sent)
	t.attempts = append(t.attempts, record)
	if err := t.lock.Update(reqCtx, record); err != nil {
		logger.V(2).Info("Failed to renew the lease after reading it; trying again", "err", err)
		return false, ""
	}
	t.succeeded(ctx, record, sent)
	return false, ""
}

// succeeded records a successful renewal sent at sent, and resumes a paused term.
func (t *term) succeeded(ctx context.Context, record resourcelock.LeaderElectionRecord, sent time.Time) {
	t.record, t.renewed = record, sent
	t.attempts = t.attempts[:0]
	if !t.pausedAt.IsZero() {
		paused := t.clock.Since(t.pausedAt)
		t.pausedAt = time.Time{}
		resumes.WithLabelValues(t.name).Inc()
		leaderStatus.WithLabelValues(t.name).Set(1)
		updateStats(t.name, func(s *LeaseStats) { s.Resumes++; s.PausedSince = time.Time{} })
		klog.FromContext(ctx).Info("Resumed leading: the lease was renewed", "pausedFor", paused.Round(time.Millisecond))
		if t.holdsOnResume() {
			t.startResuming(ctx, paused)
		}
	}
}

// holdsOnResume reports whether a pause holds the fence until the caches are fresh.
func (t *term) holdsOnResume() bool {
	return t.fence != nil && t.resume != nil
}

// startResuming calls resume in a goroutine and opens the fence once it returned nil.
func (t *term) startResuming(ctx context.Context, pausedFor time.Duration) {
	t.stopResuming()
	resumeCtx, cancel := context.WithCancel(ctx)
	r := &resumption{cancel: cancel, done: make(chan struct{})}
	t.resuming = r
	go func() {
		defer close(r.done)
		logger := klog.FromContext(ctx)
		start := t.clock.Now()
		if err := t.resume(resumeCtx, pausedFor); err != nil {
			if resumeCtx.Err() == nil {
				logger.Error(err, "Resuming after a pause: the caches could not be shown fresh; writes stay fenced until the next resume")
			}
			return
		}
		t.fence.unhold()
		logger.Info("Writes resume: the caches are fresh after the pause", "pausedFor", pausedFor.Round(time.Millisecond),
			"took", t.clock.Since(start).Round(time.Millisecond))
	}()
}

// stopResuming cancels the resume in progress, if any, and waits for it.
func (t *term) stopResuming() {
	if t.resuming == nil {
		return
	}
	t.resuming.cancel()
	<-t.resuming.done
	t.resuming = nil
}

// wroteThis reports whether record is the last record this term wrote, or one of the
// renewals it sent since, as the apiserver stores them (to the microsecond).
func (t *term) wroteThis(record resourcelock.LeaderElectionRecord) bool {
	if sameRecord(record, t.record) {
		return true
	}
	for _, a := range t.attempts {
		if sameRecord(record, a) {
			return true
		}
	}
	return false
}

func sameRecord(a, b resourcelock.LeaderElectionRecord) bool {
	micro := func(t time.Time) time.Time { return t.Truncate(time.Microsecond) }
	return a.HolderIdentity == b.HolderIdentity && a.LeaseDurationSeconds == b.LeaseDurationSeconds &&
		a.LeaderTransitions == b.LeaderTransitions && a.PreferredHolder == b.PreferredHolder && a.Strategy == b.Strategy &&
		micro(a.AcquireTime.Time).Equal(micro(b.AcquireTime.Time)) && micro(a.RenewTime.Time).Equal(micro(b.RenewTime.Time))
}

// Watchdog is the leader-election check of /livez and /healthz: it fails when this
// replica leads but a term stopped trying to renew its Lease (a wedged renew loop), so
// that the kubelet restarts it. It does not fail while renewals are tried and fail: a
// paused leader is waiting for the apiserver, and restarting it would cost the cluster
// its leader at the moment the apiserver comes back.
type Watchdog struct {
	// tolerance is how long beyond a renew deadline plus a request timeout without an
	// attempt the check still passes.
	tolerance time.Duration
	clock     clock.PassiveClock

	mu sync.Mutex
	// terms holds, for each running term (a sharded replica runs several), when it
	// last tried to renew and how long it may go without trying.
	terms map[*term]watched
}

type watched struct {
	lastAttempt time.Time
	limit       time.Duration
	lease       string
}

// NewWatchdog returns the check; tolerance is how long a renew loop may stall beyond
// its renew deadline and a request timeout before the check fails.
func NewWatchdog(tolerance time.Duration) *Watchdog {
	return &Watchdog{tolerance: tolerance, clock: clock.RealClock{}, terms: map[*term]watched{}}
}

// Name names the check leaderElection, as client-go's HealthzAdaptor does.
func (w *Watchdog) Name() string { return "leaderElection" }

// Check fails when a running term has not tried to renew its Lease for its renew
// deadline plus a request timeout plus the tolerance.
func (w *Watchdog) Check(*http.Request) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clock.Now()
	for _, t := range w.terms {
		if since := now.Sub(t.lastAttempt); since > t.limit {
			return fmt.Errorf("leading lease %s, but its renewal loop has not tried to renew for %s (limit %s): it is wedged",
				t.lease, since.Round(time.Second), t.limit)
		}
	}
	return nil
}

// leading starts watching t.
func (w *Watchdog) leading(t *term) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.terms[t] = watched{lastAttempt: w.clock.Now(), limit: t.RenewDeadline + t.RequestTimeout() + w.tolerance, lease: t.lock.Describe()}
}

// standing stops watching t.
func (w *Watchdog) standing(t *term) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.terms, t)
}

// attempt records that t is trying to renew now.
func (w *Watchdog) attempt(t *term) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if entry, ok := w.terms[t]; ok {
		entry.lastAttempt = w.clock.Now()
		w.terms[t] = entry
	}
}
