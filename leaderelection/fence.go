package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
)

// Fence knows, by this process's monotonic clock, until when this replica holds the
// Lease, and refuses writes after that (see Transport). It learns of every successful
// acquisition and renewal from the lock the elector writes through (see Config.Fence),
// so it needs no cooperation from the controllers.
//
// The Lease is ours from the moment a write naming us as holder succeeded until that
// write's send time + the lease duration - Margin: the apiserver applied the write at
// the send time or later, and a standby waits a full lease duration, on its own clock,
// from the moment it saw that write before it takes over. Counting from the send time
// and not from the response is what keeps a slow renewal from stretching the fence.
//
// A leader that could not renew for the renew deadline pauses: the fence is closed by
// its clock (see bound) and reopens at the next renewal that succeeds, since that
// optimistic write proves nobody took the Lease in between. A term that lost or
// released the Lease closes the fence for good; only a new term (newTerm, which Run
// calls after the last term's workers drained) can open it again, at its acquisition.
type Fence struct {
	// lease names the Lease, namespace/name, for errors.
	lease string
	// validFor is how long after a successful write was sent the Lease is ours.
	validFor time.Duration
	// pauseAfter, when set and shorter than validFor, is how long after a successful
	// write was sent this replica writes: the renew deadline (see bound).
	pauseAfter time.Duration
	clock      clock.PassiveClock
	// refused counts the writes the fence refused, for the lost-lease log line.
	refused atomic.Int64
	// allowance is how long after it was sent a write may still be applied: Margin's
	// part for the write itself (see settle).
	allowance time.Duration

	mu sync.Mutex
	// held is set by the first successful write naming us as holder.
	held bool
	// until is when the Lease stops being ours unless renewed; meaningful when held.
	until time.Time
	// closedAt and closedBecause record the end of the term: lost, taken over or
	// released. The fence stays closed until the next term (newTerm).
	closedAt      time.Time
	closedBecause string
	// holding, while set, keeps the fence closed although the Lease is held, and says
	// why: a term that paused waits, after the renewal that resumes it, until the
	// caller showed its caches fresh (see Config.Resume).
	holding string
	// inFlight are the send times of the writes let through and not answered yet;
	// unanswered is the latest send time of a write that ended without an answer (a
	// timeout, a cancel, a broken connection), which the apiserver may still apply.
	inFlight   map[*http.Request]time.Time
	unanswered time.Time
	// reopened, when not nil, is closed the next time the fence opens (WhenOpen).
	reopened chan struct{}
}

// NewFence returns a closed fence for the Lease named lease (namespace/name) of the
// given duration, measured on clk (nil means the real clock). It opens at the first
// successful acquisition.
func NewFence(lease string, leaseDuration time.Duration, clk clock.PassiveClock) *Fence {
	if clk == nil {
		clk = clock.RealClock{}
	}
	registerMetrics()
	// Standbys use the duration written into the Lease, in whole seconds, truncated
	// as client-go writes it.
	written := leaseDuration.Truncate(time.Second)
	return &Fence{lease: lease, validFor: written - Margin(written), allowance: writeAllowance(written), clock: clk}
}

// Margin is how much earlier than a standby the fence gives up the Lease:
//
//   - 1% of the lease duration for the clocks. The standby measures the lease duration
//     on its clock, the fence on ours; 1% covers a relative rate difference of 0.5%
//     in either direction, ten times the most NTP ever slews a clock (500 ppm), so an
//     undisciplined or badly virtualised clock is still covered. Clock offsets do not
//     matter: no timestamp is compared across machines.
//   - 1s for the write itself, the Kubernetes SLO for the p99 latency of a mutating
//     API call: a write sent just before the fence closes must still be applied
//     before a standby can have taken over. Each allowed write's context ends when
//     the fence closes, but a request already at the apiserver may still be applied.
//     For short leases this part is at most a quarter of the lease, so that the fence
//     stays open between the renewals of a healthy leader (a renewal every retry
//     period, which is below a lease duration / 1.2).
//
// At 15s leases the fence closes 1.15s before a standby may take over, at 5s 1.05s.
func Margin(leaseDuration time.Duration) time.Duration {
	return leaseDuration/100 + writeAllowance(leaseDuration)
}

