package stack

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hermod/hermod/libs/retry"
	"github.com/hermod/hermod/tools/devstack/stackstate"
)

// restartPolicy is how the supervisor restarts children, as a kubelet
// does under restartPolicy Always: a child that exits, whatever its
// status, starts again with the same arguments (so on the same ports)
// after a backoff that doubles from minBackoff to maxBackoff and starts
// over once a run was ready for resetAfter.
type restartPolicy struct {
	minBackoff, maxBackoff time.Duration
	resetAfter             time.Duration
	// startAttempts: a child that exits this many times without ever
	// having been ready cannot start, and the stack stops with its error.
	startAttempts int
	// probeEvery and probeTimeout pace the readiness probe after each
	// start.
	probeEvery, probeTimeout time.Duration
	// liveEvery and liveTimeout pace the liveness probe once a child is
	// ready; liveFailures failures in a row kill it (SIGKILL to its group),
	// and it restarts like any child that exits: a hung child that stays
	// alive is not left hanging.
	liveEvery, liveTimeout time.Duration
	liveFailures           int
	// stopGrace is how long a stopped child has between SIGTERM and
	// SIGKILL.
	stopGrace time.Duration
}

var defaultRestartPolicy = restartPolicy{
	minBackoff:    200 * time.Millisecond,
	maxBackoff:    10 * time.Second,
	resetAfter:    30 * time.Second,
	startAttempts: 3,
	probeEvery:    100 * time.Millisecond,
	probeTimeout:  time.Second,
	// As a kubelet's defaults (10 s, 1 s, 3) but quicker, and with room
	// for a loaded machine: a child that stops answering is killed after
	// 6-8 s.
	liveEvery:    2 * time.Second,
	liveTimeout:  2 * time.Second,
	liveFailures: 3,
	stopGrace:    10 * time.Second,
}

// probe is a child's readiness or liveness check.
type probe struct {
	desc  string // as the state file shows it
	check func(ctx context.Context) error
}

// probeClient makes no keep-alive connections: a probe is a few requests
// per start, and idle connections would outlive the stack.
var probeClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// httpProbe is ready once url answers 200.
func httpProbe(url string) *probe { return httpProbeWith(url, probeClient) }

// httpProbeWith is httpProbe with a client of its own (HTTPS).
func httpProbeWith(url string, client *http.Client) *probe {
	return &probe{desc: url, check: func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	}}
}

// redisProbe is ready once a Redis/Valkey server at addr answers PING.
func redisProbe(addr string) *probe {
	return &probe{desc: "redis-ping " + addr, check: func(ctx context.Context) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		defer func() { _ = c.Close() }()
		if dl, ok := ctx.Deadline(); ok {
			_ = c.SetDeadline(dl)
		}
		buf := make([]byte, 7)
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			return err
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			return err
		}
		if string(buf) != "+PONG\r\n" {
			return fmt.Errorf("%s answered %q to PING", addr, buf)
		}
		return nil
	}}
}

// childSpec is what a child runs: the same on every restart.
type childSpec struct {
	name, role string
	bin        string
	args, env  []string
	ports      map[string]int
	probe      *probe // nil: ready once started
	// live is the liveness probe once ready (nil: none).
	live *probe
	// noRestart leaves the child down once it exits (--no-restart).
	noRestart bool
}

// supervisor runs children and restarts them when they exit.
type supervisor struct {
	log    *slog.Logger
	out    *lineWriter
	policy restartPolicy
	// changed is called after every change of a child's state (a start,
	// a ready probe, an exit), outside the supervisor's locks.
	changed func()

	failOnce sync.Once
	failed   chan struct{} // closed with failure set: a child cannot start
	failure  error

	mu       sync.Mutex
	children []*child // in start order
	wg       sync.WaitGroup
}

func newSupervisor(log *slog.Logger, out *lineWriter, policy restartPolicy, changed func()) *supervisor {
	if changed == nil {
		changed = func() {}
	}
	return &supervisor{log: log, out: out, policy: policy, changed: changed, failed: make(chan struct{})}
}

