package ingest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/kv/kvzmq"
	"github.com/hermod/hermod/libs/telemetry"
)

// Target is a pod whose events to ingest.
type Target struct {
	Pod, Model string
	// Events is the pod's ZMQ PUB endpoint (empty: the pod connects to the
	// centralized socket), Replay its ROUTER (empty: no replay; gaps then
	// reset the pod, and a quiet pod cannot be told from a cut-off one).
	Events, Replay string
	// Topic is the subscription prefix (default "kv@").
	Topic string
	// Resume, when set, is the last sequence number of the pod already on
	// the stream: ingest resumes after it rather than starting the pod
	// afresh (another replica, or this one before a restart, ingested it).
	// Unset, Config.Position says.
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
	// ReplayTimeout bounds the wait for each message of a replay (default
	// 2s).
	ReplayTimeout time.Duration
	// IdleCheck is how long a pod's events may pause before its replay
	// socket is asked for batches lost at the end of a burst (default 1s).
	// While nothing new comes the asks back off exponentially up to
	// PollMax; a live batch or a replay that delivers starts them over.
	IdleCheck time.Duration
	// PollMax is the longest pause between two asks of a quiet pod's
	// replay socket (default SilentAfter/4, at least IdleCheck).
	PollMax time.Duration
	// SilentAfter is how long a pod's live events may stop before the pod
	// is reported silent, unless its replay socket answers and shows that
	// nothing was missed (default 1m).
	SilentAfter time.Duration
	// SilentLogInterval is the least time between two warnings about one
	// silent pod (default 5m).
	SilentLogInterval time.Duration
	// PodQueue is how many live batches of one pod wait for its worker
	// (default 1024). Centralized ingest drops a batch past it rather than
	// hold up the other pods; the gap is then replayed.
	PodQueue int
	// Position, when set, is the pod's last engine sequence number on the
	// stream: a pod's ingest, when it starts, resumes after it (unless its
	// Target says where). The indexer passes its projection's.
	Position func(pod string) (uint64, bool)
	Logger   *slog.Logger
	// Registerer receives the metrics (nil: not registered).
	Registerer prometheus.Registerer
}

// DefaultTopicPrefix is the subscription of vLLM's kv@<pod>@<model> topics.
const DefaultTopicPrefix = "kv@"

// Defaults of Config.
const (
	DefaultReplayTimeout     = 2 * time.Second
	DefaultIdleCheck         = time.Second
	DefaultSilentAfter       = time.Minute
	DefaultSilentLogInterval = 5 * time.Minute
	DefaultPodQueue          = 1024
)

// pollInterval is how long a receive loop waits on its socket before it
// looks at its context (shutdown waits up to this long for it).
const pollInterval = 100 * time.Millisecond

// Manager keeps one state per pod whose events this replica ingests: the
// pods it owns (SetTargets), followed over their own SUB socket when they
// bind one (discovery) or heard on the centralized socket, and registered
// pods it does not own whose events reach its centralized socket anyway
// (a pod connects to one replica). Each pod's batches are repaired by a
// worker goroutine of its own, which also catches the pod up from its
// replay socket when ingest starts, after a gap and when the pod is
// quiet, so that no receive loop waits on a replay. Pods it owns whose
// live events stop are reported (metrics and a rate-limited warning).
type Manager struct {
	cfg Config
	log *slog.Logger
	m   *metrics

	stop    context.CancelFunc
	watched chan struct{}

	mu     sync.RWMutex
	pods   map[string]*pod
	closed bool
}

// NewManager returns a manager ingesting nothing yet. Close stops it.
func NewManager(cfg Config) (*Manager, error) {
	if cfg.Sink == nil {
		return nil, errors.New("ingest: a sink is required")
	}
	if cfg.HWM <= 0 {
		cfg.HWM = kvzmq.DefaultHWM
	}
	cfg.ReplayTimeout = cmp.Or(max(cfg.ReplayTimeout, 0), DefaultReplayTimeout)
	cfg.IdleCheck = cmp.Or(max(cfg.IdleCheck, 0), DefaultIdleCheck)
	cfg.SilentAfter = cmp.Or(max(cfg.SilentAfter, 0), DefaultSilentAfter)
	cfg.PollMax = max(cmp.Or(max(cfg.PollMax, 0), cfg.SilentAfter/4), cfg.IdleCheck)
	cfg.SilentLogInterval = cmp.Or(max(cfg.SilentLogInterval, 0), DefaultSilentLogInterval)
	cfg.PodQueue = cmp.Or(max(cfg.PodQueue, 0), DefaultPodQueue)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	mg := &Manager{cfg: cfg, log: cfg.Logger, pods: map[string]*pod{}, watched: make(chan struct{})}
	m, err := newMetrics(cfg.Registerer, mg)
	if err != nil {
		return nil, err
	}
	mg.m = m
	ctx, stop := context.WithCancel(context.Background())
	mg.stop = stop
	go mg.watch(ctx)
	return mg, nil
}

// SetTargets sets the pods this replica owns: new ones are started, gone
// ones stopped and forgotten, changed ones started afresh.
func (mg *Manager) SetTargets(ts []Target) {
	want := make(map[string]Target, len(ts))
	for _, t := range ts {
		if t.Topic == "" {
			t.Topic = DefaultTopicPrefix
		}
		want[t.Pod] = t
	}
	var gone []*pod
	mg.mu.Lock()
	if mg.closed {
		mg.mu.Unlock()
		return
	}
	for name, p := range mg.pods {
		t, ok := want[name]
		switch {
		case ok && p.t.sameSource(t):
			if !p.owned.Swap(true) {
				p.poke() // a visitor became ours: check it now
			}
		case ok || p.owned.Load():
			gone = append(gone, p)
			delete(mg.pods, name)
		}
	}
	for name, t := range want {
		if _, ok := mg.pods[name]; !ok {
			mg.pods[name] = mg.startPod(t, true)
		}
	}
	mg.countOwned()
	mg.mu.Unlock()
	stopAll(gone)
}

