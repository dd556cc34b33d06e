package reconnect

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// Informers follows the connection of one set of informers (one factory's, named as
// in client-go's informer metrics) to the apiserver, per resource: whether its watch is
// open, and when it last received anything, a list or a watch event (bookmarks
// included, which a quiet watch gets about once a minute). A leader whose informers
// are disconnected is blind: it holds the Lease but does not see what changes.
type Informers struct {
	name string
	now  func() time.Time

	mu        sync.Mutex
	resources map[string]*connection
}

// connection is what is known of one resource's informer.
type connection struct {
	// watches counts the open watch streams (one, between two watches none).
	watches int
	// since is when the watch opened, or when the last one ended.
	since time.Time
	// received is when the last list answered or watch event arrived.
	received time.Time
	// lastError says what kind of failure the last request or watch met, "" if none
	// since (failureKind: no text of the error, which names the apiserver's address).
	lastError string
}

// InformerStatus is one resource's connection, as Status reports it.
type InformerStatus struct {
	Resource string
	// Connected says that its watch is open.
	Connected bool
	// Since is when it connected or disconnected.
	Since time.Time
	// Received is when it last received anything; zero before that.
	Received time.Time
	// LastError is the kind of its last failure ("connection refused", "403
	// Forbidden", ...), if it failed since it last succeeded.
	LastError string
}

// NewInformers returns the connection tracker of the informers named name.
func NewInformers(name string) *Informers {
	registerMetrics()
	return &Informers{name: name, now: time.Now, resources: map[string]*connection{}}
}

// Name is the informers' name.
func (i *Informers) Name() string { return i.name }

// Status returns every resource's connection, sorted by resource.
func (i *Informers) Status() []InformerStatus {
	i.mu.Lock()
	defer i.mu.Unlock()
	out := make([]InformerStatus, 0, len(i.resources))
	for resource, c := range i.resources {
		out = append(out, InformerStatus{Resource: resource, Connected: c.watches > 0, Since: c.since, Received: c.received,
			LastError: c.lastError})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Resource < out[b].Resource })
	return out
}

// Disconnected returns the resources whose watch is not open, sorted.
func (i *Informers) Disconnected() []string {
	i.mu.Lock()
	defer i.mu.Unlock()
	out := sets.New[string]()
	for resource, c := range i.resources {
		if c.watches == 0 {
			out.Insert(resource)
		}
	}
	return sets.List(out)
}

// Forget removes the informers' metrics, when they stopped.
func (i *Informers) Forget() {
	i.mu.Lock()
	defer i.mu.Unlock()
	for resource := range i.resources {
		informerConnected.DeleteLabelValues(i.name, resource)
		informerReceived.DeleteLabelValues(i.name, resource)
	}
	i.resources = map[string]*connection{}
}

// requestInfo parses Kubernetes API paths as the apiserver does.
var requestInfo = &request.RequestInfoFactory{
	APIPrefixes:          sets.NewString("api", "apis"),
	GrouplessAPIPrefixes: sets.NewString("api"),
}

// call is one informer request being followed.
type call struct {
	informers *Informers
	resource  string
	watch     bool
}

// request starts following req; a request that is not a list or watch of a resource
// is not followed, and a nil Informers records nothing.
func (i *Informers) request(req *http.Request) call {
	info, err := requestInfo.NewRequestInfo(req)
	if err != nil || !info.IsResourceRequest || info.Subresource != "" || (info.Verb != "list" && info.Verb != "watch") {
		return call{}
	}
	return call{informers: i, resource: schema.GroupResource{Group: info.APIGroup, Resource: info.Resource}.String(),
		watch: info.Verb == "watch"}
}

