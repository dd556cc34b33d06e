package leaderelection

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr/funcr"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/mini-kcm/mini-kcm/test/simapiserver"
)

// The simulation runs three replicas of the real election (Run: the standby, the term,
// the fence on its lock, the fenced transport of the controllers' writes) against a
// simulated apiserver (simapiserver_test.go) in a synctest bubble, whose fake clock
// times everything: the apiserver's latencies and stalls, and the product's own timers
// and request timeouts, which FakeClock could not reach (the term's request context
// and the fenced transport's context are context.WithTimeout on the time package).
// The bubble also advances time only once every goroutine waits, which a FakeClock
// driver would have to guess. A seed picks the schedule; the checker judges only what
// the apiserver accepted, never what a replica believed:
//
//   - Safety: every controller write the apiserver accepted was applied while the
//     apiserver's Lease named its writer, SIGTERM handover included. The product
//     promises this for a write that reaches the apiserver within Margin's write
//     allowance (writeAllowance, 1s at the shipped 4s leases) of the moment it left
//     the fenced transport: on expiry the fence closes that long before any standby
//     may take over (plus 1% for the clocks), and on SIGTERM Fence.settle waits that
//     long for a write that has no answer before the Lease is released. The pause at
//     the renew deadline leaves more room on its own path, but only there (see
//     simMaxWriteLatency), so the schedules keep a write's way under the allowance.
//   - Pause: every accepted controller write left its replica within the renew
//     deadline of the send time (the record's renewTime) of an accepted Lease write
//     naming that replica. The fence promises it (see Fence.bound); the safety rule
//     alone cannot show it at the shipped timings, where Margin covers the allowance.
//   - Liveness: once the faults stop, a holder writes within simSettle and keeps
//     writing; every replica keeps reading or renewing the Lease (a campaign that
//     hangs stops doing so); on SIGTERM every replica returns and the Lease ends
//     released.
//   - A stall of the whole apiserver, however long, changes no leader: the Lease keeps
//     its holder, no term is lost, and the holder writes again soon after each stall.
//
// Each mutation (Config.mutation) must be caught by the same schedules.

var (
	simSeeds = flag.Int("sim-seeds", 0, "number of election simulator schedules (0: LEADERELECTION_SIM_SEEDS or the default)")
	simSeed  = flag.Int64("sim-seed", -1, "run this one election simulator schedule, and print its whole trace")
)

// simDefaultSeeds keeps go test -race of the package under half a minute on two
// cores, the planted bugs included (about 10s of it for the schedules).
const simDefaultSeeds = 150

// simTimings are the timings mini-kcm ships: options' defaultLeaseDuration,
// defaultRenewDeadline and defaultRetryPeriod (this package cannot import options).
// options' TestDefaultElectionTimingsAreWhatTheSimulatorRuns fails when those change,
// so that this copy and the constants below are derived again.
var simTimings = Timings{LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond}

const (
	simReplicas = 3
	// simWorkers controller workers per leader each write every simWriteInterval.
	simWorkers       = 3
	simWriteInterval = 250 * time.Millisecond
)

