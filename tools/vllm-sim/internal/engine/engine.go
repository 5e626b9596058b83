package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hermod/hermod/libs/kv/events"
)

// Clock maps wall time to simulated time.
type Clock interface {
	// Now is the simulated time since the clock started.
	Now() time.Duration
	// SleepUntil blocks until simulated time t; it returns false if ctx
	// ended first.
	SleepUntil(ctx context.Context, t time.Duration) bool
}

// WallClock runs simulated time Speed times faster than the wall clock.
type WallClock struct {
	start time.Time
	speed float64
}

// NewWallClock starts a clock at simulated time 0 running speed times
// faster than real time.
func NewWallClock(speed float64) *WallClock {
	return &WallClock{start: time.Now(), speed: speed}
}

// Now implements Clock.
func (c *WallClock) Now() time.Duration {
	return time.Duration(float64(time.Since(c.start)) * c.speed)
}

// Speed returns how much faster than real time the clock runs.
func (c *WallClock) Speed() float64 { return c.speed }

// Wall converts a simulated duration to wall-clock time.
func (c *WallClock) Wall(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.speed)
}

// SleepUntil implements Clock. It sleeps to an absolute deadline, so time
// lost to timer latency in one step is made up in the next.
func (c *WallClock) SleepUntil(ctx context.Context, t time.Duration) bool {
	wait := time.Until(c.start.Add(time.Duration(float64(t) / c.speed)))
	if wait <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// EventSink receives the KV-cache events of each engine step that has any,
// in order, with the step's end (simulated). The slice is reused after the
// call returns.
type EventSink func(evs []events.Event, at time.Duration)

// ErrRestarted is the error of sequences dropped by a restart.
var ErrRestarted = errors.New("the engine restarted")

// Engine runs a core in simulated time. Its methods are safe for concurrent
// use.
type Engine struct {
	clock Clock
	sink  EventSink

	mu   sync.Mutex
	core *core
	now  time.Duration // simulated time the engine has reached
	kick chan struct{}
}

// New returns an engine; Run drives it.
func New(cfg Config, clock Clock, obs Observer, sink EventSink) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Engine{clock: clock, sink: sink, core: newCore(cfg, obs), kick: make(chan struct{}, 1)}, nil
}

// Config returns the engine's configuration.
func (e *Engine) Config() Config { return e.core.cfg }

// Submit queues a request. It fails (a client error) when the request
// cannot be served: an empty or too long prompt, too many tokens asked, an
// unknown adapter.
func (e *Engine) Submit(req Request) (*Sequence, error) {
	e.mu.Lock()
	// The clock's time is the arrival's true simulated time: steps only
	// admit requests that arrived by their start, so an engine catching up
	// after a scheduling hiccup cannot serve a request before it arrived.
	s, err := e.core.newSequence(req, e.clock.Now())
	if err == nil {
		e.core.add(s)
	}
	e.mu.Unlock()
	if err != nil {
		return nil, err
	}
	e.wake()
	return s, nil
}

// wake tells the engine loop that work arrived.
func (e *Engine) wake() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// SubmitGroup queues the sequences of one request that asks for several
// outputs (vLLM's n > 1, which it runs as n child requests of one
// parent): reqs share the prompt and adapter and differ in their seeds
// (or outputs). They are queued together, in order, and share one Updates
// channel; each after the first takes the prompt blocks the first has
// cached or computes in the same step, as vLLM's children share theirs. It
// fails, queuing none, when any cannot be served.
func (e *Engine) SubmitGroup(reqs []Request) ([]*Sequence, error) {
	e.mu.Lock()
	seqs, err := e.core.newGroup(reqs, e.clock.Now())
	if err == nil {
		for _, s := range seqs {
			e.core.add(s)
		}
	}
	e.mu.Unlock()
	if err != nil {
		return nil, err
	}
	e.wake()
	return seqs, nil
}

// Abort drops a sequence (its client went away).
func (e *Engine) Abort(s *Sequence) {
	e.mu.Lock()
	e.core.abort(s)
	e.mu.Unlock()
	e.wake()
}

// Restart drops every sequence (they fail with ErrRestarted) and empties
// the KV cache, emitting AllBlocksCleared.
func (e *Engine) Restart() {
	e.mu.Lock()
	evs := e.core.reset(ErrRestarted)
	at := e.now
	e.mu.Unlock()
	if e.sink != nil {
		e.sink(evs, at)
	}
}

// Snapshot is the engine state the metrics report.
type Snapshot struct {
	Running, Waiting int
	KVCacheUsage     float64
	RunningAdapters  []string
	WaitingAdapters  []string
}

// Snapshot returns the current state.
func (e *Engine) Snapshot() Snapshot {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := Snapshot{Running: len(e.core.running), Waiting: len(e.core.waiting), KVCacheUsage: e.core.pool.usage()}
	s.RunningAdapters, s.WaitingAdapters = e.core.adapters()
	return s
}

// ErrStopped is the error of sequences still in the engine when it stops.
var ErrStopped = errors.New("the engine stopped")

// stop fails every sequence still in the engine (their readers return).
func (e *Engine) stop() {
	e.mu.Lock()
	e.core.reset(ErrStopped)
	e.mu.Unlock()
}

// await unlocks e.mu and waits for a kick (true) or for ctx to end
// (false: the engine is stopped).
func (e *Engine) await(ctx context.Context) bool {
	e.mu.Unlock()
	select {
	case <-e.kick:
		return true
	case <-ctx.Done():
		e.stop()
		return false
	}
}

// Run advances the engine until ctx ends: each step is planned, slept
// through in simulated time, then committed. Sequences still in the engine
// when it stops fail with ErrStopped.
func (e *Engine) Run(ctx context.Context) error {
	e.mu.Lock()
	e.now = max(e.now, e.clock.Now())
	e.mu.Unlock()
	for {
		e.mu.Lock()
		if e.core.idle() {
			if !e.await(ctx) {
				return nil
			}
			continue
		}
		start := e.core.idleStart(e.now)
		e.now = start
		d, ok := e.core.plan(start)
		if !ok {
			// work that cannot start (no blocks, no adapter slot): wait for
			// a change rather than spin
			if !e.await(ctx) {
				return nil
			}
			continue
		}
		e.mu.Unlock()
		end := start + d
		if !e.clock.SleepUntil(ctx, end) {
			e.stop()
			return nil // ctx ended
		}
		e.mu.Lock()
		evs := e.core.commit(end)
		e.now = end
		e.mu.Unlock()
		// Only this goroutine commits, so evs stays intact while the sink
		// (which may publish over the network) runs without the lock.
		if len(evs) > 0 && e.sink != nil {
			e.sink(evs, end)
		}
	}
}
