package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
)

// simAPIServer is the apiserver of the simulation (sim_test.go): it keeps the one Lease
// with resourceVersions and refuses an update on a stale one with a conflict, as the
// real apiserver does, accepts every controller write (it has no fence of its own: the
// checker judges what it accepted), and logs both with the time they were applied.
//
// Every call travels: it leaves the replica over a link (a stalled link holds it until
// the link recovers, or drops it once the client gave up), arrives after a latency,
// is applied at arrival (or, while the whole apiserver is stalled, at the end of the
// stall, in order of arrival), and its answer travels back. A call the client gave up
// on (its context ended, or the Lease client's request timeout passed) is still
// applied if it was on its way: the client cannot know, which is how writes of
// unknown outcome arise. A Lease write may also be applied with its answer lost.
//
// It runs inside a synctest bubble, so every latency and stall is on the bubble's
// fake clock, and so are the product's own timeouts.
type simAPIServer struct {
	// requestTimeout is the Lease clients' timeout (NewClient's).
	requestTimeout time.Duration
	start          time.Time

	mu sync.Mutex
	rv int64
	// lease is the stored Lease; nil until created.
	lease *coordinationv1.Lease
	// leaseWrites is the Lease's history: every accepted create or update.
	leaseWrites []simLeaseWrite
	// writes are the accepted controller writes.
	writes []simWrite
	// calls holds, per replica, when each of its Lease calls was sent.
	calls map[string][]time.Time
	// stalled is set while the whole apiserver answers nothing; held are the calls
	// that arrived meanwhile, applied in order when it recovers.
	stalled bool
	held    []*simCall
	// lostAnswers is the probability that an applied Lease write's answer is lost;
	// slowCalls that a Lease call's way takes 0.2 to 2.5s, often beyond the request
	// timeout.
	lostAnswers, slowCalls float64
	watchers               []*simWatcher
	trace                  []string
	// inFlight counts the calls, answers and watch deliveries still travelling, so
	// that the bubble can wait for them to end.
	inFlight sync.WaitGroup
}

// simLeaseWrite is one accepted Lease write.
type simLeaseWrite struct {
	at     time.Time
	by     string
	rv     int64
	record resourcelock.LeaderElectionRecord
}

// simWrite is one accepted controller write.
type simWrite struct {
	at, sent time.Time
	by       string
	// holder is the Lease's holder when the write was applied ("" when released or
	// not created), and rv its resourceVersion.
	holder string
	rv     int64
}

func newSimAPIServer(t Timings) *simAPIServer {
	return &simAPIServer{requestTimeout: t.RequestTimeout(), start: time.Now(), calls: map[string][]time.Time{}}
}

// tracef adds a line to the trace; the caller holds no lock.
func (a *simAPIServer) tracef(format string, args ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tracefLocked(format, args...)
}

func (a *simAPIServer) tracefLocked(format string, args ...any) {
	a.trace = append(a.trace, fmt.Sprintf("%9.3fs ", time.Since(a.start).Seconds())+fmt.Sprintf(format, args...))
}

// since is t as seconds since the start, for the trace and failures.
func (a *simAPIServer) since(t time.Time) string {
	return fmt.Sprintf("%.3fs", t.Sub(a.start).Seconds())
}

// holder returns the Lease's current holder, "" if none.
func (a *simAPIServer) holder() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lease == nil {
		return ""
	}
	return ptr.Deref(a.lease.Spec.HolderIdentity, "")
}

// setStalled stalls the whole apiserver, or ends its stall: the calls that arrived
// meanwhile are applied now, in the order they arrived.
func (a *simAPIServer) setStalled(stalled bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stalled = stalled
	if stalled {
		return
	}
	for _, c := range a.held {
		c.result, c.err = c.apply()
		close(c.applied)
	}
	a.held = nil
}

func (a *simAPIServer) setLostAnswers(p float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lostAnswers = p
}

func (a *simAPIServer) setSlowCalls(p float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.slowCalls = p
}

// simStall is the state of one replica's connection: while it is stalled nothing
// leaves or reaches the replica over it.
type simStall struct {
	mu sync.Mutex
	// recovered is closed when the stall ends; nil while not stalled.
	recovered chan struct{}
}

func (s *simStall) set(stalled bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case stalled && s.recovered == nil:
		s.recovered = make(chan struct{})
	case !stalled && s.recovered != nil:
		close(s.recovered)
		s.recovered = nil
	}
}

