package reconnect

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"
)

// apiserver is a stand-in that can stop listening and listen again on the same
// address, as a restarted kube-apiserver does.
type apiserver struct {
	t       *testing.T
	addr    string
	handler http.Handler

	mu     sync.Mutex
	server *httptest.Server
	ready  bool
}

func startAPIServer(t *testing.T, handler http.Handler) *apiserver {
	a := &apiserver{t: t, handler: handler, ready: true}
	a.server = httptest.NewServer(a.serve())
	a.addr = a.server.Listener.Addr().String()
	t.Cleanup(a.stop)
	return a
}

// serve answers /readyz by a.ready and everything else with the handler.
func (a *apiserver) serve() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			a.mu.Lock()
			ready := a.ready
			a.mu.Unlock()
			if !ready {
				http.Error(w, "[-]etcd failed", http.StatusInternalServerError)
				return
			}
			_, _ = io.WriteString(w, "ok")
			return
		}
		a.handler.ServeHTTP(w, r)
	})
}

func (a *apiserver) stop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.server != nil {
		a.server.CloseClientConnections()
		a.server.Close()
		a.server = nil
	}
}

// start listens again on the same address.
func (a *apiserver) start() {
	a.mu.Lock()
	defer a.mu.Unlock()
	l, err := net.Listen("tcp", a.addr)
	if err != nil {
		a.t.Fatalf("listening again on %s: %v", a.addr, err)
	}
	a.server = httptest.NewUnstartedServer(a.serve())
	a.server.Listener.Close()
	a.server.Listener = l
	a.server.Start()
}

func (a *apiserver) setReady(ready bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ready = ready
}

func (a *apiserver) url(path string) string { return "http://" + a.addr + path }

