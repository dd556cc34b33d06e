// Package simapiserver is the apiserver of the election simulators
// (leaderelection/sim_test.go and sharding/replicasim_test.go): it keeps the Leases of
// one namespace with resourceVersions and refuses a write on a stale one with a
// conflict, as the real apiserver does, serves lists and watches by label and by name,
// accepts every controller write (it has no fence of its own: the checkers judge what
// it accepted), and logs both with the instant they were applied.
//
// Every call travels: it leaves the replica over a Link (a stalled link holds it until
// the link recovers, or drops it once the client gave up), arrives after a latency,
// is applied at arrival (or, while the whole apiserver is stalled, at the end of the
// stall, in order of arrival), and its answer travels back. A call the client gave up
// on (its context ended, or the Lease client's request timeout passed) is still
// applied if it was on its way: the client cannot know, which is how writes of
// unknown outcome arise. A Lease write may also be applied with its answer lost.
//
// It is meant to run inside a synctest bubble, so that every latency and stall is on
// the bubble's fake clock, and so are the product's own timeouts.
package simapiserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
)

// Server is the simulated apiserver.
type Server struct {
	start time.Time

	mu sync.Mutex
	rv int64
	// leases are the stored Leases, by name.
	leases map[string]*coordinationv1.Lease
	// history is every accepted Lease create, update and delete, in order.
	history []LeaseWrite
	// writes are the accepted controller writes.
	writes []Write
	// calls holds, per replica, when each of its Lease calls was sent.
	calls map[string][]time.Time
	// stalled is set while the whole apiserver answers nothing; held are the calls
	// that arrived meanwhile, applied in order when it recovers.
	stalled bool
	held    []*call
	// lostAnswers is the probability that an applied Lease write's answer is lost;
	// slowCalls that a Lease call takes a link's slow way.
	lostAnswers, slowCalls float64
	watchers               []*watcher
	trace                  []string
	// inFlight counts the calls, answers and watch deliveries still travelling, so
	// that a simulation can wait for them to end.
	inFlight sync.WaitGroup
}

// LeaseWrite is one accepted Lease write.
type LeaseWrite struct {
	At time.Time
	// By is the link's replica, or "operator" for Edit and Delete.
	By, Name string
	// Verb is "created", "updated" or "deleted".
	Verb string
	RV   int64
	// Lease is the Lease as stored; for a delete, as it was last stored, at the
	// delete's resourceVersion.
	Lease *coordinationv1.Lease
	// Record is Lease's election record (empty for a delete).
	Record resourcelock.LeaderElectionRecord
}

// Write is one accepted controller write.
type Write struct {
	At, Sent time.Time
	By       string
	// Namespace is the request path's namespace ("" for a cluster-scoped write).
	Namespace string
	// Leases is how many Lease writes had been accepted when this one was applied: the
	// Leases were then as History()[:Leases] left them (see Replay).
	Leases int
}

// Operator is the writer of Edit and Delete: a person with kubectl.
const Operator = "operator"

// New returns an empty apiserver whose clock starts now.
func New() *Server {
	return &Server{start: time.Now(), leases: map[string]*coordinationv1.Lease{}, calls: map[string][]time.Time{}}
}

// Tracef adds a line to the trace.
func (a *Server) Tracef(format string, args ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tracefLocked(format, args...)
}

func (a *Server) tracefLocked(format string, args ...any) {
	a.trace = append(a.trace, fmt.Sprintf("%9.3fs ", time.Since(a.start).Seconds())+fmt.Sprintf(format, args...))
}

// Trace returns the trace so far.
func (a *Server) Trace() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.trace...)
}

// Since is t as seconds since the start, for traces and failures.
func (a *Server) Since(t time.Time) string {
	return fmt.Sprintf("%.3fs", t.Sub(a.start).Seconds())
}

// Lease returns a copy of the stored Lease name, nil if there is none.
func (a *Server) Lease(name string) *coordinationv1.Lease {
	a.mu.Lock()
	defer a.mu.Unlock()
	if l := a.leases[name]; l != nil {
		return l.DeepCopy()
	}
	return nil
}

// Leases returns copies of the stored Leases, by name.
func (a *Server) Leases() []*coordinationv1.Lease {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sortedLocked()
}

