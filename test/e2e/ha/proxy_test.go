package ha

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// Proxy is a loopback TCP proxy between one mini-kcm replica and the apiserver. It
// forwards bytes untouched in both directions, so TLS and HTTP/2 pass through it, and it
// can cut the replica off without the replica noticing at the TCP level:
//
//   - Blackhole stops forwarding on every connection and holds the connections open,
//     never closing them, as a network partition does: requests hang until the
//     client's own timeouts give up. Connections accepted while blackholed are held too.
//   - Heal forwards again. Connections that lived through the partition are closed
//     first, their held bytes dropped: delivering a request queued during the partition
//     would be a write from a replica that may have exited long ago, which is the
//     missing-fencing problem leader election documents and not what these tests
//     measure. Clients then reconnect through the proxy as after any connection loss.
//   - CutQuiet makes the connections on which the client has sent nothing for a while
//     half-open, as a load balancer that lost its state or an apiserver that vanished
//     without a FIN or RST does: the proxy keeps reading both ends and throws the bytes
//     away, so the client's TCP stack sees a live peer (its writes are acknowledged, its
//     keepalives answered) that never says anything again. Only the client can end
//     such a connection; the proxy records when it does. Other connections, and new
//     ones, relay as before.
type Proxy struct {
	listener net.Listener
	target   string

	mu sync.Mutex
	// changed is signalled whenever blackholed changes or a connection is dropped, to
	// wake up the copy loops that wait while blackholed.
	changed    *sync.Cond
	blackholed bool
	closed     bool
	conns      map[*proxiedConn]struct{}
	// cuts are the connections CutQuiet cut, kept after they end for CutsClosedByClient.
	cuts []*proxiedConn

	// wg tracks the accept loop and every copy loop, so Close returns only once they
	// all ended.
	wg sync.WaitGroup
}

// proxiedConn is one client connection and its connection to the apiserver.
type proxiedConn struct {
	client, server net.Conn
	// dropped is set (under Proxy.mu) when Heal or Close ends the connection; held
	// bytes are then discarded instead of forwarded.
	dropped bool
	// lastFromClient is when the client last sent bytes (or connected), under Proxy.mu.
	lastFromClient time.Time
	// cutAt is when CutQuiet cut the connection, zero if it did not; closedByClient is
	// when the client closed the cut connection, zero while it is open. Under Proxy.mu.
	cutAt, closedByClient time.Time
}

// StartProxy listens on a free loopback port and forwards every connection to target
// (host:port).
func StartProxy(target string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for the proxy: %w", err)
	}
	p := &Proxy{listener: l, target: target, conns: map[*proxiedConn]struct{}{}}
	p.changed = sync.NewCond(&p.mu)
	p.wg.Go(p.acceptLoop)
	return p, nil
}

// Addr returns the proxy's host:port.
func (p *Proxy) Addr() string { return p.listener.Addr().String() }

// URL returns the https URL that reaches the apiserver through the proxy.
func (p *Proxy) URL() string { return "https://" + p.Addr() }

// Blackhole stops forwarding; see the type's documentation.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blackholed = true
	p.changed.Broadcast()
}

// Heal closes the connections that lived through the partition and forwards new ones
// again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropAllLocked()
	p.blackholed = false
	p.changed.Broadcast()
}

// CutQuiet cuts every relaying connection on which the client has sent nothing for at
// least quiet, and returns how many it cut; see the type's documentation. A connection
// that only receives (an HTTP watch) is quiet; one that sends requests often (Lease
// renewals) is not.
func (p *Proxy) CutQuiet(quiet time.Duration) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	n := 0
	for c := range p.conns {
		if c.server == nil || c.dropped || !c.cutAt.IsZero() || now.Sub(c.lastFromClient) < quiet {
			continue
		}
		c.cutAt = now
		p.cuts = append(p.cuts, c)
		n++
	}
	p.changed.Broadcast()
	return n
}

// CutsClosedByClient returns, for every connection cut by CutQuiet that the client has
// closed since, how long after its cut the client closed it, and how many cut
// connections are still open.
func (p *Proxy) CutsClosedByClient() (closedAfter []time.Duration, open int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.cuts {
		if c.closedByClient.IsZero() {
			open++
			continue
		}
		closedAfter = append(closedAfter, c.closedByClient.Sub(c.cutAt))
	}
	return closedAfter, open
}

