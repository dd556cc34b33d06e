package ha

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// DelayProxy is a loopback TCP proxy that delivers what the apiserver sends a
// replica a settable delay late, and what the replica sends at once. Put in front of a
// replica's informer connection only (caches.InformerAddressEnv), it makes the replica's
// watches lag behind the apiserver by the delay, as a loaded apiserver, a watch cache
// behind etcd or a slow link does, while its Lease traffic flows normally. Bytes pass
// untouched and in order, so TLS and HTTP/2 work through it.
type DelayProxy struct {
	listener net.Listener
	target   string
	delay    atomic.Int64
	// delaySince is when SetDelay was called, in UnixNano; connections accepted
	// before it are delayed.
	delaySince atomic.Int64
	wg         sync.WaitGroup

	mu     sync.Mutex
	conns  []net.Conn
	closed bool
}

// StartDelayProxy listens on a free loopback port and forwards to target (host:port),
// without delay until SetDelay.
func StartDelayProxy(target string) (*DelayProxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for the delay proxy: %w", err)
	}
	p := &DelayProxy{listener: l, target: target}
	p.wg.Go(p.acceptLoop)
	return p, nil
}

// Addr returns the proxy's host:port.
func (p *DelayProxy) Addr() string { return p.listener.Addr().String() }

// SetDelay delays every byte from the apiserver received from now on, on the
// connections open now, by d; bytes already waiting keep their order and are sent no
// earlier than their own due time.
func (p *DelayProxy) SetDelay(d time.Duration) {
	p.delaySince.Store(time.Now().UnixNano())
	p.delay.Store(int64(d))
}

// Close stops the proxy and ends every connection.
func (p *DelayProxy) Close() {
	p.mu.Lock()
	p.closed = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	_ = p.listener.Close()
	p.wg.Wait()
}

func (p *DelayProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns = append(p.conns, c)
	return true
}

func (p *DelayProxy) acceptLoop() {
	for {
		client, err := p.listener.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.serve(client) })
	}
}

// chunk is bytes read from the apiserver and when they are due at the client.
type chunk struct {
	data []byte
	due  time.Time
}

func (p *DelayProxy) serve(client net.Conn) {
	accepted := time.Now().UnixNano()
	if !p.track(client) {
		return
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	if !p.track(server) {
		_ = client.Close()
		return
	}
	defer client.Close()
	defer server.Close()
	var relays sync.WaitGroup
	// Replica → apiserver: at once.
	relays.Go(func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := client.Read(buf)
			if n > 0 {
				if _, werr := server.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		_ = server.Close()
	})
	// Apiserver → replica: each read is queued with its due time and written then.
	queue := make(chan chunk, 1<<16)
	relays.Go(func() {
		defer close(queue)
		buf := make([]byte, 32<<10)
		for {
			n, err := server.Read(buf)
			if n > 0 {
				var delay time.Duration
				if since := p.delaySince.Load(); since != 0 && accepted < since {
					delay = time.Duration(p.delay.Load())
				}
				queue <- chunk{data: append([]byte(nil), buf[:n]...), due: time.Now().Add(delay)}
			}
			if err != nil {
				return
			}
		}
	})
	for c := range queue {
		time.Sleep(time.Until(c.due))
		if _, err := client.Write(c.data); err != nil {
			break
		}
	}
	_ = client.Close()
	relays.Wait()
}