// What the schedules do with the timings. At 4s/2s/500ms the Lease request timeout
// (Timings.RequestTimeout) is max(1s, min(2s/2, (4s-2s-0.5s)/2)) = 1s, and Margin
// 4s/100 + writeAllowance(4s) = 40ms + min(1s, 4s/4) = 1.04s.
var (
	simRequestTimeout = simTimings.RequestTimeout()
	// simMaxWriteLatency bounds a controller write's way to the apiserver once it left
	// the fenced transport (the draws stay below it): what the product promises, its
	// write allowance writeAllowance(4s) = min(1s, 4s/4) = 1s. The pause gives more
	// room on its own path only: a paused leader's fence closes at its last
	// successful renewal's send time S + the renew deadline, and no standby takes over
	// before S + the lease duration, so a write there may take 4s - 2s = 2s. But on
	// expiry without the pause (a renew deadline beyond lease duration - Margin) a
	// write has Margin - 1% = 1s, and on SIGTERM Fence.settle waits 1s after a write
	// without an answer was sent before releasing the Lease to a standby that takes
	// it within milliseconds: 1s is the bound on every path.
	simMaxWriteLatency = writeAllowance(simTimings.LeaseDuration)
	// simWarmUp is when the first fault may start: two lease durations, for the
	// first acquisition and a few renewals.
	simWarmUp = 2 * simTimings.LeaseDuration
	// simStallFrom and simStallTo bound the stalls, drawn log-uniformly so that as
	// many end before the renew deadline (no pause) as between it and the lease
	// duration (a pause, no takeover), and most outlast the lease (a takeover): from
	// half the renew deadline to eight lease durations, 1s to 32s.
	simStallFrom = simTimings.RenewDeadline / 2
	simStallTo   = 8 * simTimings.LeaseDuration
	// simSlowCallFrom and simSlowCallTo bound a slow Lease call's way: a fifth of a
	// request timeout to two and a half, 0.2s to 2.5s, often beyond the timeout.
	simSlowCallFrom = simRequestTimeout / 5
	simSlowCallTo   = 5 * simRequestTimeout / 2
	// simWindowFrom and simWindowTo bound the windows of lost answers and slow
	// calls: one to six lease durations, 4s to 24s, 8 to 48 renewals.
	simWindowFrom = simTimings.LeaseDuration
	simWindowTo   = 6 * simTimings.LeaseDuration
	// simSettle is how soon after the last fault a holder must write: twice the
	// slowest path there, a request timeout for a standby to read the last record,
	// a lease duration for it to count, a retry period to take the Lease and a slow
	// write: 2 × (1s + 4s + 0.5s + 1s) = 13s.
	simSettle = 2 * (simRequestTimeout + simTimings.LeaseDuration + simTimings.RetryPeriod + simMaxWriteLatency)
	// simQuiet is how long the schedule runs after the last fault ended: simSettle,
	// then three lease durations in which the checks below hold: 25s.
	simQuiet = simSettle + 3*simTimings.LeaseDuration
	// simMaxWriteGap is the longest time without an accepted write once settled: the
	// longest cycle of one worker (its write's way back, the interval, the next
	// write's way there: 1s + 0.25s + 1s), and a retry period of room: 2.75s.
	simMaxWriteGap = 2*simMaxWriteLatency + simWriteInterval + simTimings.RetryPeriod
	// simMaxCallGap is the longest a running replica may go without a Lease call once
	// settled: it reads or renews every retry period, each call ends within a request
	// timeout; two retry periods and a request timeout, 2s.
	simMaxCallGap = 2*simTimings.RetryPeriod + simRequestTimeout
	// simShutdown bounds how long a replica takes to return after SIGTERM: its workers
	// stop at once, a renewal in flight ends within a request timeout, Fence.settle
	// waits at most the write allowance, the release is bounded by the renew
	// deadline; and a retry period of room: 1s + 1s + 2s + 0.5s = 4.5s.
	simShutdown = simRequestTimeout + simMaxWriteLatency + simTimings.RenewDeadline + simTimings.RetryPeriod
	// simResume is how soon after a stall of the whole apiserver the holder writes
	// again: the renewal in flight times out (a request timeout), the next one is
	// sent within a retry period, finds its own late record and renews from it (a
	// retry period of room for these round trips), then a worker's interval and a
	// slow write: 1s + 0.5s + 0.5s + 0.25s + 1s = 3.25s.
	simResume = simRequestTimeout + 2*simTimings.RetryPeriod + simWriteInterval + simMaxWriteLatency
)

// simFault is one fault of a schedule: it starts at at and lasts for.
type simFault struct {
	at, length time.Duration
	kind       simFaultKind
	// replica is the replica whose connection stalls, -1 for the holder at the start.
	replica int
	// p is the probability of a lost answer, for lostAnswers.
	p float64
}

type simFaultKind int

const (
	// sharedStall: the apiserver answers nothing; calls that arrive are applied when
	// it recovers.
	sharedStall simFaultKind = iota
	// leaseStall: one replica's Lease connection (its Lease client and its watch)
	// stalls; its controllers' connection works.
	leaseStall
	// replicaStall: every connection of one replica stalls.
	replicaStall
	// lostAnswers: Lease writes are applied, but with probability p their answer is
	// lost and the client times out.
	lostAnswers
	// restart: SIGTERM to one replica; a new one (a new identity) starts after length.
	restart
	// slowCalls: with probability p, a Lease call's way takes 0.2 to 2.5s.
	slowCalls
)

func (k simFaultKind) String() string {
	return [...]string{"stall of the whole apiserver", "stall of the Lease connection", "stall of every connection",
		"lost answers to Lease writes", "restart", "slow Lease calls"}[k]
}

