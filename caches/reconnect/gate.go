// Package reconnect keeps the shared informers connected to the apiserver through an
// outage, and says per informer whether it is.
//
// client-go's reflectors retry a failed list or watch after an exponential backoff
// (800ms doubling to 30s, plus up to as much again of jitter, reset only two minutes
// after it began) and relist after any watch error but a reset connection. Thirty
// seconds of a refused connection leave them waiting up to a minute after the
// apiserver is back, and every backoff round that reaches it relists. The Gate, in the
// informers' transport, keeps that from starting, through the seams client-go offers
// (its transport and its watch stream), without patching the reflector:
//
//   - A GET that cannot reach the apiserver (refused, reset, timed out, its connection
//     lost) closes the gate and is retried, not returned, once the gate opens again;
//     while it is closed every GET waits. The reflector sees one slow request and no
//     error, so its backoff never grows.
//   - While closed, the gate asks the apiserver's /readyz every ProbeInterval and opens
//     the moment it answers: every held request goes out at once. /readyz, not
//     /livez: a starting apiserver is ready only once its watch caches are.
//   - A watch whose connection breaks ends as if the apiserver had closed it (io.EOF),
//     so the reflector watches again from the resourceVersion it reached (client-go's
//     own handling of a reset connection) instead of relisting after a backoff round.
//     The apiserver answers 410 Gone if it no longer has that resourceVersion, and only
//     then does the informer relist.
//   - An outage in which the apiserver's process went away (a connection refused,
//     reset or closed by it: it was restarted, or replaced) is reported by Replaced: the
//     new one's watch cache starts at etcd's current revision, so every informer will
//     be answered 410 and relist after a backoff round. The replica restarts its
//     informers instead. An apiserver that is only frozen, or cut off, times out: its
//     watches resume where they were. A replacement that shows none of these (a
//     machine gone without a reset, a new one at its address) leaves the informers to
//     relist at client-go's pace: one backoff round, 0.8 to 1.6s.
//
// Only GETs are held and retried: the informers' client never writes, and a GET has no
// body and no effect, so sending it again is safe. Nothing else waits on the gate: the
// election, the controllers' writes and the probes fail fast as before.
package reconnect

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// ProbeInterval is how often a closed gate asks the apiserver whether it is back:
// what an outage may cost beyond its end. Ten small requests a second per replica, and
// only while the apiserver does not answer.
const ProbeInterval = 100 * time.Millisecond

// probeTimeout bounds one probe: a frozen apiserver accepts connections (the kernel
// does) but answers nothing.
const probeTimeout = time.Second

// Gate holds the informers' requests while the apiserver cannot be reached; see the
// package doc. Run must run for a closed gate to open again.
type Gate struct {
	// probe asks the apiserver whether it is ready; nil means ready.
	probe func(ctx context.Context) error
	// interval is the time between probes while closed.
	interval time.Duration

	mu sync.Mutex
	// current is the outage in progress; nil while the gate is open.
	current *outage
	// wake tells Run that the gate closed.
	wake chan struct{}
	// replaced is closed when the gate opens after an outage in which the
	// apiserver's process was gone.
	replaced chan struct{}
	// running is set while Run runs; a gate without its prober never closes.
	running bool
}

// outage is one closing of the gate, from the request that found the apiserver
// unreachable until a probe found it ready.
type outage struct {
	// opened is closed when the gate opens again.
	opened chan struct{}
	since  time.Time
	cause  error
	// confirmed is set once a probe failed too: the apiserver was unreachable, not
	// just one request's connection. Only then are the requests that failed retried.
	confirmed bool
	// gone is set when a request or probe of the outage found the apiserver's process
	// gone (see serverGone).
	gone bool
}

// NewGate returns an open gate that probes with probe (nil when the apiserver is ready).
func NewGate(probe func(ctx context.Context) error) *Gate {
	registerMetrics()
	reachable.Set(1)
	return &Gate{probe: probe, interval: ProbeInterval, wake: make(chan struct{}, 1), replaced: make(chan struct{})}
}

// Replaced returns a channel that is closed the next time the gate opens after an
// outage in which the apiserver's process was gone (see serverGone): the one that
// answers now is a new process, whose watch cache does not have the informers'
// resourceVersions.
func (g *Gate) Replaced() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.replaced
}

// Open reports whether the gate is open: the apiserver answered the last request.
func (g *Gate) Open() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.current == nil
}

// Run opens the gate whenever it closed and the apiserver answers again, until ctx is
// cancelled; the gate then stays open, so that nothing waits for a prober gone.
func (g *Gate) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	g.mu.Lock()
	g.running = true
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.running = false
		g.mu.Unlock()
		g.open(logger, false)
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.wake:
		}
		for !g.Open() {
			probeCtx, cancel := context.WithTimeout(ctx, probeTimeout)
			err := g.probe(probeCtx)
			cancel()
			if ctx.Err() != nil {
				return
			}
			if err == nil {
				g.open(logger, true)
				break
			}
			g.probeFailed(logger, err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(g.interval):
			}
		}
	}
}