func (a *Server) sortedLocked() []*coordinationv1.Lease {
	out := make([]*coordinationv1.Lease, 0, len(a.leases))
	for _, l := range a.leases {
		out = append(out, l.DeepCopy())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Holder returns the holder of Lease name, "" if it is released or missing.
func (a *Server) Holder(name string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if l := a.leases[name]; l != nil {
		return ptr.Deref(l.Spec.HolderIdentity, "")
	}
	return ""
}

// History returns the accepted Lease writes so far.
func (a *Server) History() []LeaseWrite {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]LeaseWrite(nil), a.history...)
}

// Writes returns the accepted controller writes so far.
func (a *Server) Writes() []Write {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Write(nil), a.writes...)
}

// Calls returns when each of replica's Lease calls was sent.
func (a *Server) Calls(replica string) []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]time.Time(nil), a.calls[replica]...)
}

// Wait waits for every call, answer and watch delivery still travelling.
func (a *Server) Wait() { a.inFlight.Wait() }

// Replay walks the apiserver's log in the order it was applied: it calls lease (if
// not nil) for every accepted Lease write and write for every accepted controller
// write, with the Leases as they were stored at that instant (by name; write must not
// keep or change the map).
func (a *Server) Replay(lease func(LeaseWrite), write func(w Write, leases map[string]*coordinationv1.Lease)) {
	history, writes := a.History(), a.Writes()
	state := map[string]*coordinationv1.Lease{}
	applied := 0
	apply := func(upTo int) {
		for ; applied < upTo; applied++ {
			h := history[applied]
			if h.Verb == "deleted" {
				delete(state, h.Name)
			} else {
				state[h.Name] = h.Lease
			}
			if lease != nil {
				lease(h)
			}
		}
	}
	for _, w := range writes {
		apply(w.Leases)
		write(w, state)
	}
	apply(len(history))
}

// Stall stalls the whole apiserver, or ends its stall: the calls that arrived
// meanwhile are applied then, in the order they arrived.
func (a *Server) Stall(stalled bool) {
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

// SetLostAnswers sets the probability that an applied Lease write's answer is lost.
func (a *Server) SetLostAnswers(p float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lostAnswers = p
}

// SetSlowCalls sets the probability that a Lease call takes its link's slow way (for
// the links whose Slow is negative).
func (a *Server) SetSlowCalls(p float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.slowCalls = p
}

// Edit changes the stored Lease name as an operator would with kubectl edit; it
// reports false if there is none.
func (a *Server) Edit(name string, change func(*coordinationv1.Lease)) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	l := a.leases[name]
	if l == nil {
		return false
	}
	l = l.DeepCopy()
	change(l)
	a.store(Operator, "updated", l)
	return true
}

// Delete deletes the stored Leases that match, as an operator would with kubectl
// delete lease, and returns their names.
func (a *Server) Delete(match func(*coordinationv1.Lease) bool) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var names []string
	for _, l := range a.sortedLocked() {
		if match(l) {
			a.remove(Operator, l.Name)
			names = append(names, l.Name)
		}
	}
	return names
}

// Stall is the state of one replica's connection: while it is stalled nothing
// leaves or reaches the replica over it.
type Stall struct {
	mu sync.Mutex
	// recovered is closed when the stall ends; nil while not stalled.
	recovered chan struct{}
}