// simSchedule is what a seed decides.
type simSchedule struct {
	seed int64
	// sharedOnly schedules have stalls of the whole apiserver and nothing else, and
	// fast calls: no leader may change.
	sharedOnly bool
	faults     []simFault
	// watch says which replicas watch the Lease (Config.LeaseWatch).
	watch [simReplicas]bool
	// slowWrites is the probability that a controller write's way takes from half
	// simMaxWriteLatency to simMaxWriteLatency.
	slowWrites float64
	mutation   mutation
}

func newSimSchedule(seed int64, m mutation) simSchedule {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	s := simSchedule{seed: seed, mutation: m, sharedOnly: seed%4 == 0, slowWrites: []float64{0.05, 0.3}[rng.IntN(2)]}
	for i := range s.watch {
		s.watch[i] = rng.IntN(2) == 0
	}
	between := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(rng.Int64N(int64(hi-lo)/int64(time.Millisecond)))*time.Millisecond
	}
	stall := func() time.Duration {
		return time.Duration(float64(simStallFrom) * math.Pow(float64(simStallTo)/float64(simStallFrom), rng.Float64())).Round(time.Millisecond)
	}
	lease := simTimings.LeaseDuration
	at := simWarmUp
	if s.sharedOnly {
		for range 1 + rng.IntN(3) {
			f := simFault{at: at, length: stall(), kind: sharedStall}
			s.faults = append(s.faults, f)
			// Apart by more than simResume, so that each stall's end is checked.
			at += f.length + between(2*lease, 4*lease)
		}
		return s
	}
	for range 2 + rng.IntN(4) {
		f := simFault{at: at, replica: -1}
		switch k := rng.IntN(12); {
		case k < 2:
			f.kind, f.length = sharedStall, stall()
		case k < 5:
			f.kind, f.length = leaseStall, stall()
		case k < 7:
			f.kind, f.length = replicaStall, stall()
		case k < 9:
			f.kind, f.length, f.p = lostAnswers, between(simWindowFrom, simWindowTo), 0.3+0.5*rng.Float64()
		case k < 11:
			f.kind, f.length, f.p = slowCalls, between(simWindowFrom, simWindowTo), 0.05+0.25*rng.Float64()
		default:
			// The new replica starts up to two lease durations after the SIGTERM.
			f.kind, f.length = restart, between(0, 2*lease)
		}
		if (f.kind == leaseStall || f.kind == replicaStall) && rng.IntN(3) == 0 {
			f.replica = rng.IntN(simReplicas)
		}
		s.faults = append(s.faults, f)
		// Faults overlap often: the next one may start before this one ended.
		at += between(0, f.length+2*lease)
	}
	return s
}

// end is when the last fault ends.
func (s simSchedule) end() time.Duration {
	var end time.Duration
	for _, f := range s.faults {
		end = max(end, f.at+f.length)
	}
	return end
}

func (s simSchedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d", s.seed)
	if s.mutation != noMutation {
		fmt.Fprintf(&b, ", mutation %d", s.mutation)
	}
	fmt.Fprintf(&b, ", watching %v, slow writes %.0f%%; faults:", s.watch, 100*s.slowWrites)
	for _, f := range s.faults {
		fmt.Fprintf(&b, "\n  at %s for %s: %s", f.at, f.length, f.kind)
		switch {
		case f.kind == lostAnswers || f.kind == slowCalls:
			fmt.Fprintf(&b, " (%.0f%%)", 100*f.p)
		case f.kind == sharedStall:
		case f.replica < 0:
			b.WriteString(" of the holder")
		default:
			fmt.Fprintf(&b, " of replica %d", f.replica)
		}
	}
	return b.String()
}

// simReplica is one mini-kcm process: it campaigns until SIGTERM, again after each lost
// term, as app's campaignUntilShutdown does.
type simReplica struct {
	id         string
	api        *simapiserver.Server
	leaseStall *simapiserver.Stall
	ctrlStall  *simapiserver.Stall
	cfg        Config
	workers    []*simapiserver.Link
	cancel     context.CancelFunc
	done       chan struct{}

	// Guarded by the simulation's mutex once running.
	started, stopped, returned time.Time
	err                        error
	losses                     int
}

// sim is one schedule running.
type sim struct {
	schedule simSchedule
	api      *simapiserver.Server
	ctx      context.Context
	// mu guards replicas and their state.
	mu       sync.Mutex
	replicas []*simReplica
	running  sync.WaitGroup
}