// child is one supervised child: its current process, its restarts.
type child struct {
	spec     childSpec
	sup      *supervisor
	ctx      context.Context // ends when the child is stopped
	cancel   context.CancelFunc
	finished chan struct{} // closed when its supervision has returned
	ready    chan struct{} // closed once it first passed its probe
	stopOnce sync.Once
	stopErr  error

	mu         sync.Mutex
	proc       *proc // the current or last process
	state      string
	restarts   int
	everReady  bool
	readySince time.Time
	lastExit   string
	lastExitAt time.Time
	// unresponsive says why the liveness probe killed the current
	// process ("" when it did not).
	unresponsive string
}

// start starts spec's process and supervises it. An error is the first
// start's: the stack cannot run the child at all.
func (s *supervisor) start(spec childSpec) (*child, error) {
	p, err := start(spec.name, s.out, spec.env, spec.bin, spec.args...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &child{spec: spec, sup: s, ctx: ctx, cancel: cancel, finished: make(chan struct{}), ready: make(chan struct{}),
		proc: p, state: stackstate.ChildStarting}
	s.mu.Lock()
	s.children = append(s.children, c)
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		c.run(p)
	}()
	s.changed()
	return c, nil
}

// fail records the first child that cannot start: the stack stops.
func (s *supervisor) fail(err error) {
	s.failOnce.Do(func() {
		s.failure = err
		close(s.failed)
	})
}

// err is the failure once failed is closed.
func (s *supervisor) err() error {
	select {
	case <-s.failed:
		return s.failure
	default:
		return nil
	}
}

// awaitReady waits until each of children has been ready once, a child
// cannot start, ctx ends or within passes.
func (s *supervisor) awaitReady(ctx context.Context, within time.Duration, children ...*child) error {
	t := time.NewTimer(within)
	defer t.Stop()
	for i, c := range children {
		select {
		case <-c.ready:
		case <-c.finished: // stopped (a fleet's pod scaled away), or failed
			if err := s.err(); err != nil {
				return err
			}
		case <-s.failed:
			return s.failure
		case <-ctx.Done():
			return fmt.Errorf("interrupted while starting: %w", ctx.Err())
		case <-t.C:
			var waiting []string
			for _, c := range children[i:] {
				select {
				case <-c.ready:
				default:
					waiting = append(waiting, c.spec.name)
				}
			}
			return fmt.Errorf("not ready after %s: %s", within, strings.Join(waiting, ", "))
		}
	}
	return nil
}

// snapshot is every child's state, in start order.
func (s *supervisor) snapshot() []stackstate.Child {
	s.mu.Lock()
	children := append([]*child(nil), s.children...)
	s.mu.Unlock()
	out := make([]stackstate.Child, 0, len(children))
	for _, c := range children {
		out = append(out, c.snapshot())
	}
	return out
}

// remove stops c and forgets it (a fleet's pod scaled away).
func (s *supervisor) remove(ctx context.Context, c *child) error {
	err := c.stop(ctx)
	s.mu.Lock()
	if i := indexOf(s.children, c); i >= 0 {
		s.children = append(s.children[:i], s.children[i+1:]...)
	}
	s.mu.Unlock()
	s.changed()
	return err
}

func indexOf(cs []*child, c *child) int {
	for i, x := range cs {
		if x == c {
			return i
		}
	}
	return -1
}