// dropVisitors forgets the pods this replica does not own that are no
// longer registered as they were.
func (mg *Manager) dropVisitors(registered map[string]Target) {
	var gone []*pod
	mg.mu.Lock()
	for name, p := range mg.pods {
		if p.owned.Load() {
			continue
		}
		if t, ok := registered[name]; !ok || !p.t.sameSource(t) {
			gone = append(gone, p)
			delete(mg.pods, name)
		}
	}
	mg.mu.Unlock()
	stopAll(gone)
}

// deliver hands a batch off the centralized socket to the pod's worker,
// starting one for a registered pod this replica does not own. It never
// blocks: past the pod's queue the batch is dropped (and replayed later).
func (mg *Manager) deliver(t Target, m kvzmq.Message) {
	mg.mu.RLock()
	p, closed := mg.pods[t.Pod], mg.closed
	mg.mu.RUnlock()
	if closed {
		return
	}
	if p == nil {
		mg.mu.Lock()
		if mg.closed {
			mg.mu.Unlock()
			return
		}
		if p = mg.pods[t.Pod]; p == nil {
			p = mg.startPod(t, false)
			mg.pods[t.Pod] = p
		}
		mg.mu.Unlock()
	}
	select {
	case p.live <- m:
	default:
		mg.m.errors.WithLabelValues("queue_full").Inc()
	}
}

// Observe tells ingest about a batch on the stream. Batches another
// replica ingested show that a pod's events reach the pool (a pod
// connects to one replica's centralized socket), and where its stream
// stands: this replica neither reports the pod silent nor replays what
// is already there.
func (mg *Manager) Observe(b *eventsv1.KVEventBatch) {
	if b.GetReplica() == mg.cfg.Replica {
		return
	}
	mg.mu.RLock()
	p := mg.pods[b.GetPod()]
	mg.mu.RUnlock()
	if p != nil {
		p.observe(b.GetSeq())
	}
}

// Close stops every pod's ingest and waits for it: within about
// pollInterval, even when pods or their replay sockets are gone.
func (mg *Manager) Close() {
	mg.mu.Lock()
	if mg.closed {
		mg.mu.Unlock()
		return
	}
	mg.closed = true
	gone := make([]*pod, 0, len(mg.pods))
	for name, p := range mg.pods {
		gone = append(gone, p)
		delete(mg.pods, name)
	}
	mg.m.followers.Set(0)
	mg.mu.Unlock()
	mg.stop()
	<-mg.watched
	stopAll(gone)
}

// countOwned updates the followed-pods gauge. The caller holds mg.mu.
func (mg *Manager) countOwned() {
	n := 0
	for _, p := range mg.pods {
		if p.owned.Load() {
			n++
		}
	}
	mg.m.followers.Set(float64(n))
}

// owned returns the pods this replica owns.
func (mg *Manager) owned() []*pod {
	mg.mu.RLock()
	defer mg.mu.RUnlock()
	out := make([]*pod, 0, len(mg.pods))
	for _, p := range mg.pods {
		if p.owned.Load() {
			out = append(out, p)
		}
	}
	return out
}

func (t Target) sameSource(o Target) bool {
	return t.Model == o.Model && t.Events == o.Events && t.Replay == o.Replay && t.Topic == o.Topic
}

// MsgID is the stream message id of a batch: the same batch ingested twice
// (two replicas during a handover) is stored once.
func MsgID(b *eventsv1.KVEventBatch) string {
	return b.GetPod() + "/" + strconv.FormatUint(b.GetSeq(), 10) + "/" + strconv.FormatUint(payloadHash(b.GetPayload()), 16) + "/" + strconv.FormatBool(b.GetClearPod())
}

type metrics struct {
	batches, resets prometheus.Counter
	repairs, errors *prometheus.CounterVec
	polls           *prometheus.CounterVec
	followers       prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer, mg *Manager) (*metrics, error) {
	m := &metrics{
		batches:   telemetry.NewCounter("hermod_indexer_ingested_batches_total", "KV event batches ingested from the pods and handed on."),
		resets:    telemetry.NewCounter("hermod_indexer_pod_resets_total", "Times a pod's blocks were started afresh (first contact, engine restart, lost history)."),
		repairs:   telemetry.NewCounterVec("hermod_indexer_repairs_total", "Stream repairs by kind: gap, replay, replay_failure, history_lost, restart, duplicate.", "kind"),
		errors:    telemetry.NewCounterVec("hermod_indexer_ingest_errors_total", "Ingest errors by stage: subscribe, receive, unknown_pod, queue_full.", "stage"),
		polls:     telemetry.NewCounterVec("hermod_indexer_replay_polls_total", "Asks of a pod's replay socket at the start of ingest and when the pod is quiet, by result: new (it delivered batches), nothing, failed.", "result"),
		followers: telemetry.NewGauge("hermod_indexer_followed_pods", "Pods whose KV events this replica ingests and reports on (its share of the registered pods, in both ingest modes)."),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.batches, m.resets, m.repairs, m.errors, m.polls, m.followers, newHealthCollector(mg)} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("ingest metrics: %w", err)
			}
		}
	}
	return m, nil
}
