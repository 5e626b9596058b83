package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/kv/kvzmq"
	"github.com/hermod/hermod/libs/retry"
	"github.com/hermod/hermod/libs/telemetry"
)

// Target is a pod whose events to follow.
type Target struct {
	Pod, Model string
	// Events is the pod's ZMQ PUB endpoint, Replay its ROUTER (empty: no
	// replay; gaps then reset the pod).
	Events, Replay string
	// Topic is the subscription prefix (default "kv@").
	Topic string
	// Resume, when set, is the last sequence number of the pod already on
	// the stream: following resumes after it rather than starting the pod
	// afresh (another replica, or this one before a restart, ingested it).
	Resume *uint64
}

// Sink receives the repaired batches.
type Sink interface {
	Emit(b *eventsv1.KVEventBatch)
}

// Config configures a Manager.
type Config struct {
	Pool, Replica string
	Sink          Sink
	// HWM is the SUB socket's high-water mark (default 100000).
	HWM int
	// ReplayTimeout bounds one replay (default 2s).
	ReplayTimeout time.Duration
	Logger        *slog.Logger
	Registerer    prometheus.Registerer
}

// DefaultTopicPrefix is the subscription of vLLM's kv@<pod>@<model> topics.
const DefaultTopicPrefix = "kv@"

// pollInterval is how long a follower waits on its socket before it looks
// at its context; idleCheck is how long a pod's socket may stay quiet
// before the follower asks its replay socket for missed batches.
const (
	pollInterval = 200 * time.Millisecond
	idleCheck    = time.Second
)

// Manager runs one follower per target.
type Manager struct {
	cfg Config
	log *slog.Logger
	m   *metrics

	mu        sync.Mutex
	followers map[string]*follower
	closed    bool
}