// wait returns once the connection is not stalled (true), or once gaveUp is closed
// while it is (false).
func (s *simStall) wait(gaveUp <-chan struct{}) bool {
	s.mu.Lock()
	recovered := s.recovered
	s.mu.Unlock()
	if recovered == nil {
		return true
	}
	select {
	case <-recovered:
		return true
	case <-gaveUp:
		return false
	}
}

// simLink is one client of a replica: its connection's stall and its own source of
// latencies, so that the latencies one client draws do not depend on another's.
type simLink struct {
	replica string
	stall   *simStall
	mu      sync.Mutex
	rng     *rand.Rand
	// A way takes 2 to 32ms, or with probability slow (the apiserver's slowCalls when
	// negative) between slowFrom and slowTo.
	slow             float64
	slowFrom, slowTo time.Duration
}

// draw returns the latencies of a call's way there and back, and a number in [0, 1)
// that decides whether its answer is lost.
func (l *simLink) draw(slowCalls float64) (out, back time.Duration, r float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	slow := l.slow
	if slow < 0 {
		slow = slowCalls
	}
	way := func() time.Duration {
		if l.rng.Float64() < slow {
			return l.slowFrom + time.Duration(l.rng.Int64N(int64(l.slowTo-l.slowFrom)))
		}
		return 2*time.Millisecond + time.Duration(l.rng.Int64N(int64(30*time.Millisecond)))
	}
	return way(), way(), l.rng.Float64()
}

// simCall is one call in flight.
type simCall struct {
	apply func() (any, error)
	// applied is closed once a call held by a stalled apiserver was applied.
	applied chan struct{}
	result  any
	err     error
}

type simAnswer struct {
	result any
	err    error
}

// errSimTimeout is what a Lease client returns when its request timeout passed, as
// client-go's does when the http.Client's Timeout fires.
var errSimTimeout = errors.New("context deadline exceeded (Client.Timeout exceeded while awaiting headers)")

// do sends one call over link and waits for its answer, until ctx ends or the timeout
// (0: none) passes. write says that a lost answer is possible.
func (a *simAPIServer) do(ctx context.Context, link *simLink, what string, timeout time.Duration, write bool, apply func() (any, error)) (any, error) {
	a.mu.Lock()
	out, back, r := link.draw(a.slowCalls)
	lost := write && r < a.lostAnswers
	if what != "controller write" {
		a.calls[link.replica] = append(a.calls[link.replica], time.Now())
	}
	a.mu.Unlock()
	answer := make(chan simAnswer, 1)
	gaveUp := make(chan struct{})
	a.inFlight.Go(func() { a.fly(link, what, out, back, lost, apply, answer, gaveUp) })
	var timedOut <-chan time.Time
	if timeout > 0 {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		timedOut = timer.C
	}
	select {
	case ans := <-answer:
		return ans.result, ans.err
	case <-ctx.Done():
		close(gaveUp)
		return nil, ctx.Err()
	case <-timedOut:
		close(gaveUp)
		return nil, errSimTimeout
	}
}

// fly carries one call to the apiserver and its answer back.
func (a *simAPIServer) fly(link *simLink, what string, out, back time.Duration, lost bool,
	apply func() (any, error), answer chan<- simAnswer, gaveUp <-chan struct{}) {
	if !link.stall.wait(gaveUp) {
		a.tracef("%s: %s dropped: its connection stalled until the client gave up", link.replica, what)
		return
	}
	time.Sleep(out)
	call := &simCall{apply: apply, applied: make(chan struct{})}
	a.mu.Lock()
	if a.stalled {
		a.held = append(a.held, call)
		a.mu.Unlock()
		<-call.applied
	} else {
		call.result, call.err = apply()
		a.mu.Unlock()
	}
	if lost {
		a.tracef("%s: %s applied, its answer lost", link.replica, what)
		return
	}
	time.Sleep(back)
	if !link.stall.wait(gaveUp) {
		return
	}
	answer <- simAnswer{call.result, call.err}
}

// The Lease store. Each method runs with a.mu held, when the call is applied.

var simLeaseResource = coordinationv1.Resource("leases")

func (a *simAPIServer) getLease(name string) (any, error) {
	if a.lease == nil || a.lease.Name != name {
		return nil, apierrors.NewNotFound(simLeaseResource, name)
	}
	return a.lease.DeepCopy(), nil
}

func (a *simAPIServer) createLease(by string, lease *coordinationv1.Lease) (any, error) {
	if a.lease != nil {
		a.tracefLocked("%s: create refused: already exists", by)
		return nil, apierrors.NewAlreadyExists(simLeaseResource, lease.Name)
	}
	return a.store(by, "created", lease), nil
}