// Connections returns the number of open client connections.
func (p *Proxy) Connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Close stops accepting, closes every connection and waits for all copy loops.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.dropAllLocked()
	p.changed.Broadcast()
	p.mu.Unlock()
	p.listener.Close()
	p.wg.Wait()
}

func (p *Proxy) dropAllLocked() {
	for c := range p.conns {
		c.dropped = true
		c.client.Close()
		if c.server != nil {
			c.server.Close()
		}
		delete(p.conns, c)
	}
}

func (p *Proxy) acceptLoop() {
	for {
		client, err := p.listener.Accept()
		if err != nil {
			return // closed
		}
		c := &proxiedConn{client: client, lastFromClient: time.Now()}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			client.Close()
			return
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.serve(c) })
	}
}

// serve dials the apiserver once forwarding is allowed and copies both ways.
func (p *Proxy) serve(c *proxiedConn) {
	// A connection accepted during a partition is held without dialing: the client's
	// TLS handshake hangs as it would if its SYN got through but nothing else.
	if !p.waitForwarding(c) {
		return
	}
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	p.mu.Lock()
	if err != nil || c.dropped {
		p.mu.Unlock()
		if server != nil {
			server.Close()
		}
		p.forget(c)
		return
	}
	c.server = server
	p.mu.Unlock()

	var copies sync.WaitGroup
	copies.Go(func() { p.copy(c, server, c.client, true) })
	copies.Go(func() { p.copy(c, c.client, server, false) })
	copies.Wait()
	p.forget(c)
}

// copy forwards src to dst chunk by chunk, holding each chunk while blackholed and
// throwing it away once the connection is cut. When src ends, it half-closes dst so the
// other side sees the end of the stream, unless the connection is cut: then nothing
// reaches the client, and the client's own close is recorded.
func (p *Proxy) copy(c *proxiedConn, dst, src net.Conn, fromClient bool) {
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			switch p.forwarding(c, fromClient) {
			case stop:
				return
			case discard:
			case forward:
				if _, werr := dst.Write(buf[:n]); werr != nil {
					dst.Close()
					src.Close()
					return
				}
			}
		}
		if err != nil {
			if p.endCut(c, fromClient) {
				return
			}
			if errors.Is(err, io.EOF) {
				if tcp, ok := dst.(*net.TCPConn); ok {
					_ = tcp.CloseWrite()
					return
				}
			}
			dst.Close()
			src.Close()
			return
		}
	}
}

// verdict is what copy does with a chunk it read.
type verdict int

const (
	forward verdict = iota
	discard
	stop
)

// forwarding notes the client's activity and decides what becomes of a chunk read from
// one end: forwarded, thrown away (a cut connection) or, once the connection was
// dropped, nothing more. While blackholed it blocks.
func (p *Proxy) forwarding(c *proxiedConn, fromClient bool) verdict {
	p.mu.Lock()
	defer p.mu.Unlock()
	if fromClient && c.cutAt.IsZero() {
		c.lastFromClient = time.Now()
	}
	for {
		switch {
		case c.dropped:
			return stop
		case !c.cutAt.IsZero():
			return discard
		case !p.blackholed:
			return forward
		}
		p.changed.Wait()
	}
}

// endCut handles the end of one direction of a cut connection and reports whether the
// connection was cut. The client's end (it closed or reset the connection) is recorded
// and ends the whole connection; the apiserver's end is not passed on, so the client
// keeps waiting, as it would behind a dead load balancer.
func (p *Proxy) endCut(c *proxiedConn, fromClient bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.cutAt.IsZero() {
		return false
	}
	if fromClient && !c.dropped {
		c.closedByClient = time.Now()
		c.dropped = true
		c.client.Close()
		c.server.Close()
		p.changed.Broadcast()
	}
	return true
}

// waitForwarding blocks while the proxy is blackholed and reports whether the
// connection may carry on (false once it was dropped).
func (p *Proxy) waitForwarding(c *proxiedConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.blackholed && !c.dropped {
		p.changed.Wait()
	}
	return !c.dropped
}