// NewManager returns a manager following nothing yet.
func NewManager(cfg Config) (*Manager, error) {
	if cfg.Sink == nil {
		return nil, errors.New("ingest: a sink is required")
	}
	if cfg.HWM <= 0 {
		cfg.HWM = kvzmq.DefaultHWM
	}
	if cfg.ReplayTimeout <= 0 {
		cfg.ReplayTimeout = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Manager{cfg: cfg, log: cfg.Logger, m: m, followers: map[string]*follower{}}, nil
}

// SetTargets follows exactly these pods: new ones are started, gone ones
// stopped, changed ones restarted.
func (mg *Manager) SetTargets(ts []Target) {
	mg.mu.Lock()
	defer mg.mu.Unlock()
	if mg.closed {
		return
	}
	want := make(map[string]Target, len(ts))
	for _, t := range ts {
		if t.Topic == "" {
			t.Topic = DefaultTopicPrefix
		}
		want[t.Pod] = t
	}
	for pod, f := range mg.followers {
		if t, ok := want[pod]; !ok || !f.t.sameSource(t) {
			f.stop()
			delete(mg.followers, pod)
		}
	}
	for pod, t := range want {
		if _, ok := mg.followers[pod]; !ok {
			f := newFollower(mg, t)
			mg.followers[pod] = f
			go f.run()
		}
	}
	mg.m.followers.Set(float64(len(mg.followers)))
}

// Close stops every follower.
func (mg *Manager) Close() {
	mg.mu.Lock()
	defer mg.mu.Unlock()
	mg.closed = true
	for pod, f := range mg.followers {
		f.stop()
		delete(mg.followers, pod)
	}
	mg.m.followers.Set(0)
}

func (t Target) sameSource(o Target) bool {
	return t.Model == o.Model && t.Events == o.Events && t.Replay == o.Replay && t.Topic == o.Topic
}

// follower follows one pod: its goroutine owns the pod's SUB socket.
type follower struct {
	mg     *Manager
	t      Target
	log    *slog.Logger
	seq    sequencer
	cancel context.CancelFunc
	ctx    context.Context
	done   chan struct{}
	last   seqStats
	// caughtUp is set once a resumed pod's missed batches were replayed.
	caughtUp bool
}

func newFollower(mg *Manager, t Target) *follower {
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{mg: mg, t: t, log: mg.log.With("pod", t.Pod, "events", t.Events), ctx: ctx, cancel: cancel, done: make(chan struct{})}
	f.seq = sequencer{replay: f.replay, emit: f.emit}
	if t.Resume != nil {
		f.seq.started, f.seq.next, f.seq.lastLive = true, *t.Resume+1, *t.Resume
	}
	return f
}

func (f *follower) stop() {
	f.cancel()
	<-f.done
}

// run subscribes (retrying with backoff) and receives until stopped.
func (f *follower) run() {
	defer close(f.done)
	bo := retry.Backoff(100*time.Millisecond, 5*time.Second)
	for f.ctx.Err() == nil {
		sub, err := kvzmq.Subscribe(f.t.Events, false, f.t.Topic, f.mg.cfg.HWM)
		if err != nil {
			f.mg.m.errors.WithLabelValues("subscribe").Inc()
			d := bo.NextBackOff()
			f.log.Warn("cannot subscribe to the pod's KV events; retrying", "error", err, "in", d)
			if !retry.Sleep(f.ctx, d) {
				return
			}
			continue
		}
		f.log.Info("following the pod's KV events", "replay", f.t.Replay)
		if !f.caughtUp {
			// subscribed: nothing published from now on is missed, so
			// what was published before (while nobody followed) can be
			// replayed
			if f.seq.started {
				f.seq.resume()
			} else {
				f.seq.begin()
			}
			f.countRepairs(f.seq.stats)
			f.caughtUp = true
		}
		f.receive(sub)
		_ = sub.Close()
	}
}

func (f *follower) receive(sub *kvzmq.Subscriber) {
	lastHeard := time.Now()
	for f.ctx.Err() == nil {
		m, err := sub.Recv(pollInterval)
		if errors.Is(err, kvzmq.ErrTimeout) {
			// A gap is seen when a later batch arrives; batches lost at the
			// end of a burst are followed by none. When the socket has
			// been quiet a while, ask the replay socket for anything newer.
			if f.seq.started && f.t.Replay != "" && time.Since(lastHeard) >= idleCheck {
				f.seq.resume()
				f.countRepairs(f.seq.stats)
				lastHeard = time.Now()
			}
			continue
		}
		lastHeard = time.Now()
		if err != nil {
			f.mg.m.errors.WithLabelValues("receive").Inc()
			f.log.Warn("dropped a malformed KV event message", "error", err)
			continue
		}
		f.seq.receive(m)
		f.countRepairs(f.seq.stats)
	}
}

func (f *follower) replay(from uint64) ([]kvzmq.Message, error) {
	if f.t.Replay == "" {
		return nil, errors.New("the pod offers no replay")
	}
	msgs, err := kvzmq.Replay(f.t.Replay, from, f.mg.cfg.ReplayTimeout)
	if err != nil {
		f.log.Warn("KV event replay failed", "from", from, "got", len(msgs), "error", err)
	} else {
		f.log.Debug("replayed KV events", "from", from, "got", len(msgs))
	}
	return msgs, err
}

func (f *follower) emit(m kvzmq.Message, reset bool) {
	f.mg.m.batches.Inc()
	if reset {
		f.mg.m.resets.Inc()
		f.log.Info("starting the pod's blocks afresh", "seq", m.Seq)
	}
	f.mg.cfg.Sink.Emit(&eventsv1.KVEventBatch{
		Pool: f.mg.cfg.Pool, Pod: f.t.Pod, Model: f.t.Model, Seq: m.Seq, Payload: m.Payload, ClearPod: reset,
		Received: timestamppb.Now(), Replica: f.mg.cfg.Replica,
	})
}

// countRepairs moves a sequencer's new counts to the metrics.
func (f *follower) countRepairs(s seqStats) {
	l := f.last
	add := func(kind string, now, before uint64) {
		if now > before {
			f.mg.m.repairs.WithLabelValues(kind).Add(float64(now - before))
		}
	}
	add("gap", s.gaps, l.gaps)
	add("replay", s.replays, l.replays)
	add("replay_failure", s.replayFailures, l.replayFailures)
	add("history_lost", s.historyLost, l.historyLost)
	add("restart", s.restarts, l.restarts)
	add("duplicate", s.duplicates, l.duplicates)
	f.last = s
}

// MsgID is the stream message id of a batch: the same batch ingested twice
// (two replicas during a handover) is stored once.
func MsgID(b *eventsv1.KVEventBatch) string {
	return b.GetPod() + "/" + strconv.FormatUint(b.GetSeq(), 10) + "/" + strconv.FormatUint(payloadHash(b.GetPayload()), 16) + "/" + strconv.FormatBool(b.GetClearPod())
}

type metrics struct {
	batches, resets prometheus.Counter
	repairs, errors *prometheus.CounterVec
	followers       prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		batches:   telemetry.NewCounter("hermod_indexer_ingested_batches_total", "KV event batches ingested from the pods and handed on."),
		resets:    telemetry.NewCounter("hermod_indexer_pod_resets_total", "Times a pod's blocks were started afresh (first contact, engine restart, lost history)."),
		repairs:   telemetry.NewCounterVec("hermod_indexer_repairs_total", "Stream repairs by kind: gap, replay, replay_failure, history_lost, restart, duplicate.", "kind"),
		errors:    telemetry.NewCounterVec("hermod_indexer_ingest_errors_total", "Ingest errors by stage: subscribe, receive.", "stage"),
		followers: telemetry.NewGauge("hermod_indexer_followed_pods", "Pods whose KV events this replica ingests."),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.batches, m.resets, m.repairs, m.errors, m.followers} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("ingest metrics: %w", err)
			}
		}
	}
	return m, nil
}