// Set stalls the connection, or ends its stall.
func (s *Stall) Set(stalled bool) {
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
func (s *Stall) wait(gaveUp <-chan struct{}) bool {
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

// Link is one client of a replica: its connection's stall and its own source of
// latencies, so that the latencies one client draws do not depend on another's.
type Link struct {
	Replica string
	Stall   *Stall
	// WatchStall, when set, also holds the events of the link's watches while it is
	// stalled: a replica whose view of the Leases goes stale while its calls go through.
	WatchStall *Stall
	// A way takes 2 to 32ms, or with probability Slow (the apiserver's slow calls
	// when negative) between SlowFrom and SlowTo.
	Slow             float64
	SlowFrom, SlowTo time.Duration
	mu               sync.Mutex
	rng              *rand.Rand
}

// NewLink returns replica's link over stall, drawing its latencies from a source
// seeded by seed and stream.
func NewLink(replica string, stall *Stall, seed, stream uint64, slow float64, slowFrom, slowTo time.Duration) *Link {
	return &Link{Replica: replica, Stall: stall, Slow: slow, SlowFrom: slowFrom, SlowTo: slowTo, rng: rand.New(rand.NewPCG(seed, stream))}
}

// draw returns the latencies of a call's way there and back, and a number in [0, 1)
// that decides whether its answer is lost.
func (l *Link) draw(slowCalls float64) (out, back time.Duration, r float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	slow := l.Slow
	if slow < 0 {
		slow = slowCalls
	}
	way := func() time.Duration {
		if l.rng.Float64() < slow {
			return l.SlowFrom + time.Duration(l.rng.Int64N(int64(l.SlowTo-l.SlowFrom)))
		}
		return 2*time.Millisecond + time.Duration(l.rng.Int64N(int64(30*time.Millisecond)))
	}
	return way(), way(), l.rng.Float64()
}

// call is one call in flight.
type call struct {
	apply func() (any, error)
	// applied is closed once a call held by a stalled apiserver was applied.
	applied chan struct{}
	result  any
	err     error
}

type answer struct {
	result any
	err    error
}

// ErrTimeout is what a Lease client returns when its request timeout passed, as
// client-go's does when the http.Client's Timeout fires.
var ErrTimeout = errors.New("context deadline exceeded (Client.Timeout exceeded while awaiting headers)")

// do sends one call over link and waits for its answer, until ctx ends or the timeout
// (0: none) passes. write says that a lost answer is possible.
func (a *Server) do(ctx context.Context, link *Link, what string, timeout time.Duration, write bool, apply func() (any, error)) (any, error) {
	a.mu.Lock()
	out, back, r := link.draw(a.slowCalls)
	lost := write && r < a.lostAnswers
	if what != "controller write" {
		a.calls[link.Replica] = append(a.calls[link.Replica], time.Now())
	}
	a.mu.Unlock()
	answers := make(chan answer, 1)
	gaveUp := make(chan struct{})
	a.inFlight.Go(func() { a.fly(link, what, out, back, lost, apply, answers, gaveUp) })
	var timedOut <-chan time.Time
	if timeout > 0 {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		timedOut = timer.C
	}
	select {
	case ans := <-answers:
		return ans.result, ans.err
	case <-ctx.Done():
		close(gaveUp)
		return nil, ctx.Err()
	case <-timedOut:
		close(gaveUp)
		return nil, ErrTimeout
	}
}

// fly carries one call to the apiserver and its answer back.
func (a *Server) fly(link *Link, what string, out, back time.Duration, lost bool,
	apply func() (any, error), answers chan<- answer, gaveUp <-chan struct{}) {
	if !link.Stall.wait(gaveUp) {
		a.Tracef("%s: %s dropped: its connection stalled until the client gave up", link.Replica, what)
		return
	}
	time.Sleep(out)
	c := &call{apply: apply, applied: make(chan struct{})}
	a.mu.Lock()
	if a.stalled {
		a.held = append(a.held, c)
		a.mu.Unlock()
		<-c.applied
	} else {
		c.result, c.err = apply()
		a.mu.Unlock()
	}
	if lost {
		a.Tracef("%s: %s applied, its answer lost", link.Replica, what)
		return
	}
	time.Sleep(back)
	if !link.Stall.wait(gaveUp) {
		return
	}
	answers <- answer{c.result, c.err}
}

// The Lease store. Each method runs with a.mu held, when the call is applied.

var leaseResource = coordinationv1.Resource("leases")

func (a *Server) getLease(name string) (any, error) {
	l := a.leases[name]
	if l == nil {
		return nil, apierrors.NewNotFound(leaseResource, name)
	}
	return l.DeepCopy(), nil
}

func (a *Server) createLease(by string, lease *coordinationv1.Lease) (any, error) {
	if a.leases[lease.Name] != nil {
		a.tracefLocked("%s: create of %s refused: already exists", by, lease.Name)
		return nil, apierrors.NewAlreadyExists(leaseResource, lease.Name)
	}
	return a.store(by, "created", lease), nil
}

func (a *Server) updateLease(by string, lease *coordinationv1.Lease) (any, error) {
	stored := a.leases[lease.Name]
	if stored == nil {
		return nil, apierrors.NewNotFound(leaseResource, lease.Name)
	}
	if lease.ResourceVersion != stored.ResourceVersion {
		a.tracefLocked("%s: update of %s (holder %q) refused: resourceVersion %s, stored %s", by, lease.Name,
			ptr.Deref(lease.Spec.HolderIdentity, ""), lease.ResourceVersion, stored.ResourceVersion)
		return nil, conflict(lease.Name)
	}
	return a.store(by, "updated", lease), nil
}

func (a *Server) deleteLease(by, name string, opts metav1.DeleteOptions) (any, error) {
	stored := a.leases[name]
	if stored == nil {
		return nil, apierrors.NewNotFound(leaseResource, name)
	}
	if p := opts.Preconditions; p != nil && p.ResourceVersion != nil && *p.ResourceVersion != stored.ResourceVersion {
		a.tracefLocked("%s: delete of %s refused: resourceVersion %s, stored %s", by, name, *p.ResourceVersion, stored.ResourceVersion)
		return nil, conflict(name)
	}
	a.remove(by, name)
	return nil, nil
}

func conflict(name string) error {
	return apierrors.NewConflict(leaseResource, name,
		errors.New("the object has been modified; please apply your changes to the latest version and try again"))
}

// store keeps lease as the apiserver does (a new resourceVersion, times to the
// microsecond), logs it in the history and tells the watchers.
func (a *Server) store(by, verb string, lease *coordinationv1.Lease) *coordinationv1.Lease {
	a.rv++
	lease = lease.DeepCopy()
	lease.ResourceVersion = strconv.FormatInt(a.rv, 10)
	for _, t := range []*metav1.MicroTime{lease.Spec.AcquireTime, lease.Spec.RenewTime} {
		if t != nil {
			t.Time = t.Truncate(time.Microsecond)
		}
	}
	a.leases[lease.Name] = lease
	record := *resourcelock.LeaseSpecToLeaderElectionRecord(&lease.Spec)
	a.history = append(a.history, LeaseWrite{At: time.Now(), By: by, Name: lease.Name, Verb: verb, RV: a.rv, Lease: lease, Record: record})
	a.tracefLocked("%s: %s %s rv %d: holder %q, transitions %d, renewed %s%s", by, lease.Name, verb, a.rv,
		record.HolderIdentity, record.LeaderTransitions, a.Since(record.RenewTime.Time), labelsOf(lease))
	for _, w := range a.watchers {
		w.changed(lease, false)
	}
	return lease.DeepCopy()
}

// remove deletes Lease name, logs it and tells the watchers.
func (a *Server) remove(by, name string) {
	a.rv++
	last := a.leases[name].DeepCopy()
	last.ResourceVersion = strconv.FormatInt(a.rv, 10)
	delete(a.leases, name)
	a.history = append(a.history, LeaseWrite{At: time.Now(), By: by, Name: name, Verb: "deleted", RV: a.rv, Lease: last})
	a.tracefLocked("%s: %s deleted rv %d", by, name, a.rv)
	for _, w := range a.watchers {
		w.changed(last, true)
	}
}

func labelsOf(l *coordinationv1.Lease) string {
	if len(l.Labels) == 0 {
		return ""
	}
	return " " + labels.Set(l.Labels).String()
}

// selection is what a list or a watch selects.
type selection struct {
	labels labels.Selector
	fields fields.Selector
}

func selecting(opts metav1.ListOptions) (selection, error) {
	s := selection{labels: labels.Everything(), fields: fields.Everything()}
	var err error
	if opts.LabelSelector != "" {
		if s.labels, err = labels.Parse(opts.LabelSelector); err != nil {
			return s, apierrors.NewBadRequest(err.Error())
		}
	}
	if opts.FieldSelector != "" {
		if s.fields, err = fields.ParseSelector(opts.FieldSelector); err != nil {
			return s, apierrors.NewBadRequest(err.Error())
		}
	}
	return s, nil
}

func (s selection) matches(l *coordinationv1.Lease) bool {
	return s.labels.Matches(labels.Set(l.Labels)) &&
		s.fields.Matches(fields.Set{"metadata.name": l.Name, "metadata.namespace": l.Namespace})
}

func (a *Server) listLeases(s selection) (any, error) {
	list := &coordinationv1.LeaseList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatInt(a.rv, 10)}}
	for _, l := range a.sortedLocked() {
		if s.matches(l) {
			list.Items = append(list.Items, *l)
		}
	}
	return list, nil
}