// stopAll stops the children, the last started first, and waits for
// their supervision to end.
func (s *supervisor) stopAll(ctx context.Context) []error {
	s.mu.Lock()
	children := append([]*child(nil), s.children...)
	s.mu.Unlock()
	var errs []error
	for i := len(children) - 1; i >= 0; i-- {
		if err := children[i].stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	s.wg.Wait()
	return errs
}

// run supervises the child from its first process p until it is
// stopped, or cannot start.
func (c *child) run(p *proc) {
	defer close(c.finished)
	pol := c.sup.policy
	log := c.sup.log.With("child", c.spec.name, "role", c.spec.role)
	bo := retry.Backoff(pol.minBackoff, pol.maxBackoff)
	failures := 0 // exits before it was ever ready
	var startErr error
	for {
		var status, output string
		pid := 0
		var ran time.Duration
		if p != nil {
			if !c.watch(p) {
				return // stopped
			}
			status, output, pid, ran = p.exitStatus(), p.lastOutput(), p.pid(), time.Since(p.started)
			c.mu.Lock()
			if c.unresponsive != "" {
				status += " (" + c.unresponsive + ")"
				c.unresponsive = ""
			}
			c.mu.Unlock()
		} else {
			status = startErr.Error()
		}
		healthy, everReady := c.exited(status)
		if !everReady {
			if failures++; failures >= pol.startAttempts {
				err := fmt.Errorf("%s exited while starting, %d times in a row without becoming ready (last: %s)", c.spec.name, failures, status)
				if output != "" {
					err = fmt.Errorf("%w:\n%s", err, output)
				}
				c.setState(stackstate.ChildFailed)
				c.sup.fail(err)
				return
			}
		}
		if healthy {
			bo.Reset()
		}
		if c.spec.noRestart && everReady {
			log.Warn("child exited; not restarted (--no-restart)", "pid", pid, "status", status, "ran", ran.Round(time.Millisecond))
			c.setState(stackstate.ChildExited)
			return
		}
		delay := bo.NextBackOff()
		c.mu.Lock()
		restarts := c.restarts
		c.mu.Unlock()
		log.Warn("child exited; restarting", "pid", pid, "status", status, "ran", ran.Round(time.Millisecond),
			"restarts", restarts, "backoff", delay.Round(time.Millisecond))
		c.setState(stackstate.ChildBackoff)
		if !retry.Sleep(c.ctx, delay) {
			return
		}
		p, startErr = start(c.spec.name, c.sup.out, c.spec.env, c.spec.bin, c.spec.args...)
		c.mu.Lock()
		c.restarts++
		if p != nil {
			c.proc, c.state = p, stackstate.ChildStarting
		}
		restarts = c.restarts
		c.mu.Unlock()
		if p != nil {
			log.Info("child restarted", "pid", p.pid(), "restarts", restarts)
			c.sup.changed()
		}
	}
}

// watch probes p's readiness until it passes, then its liveness, and
// waits for p to exit; it returns false when the child is stopped first.
// A process that fails the liveness probe the policy's number of times in
// a row is killed (its exit then restarts it).
func (c *child) watch(p *proc) bool {
	pol := c.sup.policy
	live := c.spec.live
	if pol.liveEvery <= 0 || pol.liveFailures <= 0 {
		live = nil // a policy without liveness probing
	}
	var tick <-chan time.Time
	var t *time.Ticker
	if c.spec.probe == nil {
		c.becameReady()
		if live != nil {
			t = time.NewTicker(pol.liveEvery)
			tick = t.C
		}
	} else {
		t = time.NewTicker(pol.probeEvery)
		tick = t.C
	}
	if t != nil {
		defer t.Stop()
	}
	ready := c.spec.probe == nil
	failures := 0
	for {
		select {
		case <-p.done:
			return true
		case <-c.ctx.Done():
			return false
		case <-tick:
		}
		if !ready {
			ctx, cancel := context.WithTimeout(c.ctx, pol.probeTimeout)
			err := c.spec.probe.check(ctx)
			cancel()
			if err != nil {
				continue
			}
			ready = true
			c.becameReady()
			if live == nil {
				tick = nil
			} else {
				t.Reset(pol.liveEvery)
			}
			continue
		}
		ctx, cancel := context.WithTimeout(c.ctx, pol.liveTimeout)
		err := live.check(ctx)
		cancel()
		if err == nil || c.ctx.Err() != nil {
			failures = 0
			continue
		}
		failures++
		c.sup.log.Warn("child failed its liveness probe", "child", c.spec.name, "role", c.spec.role, "pid", p.pid(),
			"failures", failures, "of", pol.liveFailures, "probe", live.desc, "error", err)
		if failures >= pol.liveFailures {
			c.mu.Lock()
			c.unresponsive = fmt.Sprintf("liveness probe failed %d times: %v", failures, err)
			c.mu.Unlock()
			p.signal(syscall.SIGKILL)
			tick = nil // its exit comes next
		}
	}
}

func (c *child) becameReady() {
	c.mu.Lock()
	c.state, c.readySince, c.everReady = stackstate.ChildReady, time.Now(), true
	restarts := c.restarts
	c.mu.Unlock()
	select {
	case <-c.ready:
	default:
		close(c.ready)
	}
	if restarts > 0 {
		c.sup.log.Info("child ready", "child", c.spec.name, "role", c.spec.role, "restarts", restarts)
	}
	c.sup.changed()
}

// exited records an exit; it says whether the run had been ready for the
// policy's resetAfter, and whether the child was ever ready.
func (c *child) exited(status string) (healthy, everReady bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	healthy = !c.readySince.IsZero() && time.Since(c.readySince) >= c.sup.policy.resetAfter
	c.readySince, c.lastExit, c.lastExitAt = time.Time{}, status, time.Now()
	return healthy, c.everReady
}

func (c *child) setState(state string) {
	c.mu.Lock()
	c.state = state
	c.mu.Unlock()
	c.sup.changed()
}

// stop ends the child's supervision, then stops its process: SIGTERM to
// its group, SIGKILL after the policy's grace.
func (c *child) stop(ctx context.Context) error {
	c.stopOnce.Do(func() {
		c.cancel()
		<-c.finished
		c.mu.Lock()
		p := c.proc
		c.mu.Unlock()
		c.stopErr = p.stop(ctx, c.sup.policy.stopGrace)
		c.mu.Lock()
		if c.state != stackstate.ChildFailed {
			c.state = stackstate.ChildExited
		}
		c.readySince = time.Time{}
		c.mu.Unlock()
	})
	return c.stopErr
}

// pid is the running process's id, 0 while the child is down.
func (c *child) pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != stackstate.ChildStarting && c.state != stackstate.ChildReady {
		return 0
	}
	return c.proc.pid()
}