func (s *sim) startReplica() *simReplica {
	s.mu.Lock()
	n := len(s.replicas)
	s.replicas = append(s.replicas, nil)
	s.mu.Unlock()
	// Each client draws its latencies from a source of its own, seeded by the
	// schedule and the replica, so that one client's draws do not depend on the order
	// in which goroutines ran.
	link := func(i int, stall *simapiserver.Stall, slow float64, slowFrom, slowTo time.Duration) *simapiserver.Link {
		return simapiserver.NewLink(fmt.Sprintf("r%d", n), stall, uint64(s.schedule.seed), uint64(n*16+i), slow, slowFrom, slowTo)
	}
	r := &simReplica{id: fmt.Sprintf("r%d", n), api: s.api, leaseStall: &simapiserver.Stall{}, ctrlStall: &simapiserver.Stall{}, done: make(chan struct{})}
	fence := NewFence(leaseNamespace+"/"+leaseName, simTimings.LeaseDuration, nil)
	r.cfg = Config{
		Client:    s.api.Clientset(link(0, r.leaseStall, -1, simSlowCallFrom, simSlowCallTo), simTimings.RequestTimeout()),
		Namespace: leaseNamespace,
		Name:      leaseName,
		Identity:  r.id,
		Timings:   simTimings,
		Fence:     fence,
		mutation:  s.schedule.mutation,
	}
	if n < simReplicas && s.schedule.watch[n] || n >= simReplicas && n%2 == 0 {
		// NewWatchClient has no request timeout.
		r.cfg.LeaseWatch = s.api.LeaseClient(link(1, r.leaseStall, -1, simSlowCallFrom, simSlowCallTo), 0)
	}
	for i := range simWorkers {
		r.workers = append(r.workers, link(2+i, r.ctrlStall, s.schedule.slowWrites, simMaxWriteLatency/2, simMaxWriteLatency))
	}
	ctx, cancel := context.WithCancel(s.ctx)
	r.cancel = cancel
	s.mu.Lock()
	r.started = time.Now()
	s.replicas[n] = r
	s.api.Tracef("%s: starts campaigning (watching the lease: %v)", r.id, r.cfg.LeaseWatch != nil)
	s.mu.Unlock()
	logger := funcr.New(func(prefix, args string) {
		s.api.Tracef("%s: log: %s", r.id, args)
	}, funcr.Options{})
	ctx = klog.NewContext(ctx, logger)
	s.running.Go(func() {
		defer close(r.done)
		for {
			err := Run(ctx, r.cfg, r.runControllers)
			if errors.Is(err, ErrLeaseLost) && !errors.Is(err, ErrControllersStillRunning) {
				s.mu.Lock()
				r.losses++
				s.api.Tracef("%s: Run returned %v; standing by again", r.id, err)
				s.mu.Unlock()
				if ctx.Err() == nil {
					continue
				}
				err = nil
			}
			s.mu.Lock()
			r.returned, r.err = time.Now(), err
			s.api.Tracef("%s: Run returned %v; the campaign ends", r.id, err)
			s.mu.Unlock()
			return
		}
	})
	return r
}

// runControllers is the run function: workers that each write through the replica's
// fenced controller transport until cancelled.
func (r *simReplica) runControllers(ctx context.Context) error {
	var workers sync.WaitGroup
	for i, link := range r.workers {
		rt := r.cfg.Fence.Transport("sim-controller")(r.api.ControllerTransport(link))
		workers.Go(func() {
			url := fmt.Sprintf("https://apiserver.sim/api/v1/namespaces/default/configmaps/worker-%d", i)
			for ctx.Err() == nil {
				req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, nil)
				if err != nil {
					panic(err)
				}
				if resp, err := rt.RoundTrip(req); err == nil {
					_ = resp.Body.Close()
				}
				select {
				case <-ctx.Done():
				case <-time.After(simWriteInterval):
				}
			}
		})
	}
	workers.Wait()
	return nil
}

// replicaFor returns the replica a fault targets: the given one, or the holder (the
// first replica still running if none holds the Lease).
func (s *sim) replicaFor(f simFault) *simReplica {
	holder := s.api.Holder(leaseName)
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.replica >= 0 {
		return s.replicas[f.replica]
	}
	for _, r := range s.replicas {
		if r != nil && r.id == holder && r.stopped.IsZero() {
			return r
		}
	}
	for _, r := range s.replicas {
		if r != nil && r.stopped.IsZero() {
			return r
		}
	}
	return s.replicas[0]
}