// acceptWrite logs a controller write, with the Lease history as it is at this instant.
func (a *Server) acceptWrite(by, namespace string, sent time.Time) (any, error) {
	w := Write{At: time.Now(), Sent: sent, By: by, Namespace: namespace, Leases: len(a.history)}
	// One line per run of writes by the same writer and Lease history keeps the trace
	// readable.
	if n := len(a.writes); n == 0 || a.writes[n-1].By != by || a.writes[n-1].Leases != w.Leases {
		a.tracefLocked("%s: controller writes accepted from here on (sent at %s), namespace %q", by, a.Since(sent), namespace)
	}
	a.writes = append(a.writes, w)
	return nil, nil
}

// Clientset returns a replica's client over link, with timeout (0: none) on every
// call: a kubernetes.Interface whose only working part is coordination/v1 Leases, in
// any namespace. Any other call panics: the elections make none.
func (a *Server) Clientset(link *Link, timeout time.Duration) kubernetes.Interface {
	return clientset{leases: a.LeaseClient(link, timeout)}
}

// LeaseClient returns a replica's Lease client over link (a LeasesGetter too, as a
// standby's watch wants).
func (a *Server) LeaseClient(link *Link, timeout time.Duration) *Leases {
	return &Leases{api: a, link: link, timeout: timeout}
}