// writeAllowance is Margin's part for the write itself.
func writeAllowance(leaseDuration time.Duration) time.Duration {
	return min(time.Second, leaseDuration/4)
}

// Check reports whether this replica may write now. If it may, it returns when the
// fence closes unless the Lease is renewed; otherwise a *FencedError that says why.
func (f *Fence) Check() (time.Time, error) {
	now := f.clock.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.closedBecause != "":
		since := f.closedAt
		if f.held && f.until.Before(since) {
			since = f.until
		}
		return time.Time{}, &FencedError{Lease: f.lease, Reason: f.closedBecause, Ago: now.Sub(since)}
	case !f.held:
		return time.Time{}, &FencedError{Lease: f.lease, Reason: "this replica has not acquired it"}
	case f.holding != "":
		return time.Time{}, &FencedError{Lease: f.lease, Reason: f.holding}
	case !now.Before(f.until):
		return time.Time{}, &FencedError{Lease: f.lease, Reason: "paused: not renewed in time by this replica's clock; " +
			"writes resume once a renewal succeeds", Ago: now.Sub(f.until)}
	}
	return f.until, nil
}

// openLocked reports whether the fence lets writes through at now; f.mu is held.
func (f *Fence) openLocked(now time.Time) bool {
	return f.closedBecause == "" && f.held && f.holding == "" && now.Before(f.until)
}

// reopenedLocked closes the channel of WhenOpen if the fence is open now; f.mu is held.
func (f *Fence) reopenedLocked() {
	if f.reopened != nil && f.openLocked(f.clock.Now()) {
		close(f.reopened)
		f.reopened = nil
	}
}

// WhenOpen returns a channel that is closed once the fence lets writes through: at
// once (an already closed channel) when it does now, else when a renewal or the end of
// a hold reopens it. After a lost or released Lease that happens only in a new term.
// Controllers park the keys whose writes the fence refused until then, instead of
// backing them off as failures (see queueworker).
func (f *Fence) WhenOpen() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.openLocked(f.clock.Now()) {
		return closedChannel
	}
	if f.reopened == nil {
		f.reopened = make(chan struct{})
	}
	return f.reopened
}

// closedChannel is returned by WhenOpen while the fence is open.
var closedChannel = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Refused reports whether err is, or wraps, a write this fence's kind refused.
func (f *Fence) Refused(err error) bool {
	var fenced *FencedError
	return errors.As(err, &fenced)
}

// bound makes the fence close d after a successful write was sent when d is shorter
// than the lease duration - Margin: Run passes the renew deadline, at which a leader
// that could not renew pauses.
func (f *Fence) bound(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d > 0 && d < f.validFor {
		f.pauseAfter = d
	}
}

// newTerm readies a closed fence for the next acquisition: it stays closed ("not
// acquired") until the first successful write of the new term. Run calls it before it
// campaigns, never while a run function of an earlier term may still write.
func (f *Fence) newTerm() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held, f.until, f.closedAt, f.closedBecause, f.holding = false, time.Time{}, time.Time{}, "", ""
}

// hold keeps the fence closed, for reason, until unhold, whatever the renewals.
func (f *Fence) hold(reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.holding = reason
}

// unhold ends hold: the fence is open again while the Lease is held.
func (f *Fence) unhold() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.holding = ""
	f.reopenedLocked()
}

// Close closes the fence for the rest of the term, before the caller writes anything
// that gives up the Lease or after it learnt that the Lease is lost.
func (f *Fence) Close(reason string) {
	now := f.clock.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closedBecause == "" {
		f.closedAt, f.closedBecause = now, reason
	}
}

// sending records that req, let through the fence, is being sent; answered that its
// round trip ended, with an answer or without (then the apiserver may still apply it).
func (f *Fence) sending(req *http.Request) {
	now := f.clock.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inFlight == nil {
		f.inFlight = map[*http.Request]time.Time{}
	}
	f.inFlight[req] = now
}