func (s *sim) stop(r *simReplica) {
	s.mu.Lock()
	if !r.stopped.IsZero() {
		s.mu.Unlock()
		return
	}
	r.stopped = time.Now()
	s.api.Tracef("%s: SIGTERM", r.id)
	s.mu.Unlock()
	r.cancel()
}

// play runs the schedule in the bubble, and returns what the checker found.
func (s *sim) play() error {
	for range simReplicas {
		s.startReplica()
	}
	start := time.Now()
	// Each fault is a goroutine that starts it and ends it on time.
	var faults sync.WaitGroup
	var lostAnswerWindows, slowCallWindows atomic.Int32
	for _, f := range s.schedule.faults {
		faults.Go(func() {
			time.Sleep(f.at)
			switch f.kind {
			case sharedStall:
				s.api.Tracef("fault: %s for %s", f.kind, f.length)
				s.api.Stall(true)
				time.Sleep(f.length)
				s.api.Stall(false)
				s.api.Tracef("fault ends: %s", f.kind)
			case leaseStall, replicaStall:
				r := s.replicaFor(f)
				s.api.Tracef("fault: %s of %s for %s", f.kind, r.id, f.length)
				r.leaseStall.Set(true)
				if f.kind == replicaStall {
					r.ctrlStall.Set(true)
				}
				time.Sleep(f.length)
				r.leaseStall.Set(false)
				if f.kind == replicaStall {
					r.ctrlStall.Set(false)
				}
				s.api.Tracef("fault ends: %s of %s", f.kind, r.id)
			case lostAnswers, slowCalls:
				set, windows := s.api.SetLostAnswers, &lostAnswerWindows
				if f.kind == slowCalls {
					set, windows = s.api.SetSlowCalls, &slowCallWindows
				}
				s.api.Tracef("fault: %s (%.0f%%) for %s", f.kind, 100*f.p, f.length)
				windows.Add(1)
				set(f.p)
				time.Sleep(f.length)
				if windows.Add(-1) == 0 {
					set(0)
				}
				s.api.Tracef("fault ends: %s", f.kind)
			case restart:
				s.stop(s.replicaFor(f))
				time.Sleep(f.length)
				s.startReplica()
			}
		})
	}
	faults.Wait()
	// Faults of overlapping stalls end in any order; the schedule's end is the last.
	faultsEnd := start.Add(s.schedule.end())
	time.Sleep(time.Until(faultsEnd.Add(simQuiet)))
	// SIGTERM: the standbys first, so that the holder's release is the Lease's last
	// write.
	shutdown := time.Now()
	holder := s.api.Holder(leaseName)
	s.mu.Lock()
	replicas := slices.Clone(s.replicas)
	s.mu.Unlock()
	slices.SortStableFunc(replicas, func(a, b *simReplica) int {
		if (a.id == holder) == (b.id == holder) {
			return 0
		}
		if a.id == holder {
			return 1
		}
		return -1
	})
	var hung []string
	for _, r := range replicas {
		s.stop(r)
		select {
		case <-r.done:
		case <-time.After(simShutdown):
			hung = append(hung, r.id)
		}
	}
	if len(hung) > 0 {
		// Their goroutines never end: synctest reports them when the bubble ends.
		err := fmt.Errorf("replicas %v did not return within %s of SIGTERM", hung, simShutdown)
		fmt.Fprintln(os.Stderr, s.report(err))
		return err
	}
	s.running.Wait()
	s.api.Wait()
	return s.check(start, faultsEnd, shutdown)
}

// simWrite is an accepted controller write with the Lease as the apiserver held it
// when it applied the write.
type simWrite struct {
	simapiserver.Write
	// holder is the Lease's holder then ("" when released or not created), rv its
	// resourceVersion.
	holder, rv string
}

// writes returns the accepted controller writes, in the order they were applied.
func (s *sim) writes() []simWrite {
	var out []simWrite
	s.api.Replay(nil, func(w simapiserver.Write, leases map[string]*coordinationv1.Lease) {
		sw := simWrite{Write: w}
		if l := leases[leaseName]; l != nil {
			sw.holder, sw.rv = ptr.Deref(l.Spec.HolderIdentity, ""), l.ResourceVersion
		}
		out = append(out, sw)
	})
	return out
}