type clientset struct {
	kubernetes.Interface
	leases *Leases
}

func (c clientset) CoordinationV1() coordinationv1client.CoordinationV1Interface {
	return coordination{leases: c.leases}
}

// IsWatchListSemanticsUnSupported tells informers to list, then watch.
func (c clientset) IsWatchListSemanticsUnSupported() bool { return true }

type coordination struct {
	coordinationv1client.CoordinationV1Interface
	leases *Leases
}

func (c coordination) Leases(string) coordinationv1client.LeaseInterface { return c.leases }

// Leases serves one replica's Lease calls over its link.
type Leases struct {
	coordinationv1client.LeaseInterface
	api     *Server
	link    *Link
	timeout time.Duration
}

// Leases makes Leases a LeasesGetter.
func (l *Leases) Leases(string) coordinationv1client.LeaseInterface { return l }

// IsWatchListSemanticsUnSupported tells informers to list, then watch.
func (l *Leases) IsWatchListSemanticsUnSupported() bool { return true }

func (l *Leases) Get(ctx context.Context, name string, _ metav1.GetOptions) (*coordinationv1.Lease, error) {
	out, err := l.api.do(ctx, l.link, "get "+name, l.timeout, false, func() (any, error) { return l.api.getLease(name) })
	if err != nil {
		return nil, err
	}
	return out.(*coordinationv1.Lease), nil
}

func (l *Leases) Create(ctx context.Context, lease *coordinationv1.Lease, _ metav1.CreateOptions) (*coordinationv1.Lease, error) {
	// The caller may change its object once the call returned; the call keeps its own.
	lease = lease.DeepCopy()
	out, err := l.api.do(ctx, l.link, "create "+lease.Name, l.timeout, true, func() (any, error) { return l.api.createLease(l.link.Replica, lease) })
	if err != nil {
		return nil, err
	}
	return out.(*coordinationv1.Lease), nil
}

func (l *Leases) Update(ctx context.Context, lease *coordinationv1.Lease, _ metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	lease = lease.DeepCopy()
	what := fmt.Sprintf("update %s (holder %q)", lease.Name, ptr.Deref(lease.Spec.HolderIdentity, ""))
	out, err := l.api.do(ctx, l.link, what, l.timeout, true, func() (any, error) { return l.api.updateLease(l.link.Replica, lease) })
	if err != nil {
		return nil, err
	}
	return out.(*coordinationv1.Lease), nil
}

func (l *Leases) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	_, err := l.api.do(ctx, l.link, "delete "+name, l.timeout, true, func() (any, error) { return l.api.deleteLease(l.link.Replica, name, opts) })
	return err
}