func (c *child) snapshot() stackstate.Child {
	c.mu.Lock()
	defer c.mu.Unlock()
	sc := stackstate.Child{Name: c.spec.name, Role: c.spec.role, Ports: c.spec.ports, State: c.state, Restarts: c.restarts,
		LastStart: c.proc.started, ReadySince: c.readySince, LastExit: c.lastExit, LastExitAt: c.lastExitAt, Restart: !c.spec.noRestart}
	if c.spec.probe != nil {
		sc.Probe = c.spec.probe.desc
	}
	if c.spec.live != nil {
		sc.Liveness = c.spec.live.desc
	}
	if c.state == stackstate.ChildStarting || c.state == stackstate.ChildReady {
		sc.PID = c.proc.pid()
	}
	return sc
}

// restartSet is --no-restart: child names or roles left down once they
// exit.
type restartSet []string

func (r restartSet) excludes(name, role string) bool {
	for _, n := range r {
		if n == name || n == role {
			return true
		}
	}
	return false
}

// serviceAddrs are a service's addresses by use.
func serviceAddrs(svc stackstate.Service) map[string]string {
	addrs := map[string]string{"ops": svc.Ops}
	if svc.GRPC != "" {
		addrs["grpc"] = svc.GRPC
	}
	return addrs
}

// podAddrs are a vllm-sim pod's addresses: its HTTP server and its KV
// event sockets (kvPort and the replay socket on kvPort+1).
func podAddrs(http string, kvPort int) map[string]string {
	return map[string]string{"http": http, "kv": fmt.Sprintf("127.0.0.1:%d", kvPort), "kv_replay": fmt.Sprintf("127.0.0.1:%d", kvPort+1)}
}

// portsOf are the ports of addrs (host:port) by use.
func portsOf(addrs map[string]string) map[string]int {
	ports := make(map[string]int, len(addrs))
	for use, addr := range addrs {
		if _, port, err := net.SplitHostPort(addr); err == nil {
			if n, err := strconv.Atoi(port); err == nil {
				ports[use] = n
			}
		}
	}
	return ports
}

// probesFor are the readiness and liveness probes of a child of role. A
// pod is ready, and alive, while its /health answers; a gateway is ready
// once /ready on its API address answers (over HTTPS with api, the
// client that trusts the stack's CA), alive while /health there does;
// Valkey both while it answers PING; every other service is ready once
// /ready on its ops address answers and alive while /health there does
// (alive: the process answers at all, whatever its backends allow it to
// serve).
func probesFor(role string, addrs map[string]string, api *http.Client) (ready, live *probe) {
	var base string
	switch role {
	case stackstate.RolePod:
		p := httpProbe("http://" + addrs["http"] + "/health")
		return p, p
	case stackstate.RoleValkey:
		p := redisProbe(addrs["redis"])
		return p, p
	case stackstate.RoleGateway:
		if api != nil { // the API over HTTPS
			base = "https://" + addrs["http"]
			return httpProbeWith(base+"/ready", api), httpProbeWith(base+"/health", api)
		}
		base = "http://" + addrs["http"]
	default:
		if addrs["ops"] == "" {
			return nil, nil
		}
		base = "http://" + addrs["ops"]
	}
	return httpProbe(base + "/ready"), httpProbe(base + "/health")
}