// check judges the apiserver's logs.
func (s *sim) check(start, faultsEnd, shutdown time.Time) error {
	a := s.api
	writes, history := s.writes(), a.History()
	var errs []error
	// Safety: no write accepted from a replica the Lease did not name at that instant,
	// but one from a replica that released the Lease, applied before anyone took it:
	// there was still one writer. A write on its way at the release and applied after
	// a standby took the Lease fails the schedule: Fence.settle must have waited for it.
	for _, w := range writes {
		if w.holder == w.By {
			continue
		}
		err := fmt.Errorf("a controller write from %s (sent at %s) was accepted at %s, when the Lease (rv %s) named %q",
			w.By, a.Since(w.Sent), a.Since(w.At), w.rv, w.holder)
		if released := slices.ContainsFunc(history, func(l simapiserver.LeaseWrite) bool {
			return l.By == w.By && l.Record.HolderIdentity == "" && !l.At.Before(w.Sent) && !l.At.After(w.At)
		}); released {
			if w.holder == "" {
				continue
			}
			err = fmt.Errorf("%w, after %s had released it", err, w.By)
		}
		errs = append(errs, err)
		break
	}
	// Pause: each accepted write left its replica within the renew deadline of the
	// send time of an accepted Lease write naming that replica. That send time is the
	// record's renewTime, which the term takes at the instant the fence counts from
	// and the apiserver keeps to the microsecond (hence a microsecond of slack). The
	// fence counts only the writes that were also answered, so this is a bound it
	// must keep, not all it keeps.
	renewed := map[string][]time.Time{}
	for _, l := range history {
		if l.Record.HolderIdentity == l.By {
			renewed[l.By] = append(renewed[l.By], l.Record.RenewTime.Time)
		}
	}
	for _, times := range renewed {
		// Held calls are applied in the order they arrived, not the order they were sent.
		slices.SortFunc(times, time.Time.Compare)
	}
	for _, w := range writes {
		times := renewed[w.By]
		i, found := slices.BinarySearchFunc(times, w.Sent, time.Time.Compare)
		if !found {
			i-- // the latest renewal sent before the write
		}
		if i < 0 {
			errs = append(errs, fmt.Errorf("a controller write from %s (sent at %s) was accepted at %s, before any Lease write naming %s was sent",
				w.By, a.Since(w.Sent), a.Since(w.At), w.By))
			break
		}
		if deadline := times[i].Add(simTimings.RenewDeadline + time.Microsecond); !w.Sent.Before(deadline) {
			errs = append(errs, fmt.Errorf("a controller write from %s was sent at %s, %s after the renewal of the Lease it sent at %s, "+
				"beyond the renew deadline (%s) at which its fence must pause (accepted at %s)", w.By, a.Since(w.Sent),
				w.Sent.Sub(times[i]).Round(time.Millisecond), a.Since(times[i]), simTimings.RenewDeadline, a.Since(w.At)))
			break
		}
	}
	// Liveness: a holder writes within simSettle of the end of the faults, and keeps
	// writing until SIGTERM.
	settled := faultsEnd.Add(simSettle)
	var last time.Time
	for _, w := range writes {
		if w.At.Before(faultsEnd) || !w.At.Before(shutdown) {
			continue
		}
		if last.IsZero() && w.At.After(settled) {
			errs = append(errs, fmt.Errorf("no controller write accepted from the end of the faults at %s until %s", a.Since(faultsEnd), a.Since(w.At)))
			break
		}
		if !last.IsZero() && w.At.Sub(later(last, settled)) > simMaxWriteGap {
			errs = append(errs, fmt.Errorf("no controller write accepted from %s to %s, after the faults ended at %s", a.Since(last), a.Since(w.At), a.Since(faultsEnd)))
			break
		}
		last = w.At
	}
	if last.IsZero() || shutdown.Sub(later(last, settled)) > simMaxWriteGap {
		errs = append(errs, fmt.Errorf("no controller write accepted from %s until SIGTERM at %s (the faults ended at %s)",
			a.Since(later(last, faultsEnd)), a.Since(shutdown), a.Since(faultsEnd)))
	}
	// Liveness of each replica: a campaign that hangs stops calling the apiserver.
	calmFrom := faultsEnd.Add(simSettle / 2)
	for _, r := range s.replicas {
		if r.started.After(calmFrom) || r.stopped.Before(shutdown) {
			continue
		}
		previous := calmFrom
		for _, at := range append(slices.Clone(a.Calls(r.id)), shutdown) {
			if at.Before(calmFrom) || at.After(shutdown) {
				continue
			}
			if at.Sub(previous) > simMaxCallGap {
				errs = append(errs, fmt.Errorf("%s sent no Lease request from %s to %s, after the faults ended at %s: its campaign hangs",
					r.id, a.Since(previous), a.Since(at), a.Since(faultsEnd)))
				break
			}
			previous = at
		}
	}
	// SIGTERM: each replica returned in time and without error, and the Lease ends
	// released.
	for _, r := range s.replicas {
		if r.err != nil || r.returned.Sub(r.stopped) > simShutdown {
			errs = append(errs, fmt.Errorf("%s returned %v %s after SIGTERM", r.id, r.err, r.returned.Sub(r.stopped)))
		}
	}
	if holder := a.Holder(leaseName); holder != "" {
		errs = append(errs, fmt.Errorf("the Lease still names %q after every replica stopped", holder))
	}
	if s.schedule.sharedOnly {
		errs = append(errs, s.checkNoLeaderChange(start, shutdown)...)
	}
	return errors.Join(errs...)
}