// update changes the resource's connection under the lock and refreshes its metrics.
func (c call) update(change func(conn *connection, now time.Time)) {
	i := c.informers
	if i == nil {
		return
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	conn := i.resources[c.resource]
	if conn == nil {
		conn = &connection{}
		i.resources[c.resource] = conn
	}
	change(conn, i.now())
	informerConnected.WithLabelValues(i.name, c.resource).Set(map[bool]float64{true: 1, false: 0}[conn.watches > 0])
	if !conn.received.IsZero() {
		informerReceived.WithLabelValues(i.name, c.resource).Set(float64(conn.received.UnixNano()) / 1e9)
	}
}

// failed records a request that did not get an answer.
func (c call) failed(err error) {
	c.update(func(conn *connection, _ time.Time) { conn.lastError = failureKind(err) })
}

// failureKind names the kind of a failed request without its text, which holds the
// apiserver's address and the request's URL: /statusz/replica shows it.
func failureKind(err error) string {
	msg := err.Error()
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case utilnet.IsConnectionRefused(err) || strings.Contains(msg, "connection refused"):
		return "connection refused"
	case utilnet.IsConnectionReset(err) || strings.Contains(msg, "connection reset by peer"):
		return "connection reset"
	case strings.Contains(msg, "TLS handshake timeout"):
		return "TLS handshake timeout"
	case utilnet.IsHTTP2ConnectionLost(err):
		return "connection lost (no answer to the HTTP/2 health check)"
	case strings.Contains(msg, "server sent GOAWAY"):
		return "closed by the apiserver (GOAWAY)"
	case errors.Is(err, io.ErrUnexpectedEOF) || strings.HasSuffix(msg, "unexpected EOF"):
		return "stream ended unexpectedly"
	case errors.Is(err, io.EOF) || strings.HasSuffix(msg, ": EOF"):
		return "connection closed"
	case utilnet.IsTimeout(err) || errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	case strings.Contains(msg, "x509:") || strings.Contains(msg, "tls:"):
		return "TLS error"
	}
	return "request failed"
}

// answered records resp and returns it, a watch's with its body followed (watchBody).
func (c call) answered(gate *Gate, resp *http.Response) *http.Response {
	if c.resource == "" {
		return resp
	}
	if resp.StatusCode != http.StatusOK {
		c.update(func(conn *connection, _ time.Time) { conn.lastError = resp.Status })
		return resp
	}
	if !c.watch {
		c.update(func(conn *connection, now time.Time) { conn.received, conn.lastError = now, "" })
		return resp
	}
	c.update(func(conn *connection, now time.Time) {
		conn.watches++
		conn.since, conn.lastError = now, ""
	})
	resp.Body = &watchBody{ReadCloser: resp.Body, call: c, gate: gate}
	return resp
}

// watchBody is an open watch's stream. A read error that is not the end of the stream
// ends it as the end would (see the package doc): the reflector then watches again
// from where it was. A broken connection also closes the gate, so that the new watch
// waits for the apiserver instead of failing.
type watchBody struct {
	io.ReadCloser
	call call
	gate *Gate
	// closing is set by Close: the reflector stopped the watch, and the error the read
	// in progress gets is that, not a broken connection.
	closing atomic.Bool
	ended   sync.Once
}

// receivedEvery is how often a stream's reads refresh its resource's last-received
// time: at most once a second, so that a busy watch costs no lock per read.
const receivedEvery = time.Second

func (b *watchBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.received()
	}
	switch {
	case err == nil:
		return n, nil
	case errors.Is(err, io.EOF) || b.closing.Load():
		b.end("")
		return n, err
	}
	b.end(failureKind(err))
	if Unreachable(err) && b.gate != nil {
		b.gate.close(err)
	}
	return n, io.EOF
}

func (b *watchBody) Close() error {
	b.closing.Store(true)
	b.end("")
	return b.ReadCloser.Close()
}

// received refreshes the last-received time, at most every receivedEvery.
func (b *watchBody) received() {
	i := b.call.informers
	if i == nil {
		return
	}
	i.mu.Lock()
	conn := i.resources[b.call.resource]
	fresh := conn != nil && i.now().Sub(conn.received) < receivedEvery
	i.mu.Unlock()
	if fresh {
		return
	}
	b.call.update(func(conn *connection, now time.Time) { conn.received = now })
}

// end records, once, that the stream ended, with the reason if it broke.
func (b *watchBody) end(reason string) {
	b.ended.Do(func() {
		b.call.update(func(conn *connection, now time.Time) {
			conn.watches--
			if conn.watches == 0 {
				conn.since = now
			}
			if reason != "" {
				conn.lastError = reason
			}
		})
	})
}