func (p *Proxy) forget(c *proxiedConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.conns[c]; ok {
		delete(p.conns, c)
		c.client.Close()
		if c.server != nil {
			c.server.Close()
		}
	}
}

// startEchoProxy starts a proxy in front of an echo server, which stands in for the
// apiserver; both stop when the test ends.
func startEchoProxy(t *testing.T) *Proxy {
	t.Helper()
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { echo.Close() })
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	p, err := StartProxy(echo.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// echoRoundTrip sends msg over c and reads it back from the echo server behind the
// proxy, within half a second.
func echoRoundTrip(c net.Conn, msg string) error {
	if err := c.SetDeadline(time.Now().Add(500 * time.Millisecond)); err != nil {
		return err
	}
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != msg {
		return fmt.Errorf("echoed %q, want %q", buf, msg)
	}
	return nil
}

// dialProxy opens a connection through p, closed when the test ends.
func dialProxy(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestProxyForwardsHoldsWhileBlackholedAndDropsHeldConnectionsOnHeal(t *testing.T) {
	p := startEchoProxy(t)

	before := dialProxy(t, p)
	if err := echoRoundTrip(before, "hello"); err != nil {
		t.Fatalf("forwarding: %v", err)
	}

	p.Blackhole()
	var netErr net.Error
	if err := echoRoundTrip(before, "lost"); !errors.As(err, &netErr) || !netErr.Timeout() {
		t.Fatalf("while blackholed, an open connection got %v, want a timeout (held, not closed)", err)
	}
	during := dialProxy(t, p)
	if err := echoRoundTrip(during, "lost too"); !errors.As(err, &netErr) || !netErr.Timeout() {
		t.Fatalf("while blackholed, a new connection got %v, want a timeout", err)
	}
	if n := p.Connections(); n != 2 {
		t.Fatalf("%d connections held, want 2", n)
	}

	p.Heal()
	for _, c := range []net.Conn{before, during} {
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if n, err := c.Read(make([]byte, 16)); err == nil {
			t.Fatalf("a connection held through the partition delivered %d bytes after Heal, want it closed", n)
		}
	}
	if err := echoRoundTrip(dialProxy(t, p), "again"); err != nil {
		t.Fatalf("a new connection after Heal: %v", err)
	}
}

func TestProxyCutsOnlyQuietConnectionsKeepsThemOpenAndRecordsTheClientsClose(t *testing.T) {
	p := startEchoProxy(t)

	quiet, busy := dialProxy(t, p), dialProxy(t, p)
	for _, c := range []net.Conn{quiet, busy} {
		if err := echoRoundTrip(c, "hello"); err != nil {
			t.Fatalf("forwarding: %v", err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if err := echoRoundTrip(busy, "still here"); err != nil {
		t.Fatalf("forwarding: %v", err)
	}
	if n := p.CutQuiet(200 * time.Millisecond); n != 1 {
		t.Fatalf("cut %d connections, want only the quiet one", n)
	}

	var netErr net.Error
	if err := echoRoundTrip(quiet, "lost"); !errors.As(err, &netErr) || !netErr.Timeout() {
		t.Fatalf("a cut connection got %v, want a timeout (silent, not closed)", err)
	}
	if err := echoRoundTrip(busy, "relayed"); err != nil {
		t.Fatalf("a connection that was not quiet: %v", err)
	}
	if err := echoRoundTrip(dialProxy(t, p), "new"); err != nil {
		t.Fatalf("a new connection after the cut: %v", err)
	}
	if closed, open := p.CutsClosedByClient(); len(closed) != 0 || open != 1 {
		t.Fatalf("before the client closed: %d closed, %d open; want 0 and 1", len(closed), open)
	}

	quiet.Close()
	framework.Eventually(t, 2*time.Second, func() error {
		if closed, open := p.CutsClosedByClient(); len(closed) != 1 || open != 0 {
			return fmt.Errorf("%d closed by the client, %d open; want 1 and 0", len(closed), open)
		}
		return nil
	})
}
