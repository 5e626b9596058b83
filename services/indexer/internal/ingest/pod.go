package ingest

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/kv/kvzmq"
	"github.com/hermod/hermod/libs/retry"
	"github.com/hermod/hermod/libs/telemetry"
)

// backoff is the part of retry.Backoff's result a pod uses.
type backoff interface {
	NextBackOff() time.Duration
	Reset()
}

// pod is the ingest of one pod. Its worker goroutine owns the sequencer:
// it takes the live batches off the pod's queue and asks the replay
// socket, so no receive loop ever waits on a replay. A pod that binds its
// own socket (Target.Events) also has a follower goroutine that receives
// from it; the centralized socket's loop delivers the others' batches.
type pod struct {
	mg  *Manager
	t   Target
	log *slog.Logger
	// owned: this replica owns the pod (it catches it up at start, asks
	// its replay socket while it is quiet and reports it when silent);
	// otherwise the pod's events only reach this replica's centralized
	// socket, and its batches are repaired and handed on. Changed under
	// mg.mu.
	owned atomic.Bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	live   chan kvzmq.Message
	kick   chan struct{}

	// the worker's
	seq    sequencer
	last   seqStats
	bo     backoff
	pollAt time.Time // the next ask of the replay socket (zero: none)

	// since is when this replica began to ingest the pod; when (unix
	// nanoseconds, 0: never) it was last heard live off this replica's
	// socket, on the stream through another replica, when its replay
	// socket last answered and last delivered batches
	since                                       time.Time
	liveAt, elsewhereAt, checkedAt, recoveredAt atomic.Int64

	obsMu  sync.Mutex
	obsSeq uint64 // the last engine seq another replica put on the stream
	obsNew bool

	replayLog, silenceLog telemetry.FailureLog
}

// startPod starts a pod's ingest. The caller holds mg.mu.
func (mg *Manager) startPod(t Target, owned bool) *pod {
	ctx, cancel := context.WithCancel(context.Background())
	log := mg.log.With("pod", t.Pod)
	if t.Events != "" {
		log = log.With("events", t.Events)
	}
	p := &pod{
		mg: mg, t: t, log: log, ctx: ctx, cancel: cancel,
		live: make(chan kvzmq.Message, mg.cfg.PodQueue), kick: make(chan struct{}, 1),
		bo: retry.Backoff(mg.cfg.IdleCheck, mg.cfg.PollMax), since: time.Now(),
		replayLog:  telemetry.FailureLog{Log: log},
		silenceLog: telemetry.FailureLog{Log: log, Every: mg.cfg.SilentLogInterval},
	}
	p.owned.Store(owned)
	p.seq = sequencer{replay: p.replay, emit: p.emit}
	resume := t.Resume
	if resume == nil && mg.cfg.Position != nil {
		if seq, ok := mg.cfg.Position(t.Pod); ok {
			resume = &seq
		}
	}
	if resume != nil {
		p.seq.started, p.seq.next, p.seq.lastLive = true, *resume+1, *resume
	}
	if owned && t.Replay != "" && t.Events == "" {
		// catch up at once; a pod followed over its own socket is caught
		// up once subscribed (nothing published after that is missed)
		p.pollAt = p.since
	}
	p.wg.Add(1)
	go p.work()
	if owned && t.Events != "" {
		p.wg.Add(1)
		go p.follow()
	}
	return p
}

// stopAll stops pods, all at once, and waits for them.
func stopAll(ps []*pod) {
	for _, p := range ps {
		p.cancel()
	}
	for _, p := range ps {
		p.wg.Wait()
	}
}

// poke asks the worker to ask the replay socket now.
func (p *pod) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// observe records a batch of the pod that another replica put on the
// stream.
func (p *pod) observe(seq uint64) {
	p.obsMu.Lock()
	p.obsSeq, p.obsNew = seq, true
	p.obsMu.Unlock()
	p.elsewhereAt.Store(time.Now().UnixNano())
}

// work is the pod's worker: live batches, and asks of the replay socket
// when they are due, until the pod is stopped.
func (p *pod) work() {
	defer p.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		timer.Stop()
		if !p.pollAt.IsZero() {
			timer.Reset(max(time.Until(p.pollAt), 0))
		}
		select {
		case <-p.ctx.Done():
			return
		case m := <-p.live:
			p.onLive(m)
		case <-p.kick:
			p.poll()
		case <-timer.C:
			p.poll()
		}
	}
}

// onLive takes a batch off the pod's live socket.
func (p *pod) onLive(m kvzmq.Message) {
	now := time.Now()
	p.liveAt.Store(now.UnixNano())
	p.syncStream()
	p.seq.receive(m)
	p.countRepairs()
	if p.t.Replay != "" {
		// a gap is seen when a later batch arrives; batches lost at the
		// end of a burst are followed by none: when the pod pauses, ask
		// its replay socket for anything newer
		p.bo.Reset()
		p.pollAt = now.Add(p.mg.cfg.IdleCheck)
	}
}