func (a *simAPIServer) updateLease(by string, lease *coordinationv1.Lease) (any, error) {
	if a.lease == nil {
		return nil, apierrors.NewNotFound(simLeaseResource, lease.Name)
	}
	if lease.ResourceVersion != a.lease.ResourceVersion {
		a.tracefLocked("%s: update (holder %q) refused: resourceVersion %s, stored %s", by,
			ptr.Deref(lease.Spec.HolderIdentity, ""), lease.ResourceVersion, a.lease.ResourceVersion)
		return nil, apierrors.NewConflict(simLeaseResource, lease.Name,
			errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	}
	return a.store(by, "updated", lease), nil
}

// store keeps lease as the apiserver does (a new resourceVersion, times to the
// microsecond), logs it in the history and tells the watchers.
func (a *simAPIServer) store(by, verb string, lease *coordinationv1.Lease) *coordinationv1.Lease {
	a.rv++
	lease = lease.DeepCopy()
	lease.ResourceVersion = strconv.FormatInt(a.rv, 10)
	for _, t := range []*metav1.MicroTime{lease.Spec.AcquireTime, lease.Spec.RenewTime} {
		if t != nil {
			t.Time = t.Truncate(time.Microsecond)
		}
	}
	a.lease = lease
	record := *resourcelock.LeaseSpecToLeaderElectionRecord(&lease.Spec)
	a.leaseWrites = append(a.leaseWrites, simLeaseWrite{at: time.Now(), by: by, rv: a.rv, record: record})
	a.tracefLocked("%s: lease %s rv %d: holder %q, transitions %d, renewed %s", by, verb, a.rv,
		record.HolderIdentity, record.LeaderTransitions, a.since(record.RenewTime.Time))
	for _, w := range a.watchers {
		w.send(watch.Event{Type: watch.Modified, Object: lease.DeepCopy()})
	}
	return lease.DeepCopy()
}

func (a *simAPIServer) listLeases() (any, error) {
	list := &coordinationv1.LeaseList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatInt(a.rv, 10)}}
	if a.lease != nil {
		list.Items = append(list.Items, *a.lease.DeepCopy())
	}
	return list, nil
}

// acceptWrite logs a controller write, with the Lease as it is at this instant.
func (a *simAPIServer) acceptWrite(by string, sent time.Time) (any, error) {
	w := simWrite{at: time.Now(), sent: sent, by: by}
	if a.lease != nil {
		w.holder, w.rv = ptr.Deref(a.lease.Spec.HolderIdentity, ""), a.rv
	}
	// One line per run of writes by the same writer under the same holder keeps the
	// trace readable.
	if n := len(a.writes); n == 0 || a.writes[n-1].by != by || a.writes[n-1].holder != w.holder {
		a.tracefLocked("%s: controller writes accepted from here on (sent at %s), lease holder %q", by, a.since(sent), w.holder)
	}
	a.writes = append(a.writes, w)
	return nil, nil
}

// simClientset is a replica's Lease client: a kubernetes.Interface whose only working
// part is coordination/v1 Leases, served by the simulated apiserver with the request
// timeout NewClient sets. Any other call panics: the election makes none.
type simClientset struct {
	kubernetes.Interface
	leases *simLeases
}

func (c simClientset) CoordinationV1() coordinationv1client.CoordinationV1Interface {
	return simCoordination{leases: c.leases}
}

type simCoordination struct {
	coordinationv1client.CoordinationV1Interface
	leases *simLeases
}

func (c simCoordination) Leases(string) coordinationv1client.LeaseInterface { return c.leases }

// simLeases serves one replica's Lease calls over its link.
type simLeases struct {
	coordinationv1client.LeaseInterface
	api     *simAPIServer
	link    *simLink
	timeout time.Duration
}

// Leases makes simLeases the LeasesGetter of a standby's watch.
func (l *simLeases) Leases(string) coordinationv1client.LeaseInterface { return l }

// IsWatchListSemanticsUnSupported tells the informer to list, then watch.
func (l *simLeases) IsWatchListSemanticsUnSupported() bool { return true }

func (l *simLeases) Get(ctx context.Context, name string, _ metav1.GetOptions) (*coordinationv1.Lease, error) {
	out, err := l.api.do(ctx, l.link, "lease get", l.timeout, false, func() (any, error) { return l.api.getLease(name) })
	if err != nil {
		return nil, err
	}
	return out.(*coordinationv1.Lease), nil
}