// close closes the gate after a request that did not reach the apiserver, and returns
// the outage it belongs to (nil when no prober runs: the request fails as it would
// without the gate).
func (g *Gate) close(err error) *outage {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.running {
		return nil
	}
	if g.current == nil {
		g.current = &outage{opened: make(chan struct{}), since: time.Now(), cause: err}
		select {
		case g.wake <- struct{}{}:
		default:
		}
	}
	if serverGone(err) {
		g.current.gone = true
	}
	return g.current
}

// probeFailed records a failed probe: the outage is real.
func (g *Gate) probeFailed(logger klog.Logger, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	o := g.current
	if o == nil {
		return
	}
	if serverGone(err) {
		o.gone = true
	}
	if !o.confirmed {
		o.confirmed = true
		reachable.Set(0)
		logger.Info("Lost the apiserver: the informers' requests wait until it answers again", "err", o.cause, "probe", err)
	}
}

// open opens the gate; answered says the apiserver answered (false: Run is stopping).
func (g *Gate) open(logger klog.Logger, answered bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	o := g.current
	if o == nil {
		return
	}
	g.current = nil
	close(o.opened)
	reachable.Set(1)
	if !answered || !o.confirmed {
		return
	}
	replaced := o.gone
	outages.WithLabelValues(map[bool]string{true: "replaced", false: "same"}[replaced]).Inc()
	if replaced {
		close(g.replaced)
		g.replaced = make(chan struct{})
	}
	logger.Info("The apiserver answers again: releasing the informers' requests",
		"unreachableFor", time.Since(o.since).Round(time.Millisecond), "replaced", replaced)
}

// wait returns once the gate is open (held says whether it had to wait), or ctx's error.
func (g *Gate) wait(ctx context.Context) (held bool, err error) {
	for {
		g.mu.Lock()
		o := g.current
		g.mu.Unlock()
		if o == nil {
			return held, nil
		}
		held = true
		select {
		case <-o.opened:
		case <-ctx.Done():
			return held, ctx.Err()
		}
	}
}

// waitOut waits for the end of o, the outage a failed request closed the gate for, and
// reports whether the request is to be sent again: only when the apiserver was found
// unreachable. When the first probe succeeded it was that request's connection alone,
// and its error goes back to the caller, which retries as it would without the gate.
func (g *Gate) waitOut(ctx context.Context, o *outage) bool {
	select {
	case <-o.opened:
	case <-ctx.Done():
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return o.confirmed
}

// Wrap returns next with the gate in front of its GETs, reporting to informers (nil
// reports nothing).
func (g *Gate) Wrap(next http.RoundTripper, informers *Informers) http.RoundTripper {
	return &roundTripper{gate: g, next: next, informers: informers}
}

type roundTripper struct {
	gate      *Gate
	next      http.RoundTripper
	informers *Informers
}

func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet {
		return rt.next.RoundTrip(req)
	}
	call := rt.informers.request(req)
	for {
		held, err := rt.gate.wait(req.Context())
		if held {
			requestsHeld.Inc()
		}
		if err != nil {
			call.failed(err)
			return nil, err
		}
		// A fresh copy each time: a transport may keep what it was given until it
		// returned, and a retry must not share it.
		resp, err := rt.next.RoundTrip(req.Clone(req.Context()))
		if err == nil {
			return call.answered(rt.gate, resp), nil
		}
		call.failed(err)
		if req.Context().Err() != nil || !Unreachable(err) {
			return nil, err
		}
		if o := rt.gate.close(err); o == nil || !rt.gate.waitOut(req.Context(), o) {
			return nil, err
		}
	}
}

// serverGone reports whether err says that the apiserver's process went away: a
// connection it refused, reset or closed (EOF, GOAWAY). A timeout, or a connection this
// client closed itself (its HTTP/2 health check), says nothing of the kind.
func serverGone(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	// The strings too: an error that crossed a retry or a wrapper may keep only them.
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(msg, "server sent GOAWAY") ||
		strings.Contains(msg, "connection refused") || strings.Contains(msg, "connection reset by peer") ||
		strings.HasSuffix(msg, ": EOF") || strings.HasSuffix(msg, "unexpected EOF")
}

// Unreachable reports whether err says that a request did not reach the apiserver, or
// its connection broke: refused, reset, timed out, or the connection lost.
func Unreachable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		utilnet.IsTimeout(err) || utilnet.IsHTTP2ConnectionLost(err) || utilnet.IsNoRoutesError(err) ||
		strings.Contains(err.Error(), "TLS handshake timeout") ||
		strings.Contains(err.Error(), "no route to host") || strings.Contains(err.Error(), "network is unreachable")
}

// ReadyzProbe returns the gate's probe: the apiserver's /readyz through client, once
// per call (client-go's own retry of a reset connection would wait a second, and hide
// what the gate must see). An apiserver that answers 401 or 403 is reachable too; it
// just does not show this client its readiness, and the informers' own requests will
// say the rest.
func ReadyzProbe(client rest.Interface) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		var status int
		err := client.Get().AbsPath("/readyz").MaxRetries(0).Do(ctx).StatusCode(&status).Error()
		if status == http.StatusUnauthorized || status == http.StatusForbidden {
			return nil
		}
		return err
	}
}