func (f *Fence) answered(req *http.Request, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if sent, found := f.inFlight[req]; found && !ok && sent.After(f.unanswered) {
		f.unanswered = sent
	}
	delete(f.inFlight, req)
}

// settle waits, before the Lease is released, until no write this fence let through
// may still be applied: each one is answered, or was sent longer ago than the write
// allowance (a write still at the apiserver then lands within it, as Margin assumes
// for the expiry path). A released Lease is taken by a standby within milliseconds,
// so without this a write abandoned by a draining worker (its context canceled
// mid-flight) could be applied after another replica took over. It waits at most the
// allowance, and not at all in the usual case: every write answered.
func (f *Fence) settle(ctx context.Context) time.Duration {
	f.mu.Lock()
	latest := f.unanswered
	for _, sent := range f.inFlight {
		if sent.After(latest) {
			latest = sent
		}
	}
	f.mu.Unlock()
	if latest.IsZero() {
		return 0
	}
	wait := latest.Add(f.allowance).Sub(f.clock.Now())
	if wait <= 0 {
		return 0
	}
	start := time.Now()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
	return time.Since(start)
}

// RefusedWrites returns how many writes the fence refused so far.
func (f *Fence) RefusedWrites() int64 { return f.refused.Load() }

// extend records a successful write naming this replica as holder, sent at sent.
func (f *Fence) extend(sent time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closedBecause != "" {
		return
	}
	validFor := f.validFor
	if f.pauseAfter > 0 {
		validFor = f.pauseAfter
	}
	until := sent.Add(validFor)
	if !f.held || until.After(f.until) {
		f.held, f.until = true, until
	}
	f.reopenedLocked()
}

// leading reports whether the fence was opened and not closed yet, i.e. whether this
// replica believes it holds the Lease.
func (f *Fence) leading() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held && f.closedBecause == ""
}

// FencedError is the error of a write the fence refused.
type FencedError struct {
	// Lease is namespace/name.
	Lease string
	// Reason says why this replica does not hold the Lease.
	Reason string
	// Ago is how long ago the fence closed; 0 if it never opened.
	Ago time.Duration
}

func (e *FencedError) Error() string {
	when := ""
	if e.Ago > 0 {
		when = fmt.Sprintf(", since %s ago", e.Ago.Round(time.Millisecond))
	}
	return fmt.Sprintf("write fenced: this replica does not hold lease %s (%s%s); only the Lease holder writes. "+
		"This is expected while a replica steps down; if it lasts, this replica cannot renew the Lease (see its leader election log)",
		e.Lease, e.Reason, when)
}

// fencedLock is the election's lock with the fence attached: every successful write
// naming this replica as holder extends the fence from the moment it was sent (a
// paused fence reopens); a write naming anyone else (a release) closes the fence
// before it is sent; a read showing another holder while this replica leads closes
// the fence before the caller learns of it.
type fencedLock struct {
	resourcelock.Interface
	fence *Fence
}

func (l *fencedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	record, raw, err := l.Interface.Get(ctx)
	if err == nil && record.HolderIdentity != l.Identity() && l.fence.leading() {
		l.fence.Close(fmt.Sprintf("taken over by %q", record.HolderIdentity))
	}
	return record, raw, err
}

func (l *fencedLock) Create(ctx context.Context, record resourcelock.LeaderElectionRecord) error {
	return l.write(ctx, record, l.Interface.Create)
}

func (l *fencedLock) Update(ctx context.Context, record resourcelock.LeaderElectionRecord) error {
	return l.write(ctx, record, l.Interface.Update)
}

func (l *fencedLock) write(ctx context.Context, record resourcelock.LeaderElectionRecord,
	write func(context.Context, resourcelock.LeaderElectionRecord) error) error {
	if record.HolderIdentity != l.Identity() {
		l.fence.Close("released")
		return write(ctx, record)
	}
	sent := l.fence.clock.Now()
	if err := write(ctx, record); err != nil {
		return err
	}
	l.fence.extend(sent)
	return nil
}