// runGate starts g's prober until the test ends.
func runGate(t *testing.T, g *Gate) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	// Run marks itself running first thing; a request must not race it.
	for {
		g.mu.Lock()
		running := g.running
		g.mu.Unlock()
		if running {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// httpProbe asks url's /readyz over plain HTTP.
func httpProbe(client *http.Client, url string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return nil
	}
}

func get(t *testing.T, client *http.Client, url string) (string, error) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

func TestAListThatFindsTheAPIServerGoneWaitsUntilItIsReadyAgainAndReportsAReplacement(t *testing.T) {
	a := startAPIServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"kind":"PodList"}`)
	}))
	plain := &http.Client{Transport: &http.Transport{}}
	g := NewGate(httpProbe(plain, a.url("/readyz")))
	runGate(t, g)
	replaced := g.Replaced()
	informers := NewInformers("test")
	client := &http.Client{Transport: g.Wrap(&http.Transport{}, informers)}

	a.stop()
	type result struct {
		body string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		body, err := get(t, client, a.url("/api/v1/pods"))
		got <- result{body, err}
	}()
	// Refused: the gate closes and holds the request instead of failing it.
	waitFor(t, func() bool { return !g.Open() })
	select {
	case r := <-got:
		t.Fatalf("the list returned while the apiserver was down: %q, %v", r.body, r.err)
	case <-time.After(3 * ProbeInterval):
	}
	// Listening again but not ready (its watch caches still filling): still held.
	a.setReady(false)
	a.start()
	select {
	case r := <-got:
		t.Fatalf("the list returned before the apiserver was ready: %q, %v", r.body, r.err)
	case <-time.After(3 * ProbeInterval):
	}
	select {
	case <-replaced:
		t.Fatal("a replacement was reported before the gate opened")
	default:
	}
	a.setReady(true)
	r := <-got
	if r.err != nil || r.body != `{"kind":"PodList"}` {
		t.Fatalf("the held list got %q, %v; want the apiserver's answer", r.body, r.err)
	}
	select {
	case <-replaced:
	case <-time.After(time.Second):
		t.Fatal("an outage in which the apiserver refused connections was not reported as a replacement")
	}
	if s := informers.Status(); len(s) != 1 || s[0].Resource != "pods" || s[0].Received.IsZero() {
		t.Errorf("informer status %+v; want pods, received", s)
	}
}

// failingTransport fails its first failures requests with err, then sends them on.
type failingTransport struct {
	failures atomic.Int32
	err      error
	next     http.RoundTripper
	writes   atomic.Int32
}

func (f *failingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet {
		f.writes.Add(1)
	}
	if f.failures.Add(-1) >= 0 {
		return nil, f.err
	}
	return f.next.RoundTrip(req)
}

func TestAFailureTheProbeDoesNotConfirmGoesBackToTheCallerAndWritesAreNeverHeld(t *testing.T) {
	a := startAPIServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	plain := &http.Client{Transport: &http.Transport{}}
	g := NewGate(httpProbe(plain, a.url("/readyz")))
	runGate(t, g)
	failing := &failingTransport{err: errors.New("read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer"), next: &http.Transport{}}
	failing.failures.Store(1)
	client := &http.Client{Transport: g.Wrap(failing, nil)}
	// The apiserver answers the probe at once: that one connection broke, and the
	// caller retries as it would without the gate.
	if _, err := get(t, client, a.url("/api/v1/pods")); err == nil || !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("got %v; want the reset returned", err)
	}
	waitFor(t, g.Open)

	// A write passes even while the gate is closed, and is never sent again.
	g.close(errors.New("connection refused"))
	failing.failures.Store(1)
	resp, err := client.Post(a.url("/api/v1/namespaces/a/pods"), "application/json", strings.NewReader("{}"))
	if err == nil {
		resp.Body.Close()
	}
	if err == nil || failing.writes.Load() != 1 {
		t.Fatalf("a write through a closed gate: err %v after %d sends; want it sent once and its error returned", err, failing.writes.Load())
	}
}

func TestAGateWithoutItsProberHoldsNothing(t *testing.T) {
	g := NewGate(func(context.Context) error { return errors.New("down") })
	failing := &failingTransport{err: errors.New("dial tcp 127.0.0.1:1: connect: connection refused")}
	failing.failures.Store(1)
	client := &http.Client{Transport: g.Wrap(failing, nil)}
	if _, err := get(t, client, "http://127.0.0.1:1/api/v1/pods"); err == nil {
		t.Fatal("a refused request through a gate whose prober is not running succeeded")
	}
	if !g.Open() {
		t.Fatal("the gate closed without a prober to open it again")
	}
}

// brokenBody returns its data, then err.
type brokenBody struct {
	data   string
	err    error
	closed bool
}

func (b *brokenBody) Read(p []byte) (int, error) {
	if b.data != "" {
		n := copy(p, b.data)
		b.data = b.data[n:]
		return n, nil
	}
	return 0, b.err
}

func (b *brokenBody) Close() error { b.closed = true; return nil }

// bodyTransport answers every request with 200 and a body from body.
type bodyTransport struct{ body func() io.ReadCloser }

func (b bodyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Body: b.body(), Request: req, Header: http.Header{}}, nil
}

func TestAWatchWhoseConnectionBreaksEndsAsIfTheAPIServerClosedItAndReportsTheInformerDisconnected(t *testing.T) {
	g := NewGate(func(context.Context) error { return nil })
	runGate(t, g)
	informers := NewInformers("test-watch")
	body := &brokenBody{data: `{"type":"ADDED"}`, err: errors.New("http2: client connection lost")}
	client := &http.Client{Transport: g.Wrap(bodyTransport{body: func() io.ReadCloser { return body }}, informers)}
	resp, err := client.Get("http://apiserver/apis/apps/v1/namespaces/a/replicasets?watch=true&resourceVersion=5")
	if err != nil {
		t.Fatal(err)
	}
	if s := informers.Status(); len(s) != 1 || s[0].Resource != "replicasets.apps" || !s[0].Connected {
		t.Fatalf("while the watch is open the status is %+v; want replicasets.apps connected", s)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil || string(data) != `{"type":"ADDED"}` {
		t.Fatalf("read %q, %v; want the event and a clean end", data, err)
	}
	s := informers.Status()
	if len(s) != 1 || s[0].Connected || s[0].Received.IsZero() || !strings.Contains(s[0].LastError, "connection lost") {
		t.Fatalf("after the connection broke the status is %+v; want disconnected, received, the error named", s)
	}
	if got := informers.Disconnected(); len(got) != 1 || got[0] != "replicasets.apps" {
		t.Errorf("Disconnected() = %v", got)
	}
	// The reflector stopping its watch is no broken connection.
	body2 := &brokenBody{err: errors.New("http2: response body closed")}
	client.Transport = g.Wrap(bodyTransport{body: func() io.ReadCloser { return body2 }}, informers)
	resp, err = client.Get("http://apiserver/api/v1/pods?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, err := resp.Body.Read(make([]byte, 1)); errors.Is(err, io.EOF) {
		t.Error("a read after the reflector closed its watch was turned into a clean end")
	}
	informers.Forget()
	if len(informers.Status()) != 0 {
		t.Error("Forget kept the informers' connections")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// An apiserver that is frozen, or cut off, times out: when it answers again it is the
// same process, whose watch cache still has the informers' resourceVersions, and no
// replacement is reported; one whose connections were reset is a new one.
func TestOnlyAnOutageThatFoundTheProcessGoneIsAReplacement(t *testing.T) {
	for _, tc := range []struct {
		name         string
		requestError error
		wantReplaced bool
	}{
		{"frozen: the handshake timed out", errors.New("net/http: TLS handshake timeout"), false},
		{"cut off: the health check closed the connection", errors.New("http2: client connection lost"), false},
		{"killed: the connection was reset", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, true},
		{"killed: the stream ended unexpectedly", io.ErrUnexpectedEOF, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var probes atomic.Int32
			g := NewGate(func(context.Context) error {
				if probes.Add(1) < 3 {
					return errors.New("context deadline exceeded")
				}
				return nil
			})
			runGate(t, g)
			replaced := g.Replaced()
			failing := &failingTransport{err: tc.requestError, next: bodyTransport{body: func() io.ReadCloser { return io.NopCloser(strings.NewReader("{}")) }}}
			failing.failures.Store(1)
			client := &http.Client{Transport: g.Wrap(failing, nil)}
			if _, err := get(t, client, "http://apiserver/api/v1/pods"); err != nil {
				t.Fatalf("the list through the outage failed: %v", err)
			}
			select {
			case <-replaced:
				if !tc.wantReplaced {
					t.Error("reported a replacement")
				}
			case <-time.After(100 * time.Millisecond):
				if tc.wantReplaced {
					t.Error("reported no replacement")
				}
			}
		})
	}
}

// TestFailureKindNamesTheKindWithoutTheErrorsText: /statusz/replica shows the kind of
// an informer's last failure; the error's own text names the apiserver's address and
// the request's URL, which that page does not show.
func TestFailureKindNamesTheKindWithoutTheErrorsText(t *testing.T) {
	url := "https://10.0.0.1:6443/api/v1/pods?watch=true"
	for _, c := range []struct {
		err  error
		want string
	}{
		{&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, "connection refused"},
		{errors.New("Get \"" + url + "\": read tcp 127.0.0.1:1->10.0.0.1:6443: read: connection reset by peer"), "connection reset"},
		{errors.New("Get \"" + url + "\": net/http: TLS handshake timeout"), "TLS handshake timeout"},
		{errors.New("Get \"" + url + "\": http2: server sent GOAWAY and closed the connection"), "closed by the apiserver (GOAWAY)"},
		{errors.New("Get \"" + url + "\": unexpected EOF"), "stream ended unexpectedly"},
		{errors.New("Get \"" + url + "\": EOF"), "connection closed"},
		{context.DeadlineExceeded, "timed out"},
		{context.Canceled, "canceled"},
		{errors.New("Get \"" + url + "\": tls: failed to verify certificate: x509: certificate signed by unknown authority"), "TLS error"},
		{errors.New("Get \"" + url + "\": something else"), "request failed"},
	} {
		got := failureKind(c.err)
		if got != c.want {
			t.Errorf("failureKind(%q) = %q, want %q", c.err, got, c.want)
		}
		if strings.Contains(got, "10.0.0.1") {
			t.Errorf("failureKind(%q) = %q names the address", c.err, got)
		}
	}
}