// checkNoLeaderChange checks a schedule of stalls of the whole apiserver: one holder
// from its first acquisition until SIGTERM, no term lost, and writes again soon after
// each stall.
func (s *sim) checkNoLeaderChange(start, shutdown time.Time) []error {
	a := s.api
	writes, history := s.writes(), a.History()
	var errs []error
	var holder string
	for _, w := range history {
		if !w.At.Before(shutdown) {
			break
		}
		if holder == "" {
			holder = w.Record.HolderIdentity
		}
		if w.Record.HolderIdentity != holder {
			errs = append(errs, fmt.Errorf("a stall of the whole apiserver changed the leader: the Lease named %q at %s, then %q at %s (rv %d)",
				holder, a.Since(history[0].At), w.Record.HolderIdentity, a.Since(w.At), w.RV))
			break
		}
	}
	for _, r := range s.replicas {
		if r.losses > 0 {
			errs = append(errs, fmt.Errorf("%s lost %d terms in a schedule of stalls of the whole apiserver", r.id, r.losses))
		}
	}
	for _, f := range s.schedule.faults {
		end := start.Add(f.at + f.length)
		i := slices.IndexFunc(writes, func(w simWrite) bool { return !w.At.Before(end) })
		if i < 0 || writes[i].At.Sub(end) > simResume {
			errs = append(errs, fmt.Errorf("the holder did not write within %s of the stall's end at %s", simResume, a.Since(end)))
		}
	}
	return errs
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// report is err with the seed, the schedule and the end of the trace.
func (s *sim) report(err error) string {
	trace := s.api.Trace()
	lines := 120
	if *simSeed >= 0 {
		lines = len(trace)
	}
	return fmt.Sprintf("%v\n%v\ntrace (last %d of %d lines; -sim-seed=%d prints all):\n%s", err, s.schedule,
		min(lines, len(trace)), len(trace), s.schedule.seed, strings.Join(trace[max(0, len(trace)-lines):], "\n"))
}

// simStats add up what the schedules exercised, to show that they reach each path.
type simStats struct {
	writes, leaseWrites, transitions, losses, refused atomic.Int64
}

// runSim plays one schedule in a bubble of its own; it returns the checker's verdict,
// with the report.
func runSim(t *testing.T, schedule simSchedule, stats *simStats) error {
	var err error
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s := &sim{schedule: schedule, api: simapiserver.New(), ctx: ctx}
		if err = s.play(); err != nil {
			err = errors.New(s.report(err))
		}
		if *simSeed >= 0 {
			t.Log(s.report(errors.New("the trace of a schedule that passed")))
		}
		if stats != nil {
			history := s.api.History()
			stats.writes.Add(int64(len(s.api.Writes())))
			stats.leaseWrites.Add(int64(len(history)))
			for i := 1; i < len(history); i++ {
				if history[i].Record.HolderIdentity != history[i-1].Record.HolderIdentity {
					stats.transitions.Add(1)
				}
			}
			for _, r := range s.replicas {
				stats.losses.Add(int64(r.losses))
				stats.refused.Add(r.cfg.Fence.RefusedWrites())
			}
		}
	})
	return err
}

