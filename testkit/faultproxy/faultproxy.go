// Package faultproxy is a TCP proxy a test controls: it forwards every
// connection it accepts to one upstream address and, on demand, stalls,
// drops or resets them, the network faults between a service and NATS,
// etcd or Redis that the chaos tests inject.
//
// A stall is a partition that heals: bytes stop flowing both ways and new
// connections wait, nothing is lost, and everything flows again when the
// proxy passes once more (TCP's retransmissions would do the same across a
// real partition shorter than its timeouts). A drop closes every
// connection and closes new ones at once (a peer that went away); a reset
// aborts them with a TCP RST (a peer that crashed or a middlebox that
// forgot them).
package faultproxy

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Mode is what the proxy does with connections.
type Mode int32

const (
	// Pass forwards bytes both ways.
	Pass Mode = iota
	// Stall holds bytes and new connections until the mode changes.
	Stall
	// Drop closes every connection (FIN) and new ones at once.
	Drop
	// Reset aborts every connection (RST) and new ones at once.
	Reset
)

func (m Mode) String() string {
	switch m {
	case Pass:
		return "pass"
	case Stall:
		return "stall"
	case Drop:
		return "drop"
	case Reset:
		return "reset"
	}
	return fmt.Sprintf("Mode(%d)", int32(m))
}

// dialTimeout bounds the dial to the upstream.
const dialTimeout = 5 * time.Second

// Proxy is a running proxy. Its methods are safe for concurrent use.
type Proxy struct {
	ln       net.Listener
	upstream string

	mu      sync.Mutex
	mode    Mode
	changed chan struct{} // closed and replaced on every mode change
	links   map[*link]struct{}
	closed  bool

	accepted atomic.Int64
	wg       sync.WaitGroup
}

// Start listens on listen (host:port; port 0 picks one) and forwards to
// upstream.
func Start(listen, upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen %s: %w", listen, err)
	}
	p := &Proxy{ln: ln, upstream: upstream, changed: make(chan struct{}), links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the host:port clients dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Upstream is the address the proxy forwards to.
func (p *Proxy) Upstream() string { return p.upstream }

// Mode is the current mode.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// Accepted is the number of connections accepted so far.
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

// Active is the number of connections open now.
func (p *Proxy) Active() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// Set changes the mode. Drop and Reset end every open connection at once;
// Stall holds them; Pass releases what a stall held.
func (p *Proxy) Set(m Mode) {
	p.mu.Lock()
	p.mode = m
	close(p.changed)
	p.changed = make(chan struct{})
	var ending []*link
	if m == Drop || m == Reset {
		for l := range p.links {
			ending = append(ending, l)
		}
	}
	p.mu.Unlock()
	for _, l := range ending {
		l.end(m == Reset)
	}
}

// For sets m for d, then passes again; it returns when the fault is over
// or ctx ends (passing again then too).
func (p *Proxy) For(ctx context.Context, m Mode, d time.Duration) {
	p.Set(m)
	defer p.Set(Pass)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// Close stops listening, ends every connection and waits for the proxy's
// goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.changed)
	p.changed = make(chan struct{})
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	for _, l := range links {
		l.end(false)
	}
	p.wg.Wait()
	return err
}

// waitPass blocks while the proxy stalls; it reports false when the
// connection must end instead (dropped, reset, closed).
func (p *Proxy) waitPass(l *link) bool {
	for {
		p.mu.Lock()
		mode, closed, changed := p.mode, p.closed, p.changed
		p.mu.Unlock()
		switch {
		case closed || l.ended.Load():
			return false
		case mode == Pass:
			return true
		case mode == Drop || mode == Reset:
			l.end(mode == Reset)
			return false
		}
		select {
		case <-changed:
		case <-l.done:
			return false
		}
	}
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		l := &link{client: c, done: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = c.Close()
			return
		}
		p.links[l] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(1)
		go p.serve(l)
	}
}

// serve dials the upstream once the proxy passes, then copies both ways
// until either side ends or the proxy ends the link.
func (p *Proxy) serve(l *link) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.links, l)
		p.mu.Unlock()
		l.end(false)
	}()
	if !p.waitPass(l) {
		return
	}
	up, err := net.DialTimeout("tcp", p.upstream, dialTimeout)
	if err != nil {
		return
	}
	if !l.attach(up) {
		_ = up.Close()
		return
	}
	var copies sync.WaitGroup
	copies.Add(2)
	go func() { defer copies.Done(); p.pipe(l, up, l.client) }()
	go func() { defer copies.Done(); p.pipe(l, l.client, up) }()
	copies.Wait()
}

// pipe copies src to dst through the proxy's gate; the first side to end
// (EOF or an error) ends the link: the protocols proxied here do not
// half-close.
func (p *Proxy) pipe(l *link, dst, src net.Conn) {
	defer l.end(false)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.waitPass(l) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// link is one proxied connection.
type link struct {
	client net.Conn
	done   chan struct{}
	ended  atomic.Bool

	mu       sync.Mutex
	upstream net.Conn
}

// attach sets the upstream connection; false when the link already ended.
func (l *link) attach(up net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended.Load() {
		return false
	}
	l.upstream = up
	return true
}

// end closes both sides once; with reset the client side is aborted with
// an RST.
func (l *link) end(reset bool) {
	if !l.ended.CompareAndSwap(false, true) {
		return
	}
	close(l.done)
	if reset {
		if tc, ok := l.client.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
	}
	_ = l.client.Close()
	l.mu.Lock()
	up := l.upstream
	l.mu.Unlock()
	if up != nil {
		if tc, ok := up.(*net.TCPConn); ok && reset {
			_ = tc.SetLinger(0)
		}
		_ = up.Close()
	}
}