func (l *simLeases) Create(ctx context.Context, lease *coordinationv1.Lease, _ metav1.CreateOptions) (*coordinationv1.Lease, error) {
	// The caller may change its object once the call returned; the call keeps its own.
	lease = lease.DeepCopy()
	out, err := l.api.do(ctx, l.link, "lease create", l.timeout, true, func() (any, error) { return l.api.createLease(l.link.replica, lease) })
	if err != nil {
		return nil, err
	}
	return out.(*coordinationv1.Lease), nil
}

func (l *simLeases) Update(ctx context.Context, lease *coordinationv1.Lease, _ metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	lease = lease.DeepCopy()
	what := fmt.Sprintf("lease update (holder %q)", ptr.Deref(lease.Spec.HolderIdentity, ""))
	out, err := l.api.do(ctx, l.link, what, l.timeout, true, func() (any, error) { return l.api.updateLease(l.link.replica, lease) })
	if err != nil {
		return nil, err
	}
	return out.(*coordinationv1.Lease), nil
}

func (l *simLeases) List(ctx context.Context, _ metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	out, err := l.api.do(ctx, l.link, "lease list", l.timeout, false, l.api.listLeases)
	if err != nil {
		return nil, err
	}
	return out.(*coordinationv1.LeaseList), nil
}

// Watch streams the Lease's changes after opts.ResourceVersion, each delivered after
// the link's latency, in order, and held while the link or the apiserver is stalled.
func (l *simLeases) Watch(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w := &simWatcher{api: l.api, link: l.link, result: make(chan watch.Event), stop: make(chan struct{}), more: make(chan struct{}, 1)}
	from, _ := strconv.ParseInt(opts.ResourceVersion, 10, 64)
	l.api.mu.Lock()
	if from > 0 && from < l.api.rv && l.api.lease != nil {
		// Only the latest state is kept; a watcher that is behind gets it at once,
		// which is all a standby needs.
		w.send(watch.Event{Type: watch.Modified, Object: l.api.lease.DeepCopy()})
	}
	l.api.watchers = append(l.api.watchers, w)
	l.api.mu.Unlock()
	l.api.inFlight.Go(w.run)
	return w, nil
}

// simWatcher is one watch on the Lease.
type simWatcher struct {
	api    *simAPIServer
	link   *simLink
	result chan watch.Event
	stop   chan struct{}
	once   sync.Once
	// more is signalled when queue grew; queue is guarded by api.mu.
	more  chan struct{}
	queue []watch.Event
}

// send queues e; the caller holds api.mu.
func (w *simWatcher) send(e watch.Event) {
	w.queue = append(w.queue, e)
	select {
	case w.more <- struct{}{}:
	default:
	}
}

func (w *simWatcher) ResultChan() <-chan watch.Event { return w.result }

func (w *simWatcher) Stop() { w.once.Do(func() { close(w.stop) }) }

func (w *simWatcher) run() {
	defer close(w.result)
	defer func() {
		w.api.mu.Lock()
		defer w.api.mu.Unlock()
		for i, other := range w.api.watchers {
			if other == w {
				w.api.watchers = append(w.api.watchers[:i], w.api.watchers[i+1:]...)
				break
			}
		}
	}()
	for {
		w.api.mu.Lock()
		var next *watch.Event
		if len(w.queue) > 0 {
			next, w.queue = &w.queue[0], w.queue[1:]
		}
		w.api.mu.Unlock()
		if next == nil {
			select {
			case <-w.more:
				continue
			case <-w.stop:
				return
			}
		}
		w.api.mu.Lock()
		latency, _, _ := w.link.draw(w.api.slowCalls)
		w.api.mu.Unlock()
		select {
		case <-time.After(latency):
		case <-w.stop:
			return
		}
		if !w.link.stall.wait(w.stop) {
			return
		}
		select {
		case w.result <- *next:
		case <-w.stop:
			return
		}
	}
}

// simControllerTransport is the apiserver's end of a replica's controller client: the
// replica's fenced transport (Fence.Transport) wraps it, as the product wraps every
// controller's client. Each request is a controller write; it is applied as it
// arrives, whatever the fence, and answered 200.
type simControllerTransport struct {
	api  *simAPIServer
	link *simLink
}

func (t *simControllerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
	sent := time.Now()
	if _, err := t.api.do(req.Context(), t.link, "controller write", 0, false, func() (any, error) {
		return t.api.acceptWrite(t.link.replica, sent)
	}); err != nil {
		return nil, err
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("{}")), Request: req}, nil
}