// simSeedCount is the number of schedules a run plays.
func simSeedCount(t *testing.T) int {
	seeds := simDefaultSeeds
	if env, set := os.LookupEnv("LEADERELECTION_SIM_SEEDS"); set {
		v, err := strconv.Atoi(env)
		if err != nil || v < 1 {
			// A run of no schedules would pass having checked nothing.
			t.Fatalf("LEADERELECTION_SIM_SEEDS=%q: want a number of schedules of at least 1 (unset: %d)", env, simDefaultSeeds)
		}
		seeds = v
	}
	if *simSeeds > 0 {
		seeds = *simSeeds
	}
	return seeds
}

// quietKlog silences klog's global output (the informers of the watching standbys log
// there) for the test; the product's own logs go to each schedule's trace.
func quietKlog(t *testing.T) {
	var flags flag.FlagSet
	klog.InitFlags(&flags)
	_ = flags.Set("logtostderr", "false")
	_ = flags.Set("alsologtostderr", "false")
	klog.SetOutput(io.Discard)
	t.Cleanup(func() {
		_ = flags.Set("logtostderr", "true")
		klog.SetOutput(os.Stderr)
	})
}

// playSchedules plays the schedules of seeds [0, seeds) with mutation m, one worker
// per CPU, and returns the first failure (nil if none); with stopAtFirst the others
// stop there.
func playSchedules(t *testing.T, seeds int, m mutation, stats *simStats) error {
	var (
		next     atomic.Int64
		mu       sync.Mutex
		failures = map[int64]error{}
		workers  sync.WaitGroup
	)
	for range runtime.GOMAXPROCS(0) {
		workers.Go(func() {
			for seed := next.Add(1) - 1; seed < int64(seeds); seed = next.Add(1) - 1 {
				if err := runSim(t, newSimSchedule(seed, m), stats); err != nil {
					mu.Lock()
					failures[seed] = err
					mu.Unlock()
					next.Store(int64(seeds)) // stop the others
					return
				}
			}
		})
	}
	workers.Wait()
	// The lowest failing seed, so that a failure names the same seed run after run.
	var first int64 = -1
	for seed := range failures {
		if first < 0 || seed < first {
			first = seed
		}
	}
	if first < 0 {
		return nil
	}
	return failures[first]
}

func TestSimulatedElectionAcceptsWritesOnlyFromTheLeaseHolder(t *testing.T) {
	quietKlog(t)
	if *simSeed >= 0 {
		if err := runSim(t, newSimSchedule(*simSeed, noMutation), nil); err != nil {
			t.Fatal(err)
		}
		return
	}
	seeds := simSeedCount(t)
	start := time.Now()
	stats := &simStats{}
	if err := playSchedules(t, seeds, noMutation, stats); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d schedules in %s: %d controller writes and %d Lease writes accepted, %d changes of holder, %d terms lost, %d writes fenced",
		seeds, time.Since(start).Round(time.Millisecond), stats.writes.Load(), stats.leaseWrites.Load(),
		stats.transitions.Load(), stats.losses.Load(), stats.refused.Load())
	if seeds >= 20 && (stats.transitions.Load() == 0 || stats.losses.Load() == 0 || stats.refused.Load() == 0) {
		t.Error("the schedules no longer reach takeovers, lost terms and fenced writes: the simulator checks too little")
	}
}

// Each planted bug must fail one of the schedules a normal run plays.
func TestSimulationCatchesEachPlantedBug(t *testing.T) {
	quietKlog(t)
	seeds := simSeedCount(t)
	for _, m := range []struct {
		mutation mutation
		name     string
	}{
		{mutationNoPause, "the fence is not closed at the renew deadline"},
		{mutationTakeAtObservation, "a standby takes the Lease when it sees it, not at expiry"},
		{mutationWaitOnFailedAcquisition, "a campaign waits on an acquisition Update that failed"},
	} {
		start := time.Now()
		err := playSchedules(t, seeds, m.mutation, nil)
		if err == nil {
			t.Errorf("%s: not caught by any of %d schedules", m.name, seeds)
			continue
		}
		// The report's first line is a finding; the schedule's line starts with its seed.
		lines := strings.Split(err.Error(), "\n")
		seed := lines[slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "seed ") })]
		t.Logf("%s: caught in %s by %s: %s", m.name, time.Since(start).Round(time.Millisecond), strings.SplitN(seed, ",", 2)[0], lines[0])
	}
}