// poll asks the pod's replay socket for the batches after the last one
// handed on (all it buffers, for a pod not started yet). A pod this
// replica owns is asked again, backing off exponentially while nothing
// new comes; a visitor once per pause.
func (p *pod) poll() {
	p.pollAt = time.Time{}
	if p.t.Replay == "" || p.ctx.Err() != nil {
		return
	}
	owned := p.owned.Load()
	now := time.Now()
	if at := p.elsewhereAt.Load(); owned && at > 0 && now.Sub(time.Unix(0, at)) < p.mg.cfg.IdleCheck {
		// live through another replica: it repairs the stream
		p.pollAt = time.Unix(0, at).Add(p.mg.cfg.IdleCheck)
		return
	}
	p.syncStream()
	before := p.seq.stats
	if p.seq.started {
		p.seq.resume()
	} else {
		p.seq.begin()
	}
	p.countRepairs()
	if p.ctx.Err() != nil {
		return
	}
	after, wait := p.seq.stats, time.Duration(0)
	switch {
	case after.replayFailures > before.replayFailures:
		p.mg.m.polls.WithLabelValues("failed").Inc()
		wait = p.bo.NextBackOff()
	case after.replays > before.replays:
		p.mg.m.polls.WithLabelValues("new").Inc()
		p.bo.Reset()
		wait = p.mg.cfg.IdleCheck
	default:
		p.mg.m.polls.WithLabelValues("nothing").Inc()
		wait = p.bo.NextBackOff()
	}
	if owned {
		p.pollAt = time.Now().Add(wait)
	}
}

// syncStream moves the sequencer past what other replicas put on the
// stream, so that it is not replayed again.
func (p *pod) syncStream() {
	p.obsMu.Lock()
	seq, ok := p.obsSeq, p.obsNew
	p.obsNew = false
	p.obsMu.Unlock()
	switch {
	case !ok:
	case !p.seq.started:
		p.seq.started, p.seq.next, p.seq.lastLive = true, seq+1, seq
	case seq+1 > p.seq.next:
		p.seq.next = seq + 1
	}
}

// follow subscribes to the pod's own socket (retrying with backoff) and
// hands what it receives to the worker until the pod is stopped.
func (p *pod) follow() {
	defer p.wg.Done()
	bo := retry.Backoff(100*time.Millisecond, 5*time.Second)
	subscribed := false
	for p.ctx.Err() == nil {
		sub, err := kvzmq.Subscribe(p.t.Events, false, p.t.Topic, p.mg.cfg.HWM)
		if err != nil {
			p.mg.m.errors.WithLabelValues("subscribe").Inc()
			d := bo.NextBackOff()
			p.log.Warn("cannot subscribe to the pod's KV events; retrying", "error", err, "in", d)
			if !retry.Sleep(p.ctx, d) {
				return
			}
			continue
		}
		p.log.Info("following the pod's KV events", "replay", p.t.Replay)
		if !subscribed {
			// nothing published from now on is missed, so what was
			// published before (while nobody followed) can be replayed
			subscribed = true
			p.poke()
		}
		p.receive(sub)
		_ = sub.Close()
	}
}

func (p *pod) receive(sub *kvzmq.Subscriber) {
	for p.ctx.Err() == nil {
		m, err := sub.Recv(pollInterval)
		if errors.Is(err, kvzmq.ErrTimeout) {
			continue
		}
		if err != nil {
			p.mg.m.errors.WithLabelValues("receive").Inc()
			p.log.Warn("dropped a malformed KV event message", "error", err)
			continue
		}
		select {
		case p.live <- m:
		case <-p.ctx.Done():
			return
		}
	}
}

// replay asks the pod's replay socket for its batches from seq from on.
// It ends within milliseconds of the pod being stopped.
func (p *pod) replay(from uint64) ([]kvzmq.Message, error) {
	if p.t.Replay == "" {
		return nil, errors.New("the pod offers no replay")
	}
	msgs, err := kvzmq.ReplayContext(p.ctx, p.t.Replay, from, p.mg.cfg.ReplayTimeout)
	if p.ctx.Err() != nil {
		return msgs, err
	}
	now := time.Now().UnixNano()
	if err != nil {
		p.replayLog.Failed(p.ctx, "KV event replay failed",
			slog.String("replay", p.t.Replay), slog.Uint64("from", from), slog.Int("got", len(msgs)), slog.Any("error", err))
	} else {
		p.checkedAt.Store(now)
		p.replayLog.Succeeded(p.ctx, "the pod's replay socket answers again", slog.String("replay", p.t.Replay))
		p.log.Debug("replayed KV events", "from", from, "got", len(msgs))
	}
	if len(msgs) > 0 {
		p.recoveredAt.Store(now)
	}
	return msgs, err
}

func (p *pod) emit(m kvzmq.Message, reset bool) {
	if p.ctx.Err() != nil {
		// stopping: a replay cut short must not start the pod afresh
		return
	}
	p.mg.m.batches.Inc()
	if reset {
		p.mg.m.resets.Inc()
		p.log.Info("starting the pod's blocks afresh", "seq", m.Seq)
	}
	p.mg.cfg.Sink.Emit(&eventsv1.KVEventBatch{
		Pool: p.mg.cfg.Pool, Pod: p.t.Pod, Model: p.t.Model, Seq: m.Seq, Payload: m.Payload, ClearPod: reset,
		Received: timestamppb.Now(), Replica: p.mg.cfg.Replica,
	})
}

// countRepairs moves the sequencer's new counts to the metrics.
func (p *pod) countRepairs() {
	s, l := p.seq.stats, p.last
	add := func(kind string, now, before uint64) {
		if now > before {
			p.mg.m.repairs.WithLabelValues(kind).Add(float64(now - before))
		}
	}
	add("gap", s.gaps, l.gaps)
	add("replay", s.replays, l.replays)
	add("replay_failure", s.replayFailures, l.replayFailures)
	add("history_lost", s.historyLost, l.historyLost)
	add("restart", s.restarts, l.restarts)
	add("duplicate", s.duplicates, l.duplicates)
	p.last = s
}