func (l *Leases) List(ctx context.Context, opts metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	s, err := selecting(opts)
	if err != nil {
		return nil, err
	}
	out, err := l.api.do(ctx, l.link, "list", l.timeout, false, func() (any, error) { return l.api.listLeases(s) })
	if err != nil {
		return nil, err
	}
	return out.(*coordinationv1.LeaseList), nil
}

// Watch streams the changes of the selected Leases after opts.ResourceVersion, as the
// apiserver does (a Lease that stops matching the selector is deleted from the
// watcher's view, one that starts is added), each delivered after the link's latency,
// in order, and held while the link or the apiserver is stalled.
func (l *Leases) Watch(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	s, err := selecting(opts)
	if err != nil {
		return nil, err
	}
	w := &watcher{api: l.api, link: l.link, selection: s, visible: map[string]bool{},
		result: make(chan watch.Event), stop: make(chan struct{}), more: make(chan struct{}, 1)}
	from, _ := strconv.ParseInt(opts.ResourceVersion, 10, 64)
	a := l.api
	a.mu.Lock()
	if from <= 0 {
		// From now: the current Leases first, as added.
		for _, lease := range a.sortedLocked() {
			w.changed(lease, false)
		}
	} else {
		// The history from from on, which the simulator never compacts; the watcher's
		// view starts as the Leases were at from.
		for _, h := range a.history {
			gone := h.Verb == "deleted"
			if h.RV > from {
				w.changed(h.Lease, gone)
				continue
			}
			w.visible[h.Name] = !gone && s.matches(h.Lease)
		}
	}
	a.watchers = append(a.watchers, w)
	a.mu.Unlock()
	a.inFlight.Go(w.run)
	return w, nil
}

// watcher is one watch on the Leases.
type watcher struct {
	api       *Server
	link      *Link
	selection selection
	// visible holds the Leases the watcher was last told of as present; guarded by
	// api.mu.
	visible map[string]bool
	result  chan watch.Event
	stop    chan struct{}
	once    sync.Once
	// more is signalled when queue grew; queue is guarded by api.mu.
	more  chan struct{}
	queue []watch.Event
}

// changed queues the event that lease's new state (or its deletion, when gone) is for
// this watcher, if any; the caller holds api.mu.
func (w *watcher) changed(lease *coordinationv1.Lease, gone bool) {
	was, is := w.visible[lease.Name], !gone && w.selection.matches(lease)
	var e watch.Event
	switch {
	case is && !was:
		e = watch.Event{Type: watch.Added, Object: lease.DeepCopy()}
	case is:
		e = watch.Event{Type: watch.Modified, Object: lease.DeepCopy()}
	case was:
		e = watch.Event{Type: watch.Deleted, Object: lease.DeepCopy()}
	default:
		return
	}
	w.visible[lease.Name] = is
	w.queue = append(w.queue, e)
	select {
	case w.more <- struct{}{}:
	default:
	}
}

func (w *watcher) ResultChan() <-chan watch.Event { return w.result }

func (w *watcher) Stop() { w.once.Do(func() { close(w.stop) }) }

func (w *watcher) run() {
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
		if !w.link.Stall.wait(w.stop) {
			return
		}
		if w.link.WatchStall != nil && !w.link.WatchStall.wait(w.stop) {
			return
		}
		select {
		case w.result <- *next:
		case <-w.stop:
			return
		}
	}
}

// ControllerTransport returns the apiserver's end of a replica's controller client
// over link: the replica's fenced transport (Fence.Transport) wraps it, as the product
// wraps every controller's client. Each request is a controller write to its path's
// namespace; it is applied as it arrives, whatever the fence, and answered 200.
func (a *Server) ControllerTransport(link *Link) http.RoundTripper {
	return controllerTransport{api: a, link: link}
}

type controllerTransport struct {
	api  *Server
	link *Link
}

func (t controllerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
	sent := time.Now()
	namespace := ""
	if _, rest, ok := strings.Cut(req.URL.Path, "/namespaces/"); ok {
		namespace, _, _ = strings.Cut(rest, "/")
	}
	if _, err := t.api.do(req.Context(), t.link, "controller write", 0, false, func() (any, error) {
		return t.api.acceptWrite(t.link.Replica, namespace, sent)
	}); err != nil {
		return nil, err
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("{}")), Request: req}, nil
}
