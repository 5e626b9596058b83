// Package projection folds the decision and completion streams of every
// picker replica into the stateful plugins of this replica's scheduler, so
// that N replicas hold one view of in-flight requests, cold-request recency
// and the approximate prefix index (and a restarted replica rebuilds it by
// replaying the streams).
package projection

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/decisions"
	"github.com/hermod/hermod/services/picker/internal/schedconfig"
)

// Completion sources, for metrics.
const (
	SourceRPC    = "rpc"
	SourceStream = "stream"
	// SourceLive: the completion subject over core NATS, ahead of the
	// stream.
	SourceLive = "live"
	// SourceAbandoned: a decision this replica took for a caller that
	// gave up before the answer, released here (it was never published).
	SourceAbandoned = "abandoned"
)

// DefaultWindow is the default deduplication window.
const DefaultWindow = 2 * time.Minute

// Lookup resolves an endpoint by name (for completions).
type Lookup func(name string) (*scheduling.Endpoint, bool)

// DefaultLagSlack is how recent a decision about an endpoint this replica
// does not (yet) see registered must be for its effects to apply.
const DefaultLagSlack = 10 * time.Second

// Folder applies decision and completion events to the scheduler in force.
// The plugins' projections are idempotent and order-independent; the
// Folder also skips what it has already applied (redeliveries, a
// completion that came by RPC and by stream, this replica's own decisions,
// which it applied when it took them) to save the work.
//
// Effects on endpoints that left the registry are dropped when the decision
// is older than the endpoint's removal (or, for an endpoint this replica
// has never seen removed, older than the lag slack), so that a late or
// replayed event does not bring back the state of a departed endpoint.
// Its methods are safe for concurrent use.
type Folder struct {
	pool, replica string
	loader        *schedconfig.Loader
	lookup        Lookup
	registered    func(name string) bool
	lagSlack      time.Duration
	window        time.Duration
	now           func() time.Time
	live          func() bool
	decisions     *idSet
	completions   *idSet
	log           *slog.Logger
	m             *metrics

	mu      sync.Mutex
	removed map[string]time.Time // endpoint -> when it left the registry
}

// Options configure a Folder.
type Options struct {
	Pool, Replica string
	// Window is how long applied ids are remembered for deduplication
	// (redeliveries, and a completion that comes by RPC and by stream).
	// Default DefaultWindow.
	Window time.Duration
	Lookup Lookup
	// Registered reports whether an endpoint is registered now (default:
	// Lookup finds it).
	Registered func(name string) bool
	// LagSlack: see DefaultLagSlack.
	LagSlack time.Duration
	Logger   *slog.Logger
	// Metrics registers the folder's metrics (nil: not registered).
	Metrics prometheus.Registerer
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
	// Live reports whether the streams are followed live (the replay at
	// start is over); decision lag is measured only then. Default: always.
	Live func() bool
}

// New returns a Folder feeding the schedulers of loader.
func New(loader *schedconfig.Loader, o Options) *Folder {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Lookup == nil {
		o.Lookup = func(string) (*scheduling.Endpoint, bool) { return nil, false }
	}
	if o.Registered == nil {
		lookup := o.Lookup
		o.Registered = func(name string) bool { _, ok := lookup(name); return ok }
	}
	if o.LagSlack <= 0 {
		o.LagSlack = DefaultLagSlack
	}
	if o.Live == nil {
		o.Live = func() bool { return true }
	}
	return &Folder{
		pool: o.Pool, replica: o.Replica, loader: loader, lookup: o.Lookup, registered: o.Registered,
		lagSlack: o.LagSlack, window: o.Window, now: o.Now, live: o.Live,
		decisions:   newIDSet(o.Window, o.Now),
		completions: newIDSet(o.Window, o.Now),
		log:         o.Logger, m: newMetrics(o.Metrics),
		removed: map[string]time.Time{},
	}
}

// Decision folds one decision event.
func (f *Folder) Decision(d *eventsv1.RoutingDecision) {
	id, ok := f.check(d)
	if !ok {
		return
	}
	if !f.decisions.add(id) {
		if d.GetReplica() == f.replica {
			f.m.decisions.own.Inc()
		} else {
			f.m.decisions.duplicate.Inc()
		}
		return
	}
	if t := d.GetTime(); t != nil && f.live() {
		f.m.lag.Observe(max(f.now().Sub(t.AsTime()).Seconds(), 0))
	}
	lease := f.loader.Acquire()
	defer lease.Release()
	f.apply(lease.Scheduler(), id, d)
	f.m.decisions.applied.Inc()
}

// Own records a decision this replica took (and applied): its event, when
// the stream brings it back, is skipped.
func (f *Folder) Own(id uint64) { f.decisions.addOwn(id) }

// DecisionSeen reports whether the decision whose event has the message
// id msgID was applied already (taken here, or folded before), counting it
// as Decision would: its event need not even be decoded (bus.WithSkip).
func (f *Folder) DecisionSeen(msgID string) bool {
	id, err := decisions.ParseID(msgID)
	if err != nil {
		return false
	}
	seen, own := f.decisions.has(id)
	switch {
	case !seen:
		return false
	case own:
		f.m.decisions.own.Inc()
	default:
		f.m.decisions.duplicate.Inc()
	}
	return true
}

// CompletionSeen is DecisionSeen for completion events (their message id
// is their decision's) arriving from source.
func (f *Folder) CompletionSeen(msgID, source string) bool {
	id, err := decisions.ParseID(msgID)
	if err != nil {
		return false
	}
	if seen, _ := f.completions.has(id); !seen {
		return false
	}
	f.m.completions.WithLabelValues(source, "duplicate").Inc()
	return true
}

// Replay applies a decision to s whether it was applied before or not (the
// projections are idempotent): to rebuild the state of plugins that
// started empty.
func (f *Folder) Replay(s *scheduling.Scheduler, d *eventsv1.RoutingDecision) {
	if id, ok := f.check(d); ok {
		f.apply(s, id, d)
	}
}

func (f *Folder) check(d *eventsv1.RoutingDecision) (uint64, bool) {
	if d.GetPool() != f.pool {
		f.m.decisions.foreign.Inc()
		return 0, false
	}
	id, err := decisions.ParseID(d.GetDecisionId())
	if err != nil {
		f.m.decisions.malformed.Inc()
		f.log.Warn("dropping a decision event with a malformed id", "pool", f.pool, "error", err)
		return 0, false
	}
	return id, true
}

func (f *Folder) apply(s *scheduling.Scheduler, id uint64, d *eventsv1.RoutingDecision) {
	var at time.Time // a decision without a time counts from now
	if d.GetTime() != nil {
		at = d.GetTime().AsTime()
	}
	effects := decisions.Effects(d)
	for i := range effects {
		effects[i].Endpoints = f.keepEndpoints(effects[i].Endpoints, at)
	}
	applied, skipped := s.ApplyEffects(id, at, effects)
	f.m.effects.applied.Add(float64(applied))
	f.m.effects.skipped.Add(float64(skipped))
}

// keepEndpoints drops the endpoints whose state a decision taken at at
// must not touch (see Folder). It returns eps itself when it keeps all.
func (f *Folder) keepEndpoints(eps []string, at time.Time) []string {
	keep := func(name string) bool {
		f.mu.Lock()
		removedAt, removed := f.removed[name]
		f.mu.Unlock()
		switch {
		case removed && !at.After(removedAt):
			return false
		case f.registered(name):
			return true
		}
		return !at.IsZero() && f.now().Sub(at) < f.lagSlack
	}
	for i, name := range eps {
		if keep(name) {
			continue
		}
		out := append([]string(nil), eps[:i]...)
		for _, n := range eps[i+1:] {
			if keep(n) {
				out = append(out, n)
			}
		}
		f.m.effects.stale.Add(float64(len(eps) - len(out)))
		return out
	}
	return eps
}

// EndpointRemoved records that an endpoint left the registry now.
func (f *Folder) EndpointRemoved(name string) {
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed[name] = now
	for n, at := range f.removed {
		if now.Sub(at) > 2*f.window {
			delete(f.removed, n)
		}
	}
}

// Completion folds one completion, from the stream or from a Complete RPC.
// It reports whether it was new.
func (f *Folder) Completion(ctx context.Context, c *eventsv1.RequestCompleted, source string) bool {
	id, err := decisions.ParseID(c.GetDecisionId())
	if err != nil {
		f.m.completions.WithLabelValues(source, "malformed").Inc()
		f.log.Warn("dropping a completion with a malformed decision id", "pool", f.pool, "source", source, "error", err)
		return false
	}
	if c.GetPool() != "" && c.GetPool() != f.pool {
		f.m.completions.WithLabelValues(source, "foreign").Inc()
		return false
	}
	if !f.completions.add(id) {
		f.m.completions.WithLabelValues(source, "duplicate").Inc()
		return false
	}
	lease := f.loader.Acquire()
	defer lease.Release()
	f.complete(ctx, lease.Scheduler(), id, c)
	f.m.completions.WithLabelValues(source, "applied").Inc()
	return true
}

// ReplayCompletion applies a completion to s whether it was applied before
// or not (see Replay).
func (f *Folder) ReplayCompletion(ctx context.Context, s *scheduling.Scheduler, c *eventsv1.RequestCompleted) {
	if id, err := decisions.ParseID(c.GetDecisionId()); err == nil && (c.GetPool() == "" || c.GetPool() == f.pool) {
		f.complete(ctx, s, id, c)
	}
}

func (f *Folder) complete(ctx context.Context, s *scheduling.Scheduler, id uint64, c *eventsv1.RequestCompleted) {
	begin := time.Now()
	defer func() { s.Metrics().ResponseProcessed(time.Since(begin)) }()
	resp := &scheduling.Response{
		RequestID:  c.GetRequestId(),
		DecisionID: id,
		StatusCode: int(c.GetStatusCode()),
		Streamed:   c.GetStreamed(),
		Usage: scheduling.Usage{
			PromptTokens:     int(c.GetPromptTokens()),
			CachedTokens:     int(c.GetCachedTokens()),
			CompletionTokens: int(c.GetCompletionTokens()),
			TTFT:             c.GetTtft().AsDuration(),
			TPOT:             c.GetTpot().AsDuration(),
			Duration:         c.GetDuration().AsDuration(),
		},
	}
	if t := c.GetTime(); t != nil {
		resp.Time = t.AsTime()
	}
	if e, ok := f.lookup(c.GetEndpointName()); ok {
		resp.Target = scheduling.Target{Endpoint: e, Port: e.Port}
	}
	s.ResponseComplete(ctx, resp)
}

type metrics struct {
	decisions struct {
		applied, own, duplicate, foreign, malformed prometheus.Counter
	}
	effects struct {
		applied, skipped, stale prometheus.Counter
	}
	completions *prometheus.CounterVec
	// lag is how long another replica's decision took to reach this one:
	// while it travels, this replica does not count the request.
	lag prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	dec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hermod_picker_projection_decisions_total",
		Help: "Decision events folded from the stream, by result: applied, own (taken here), duplicate, foreign (another pool), malformed.",
	}, []string{"result"})
	eff := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hermod_picker_projection_effects_total",
		Help: "Plugin effects of other replicas' decisions, by result: applied, skipped (no plugin of that name and type in the config in force), stale (endpoints that left the registry; counted per endpoint).",
	}, []string{"result"})
	m := &metrics{completions: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hermod_picker_projection_completions_total",
		Help: "Completions folded, by source (rpc: a Complete call; live: the subject over core NATS; stream: the stream; extproc: Envoy mode; abandoned: a decision whose caller gave up before the answer, released where it was taken) and result (applied, duplicate, foreign, malformed).",
	}, []string{"source", "result"}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hermod_picker_projection_decision_lag_seconds",
			Help:    "From another replica's decision to its fold here (first delivery): the time during which this replica's in-flight view misses the request.",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5},
		})}
	m.decisions.applied = dec.WithLabelValues("applied")
	m.decisions.own = dec.WithLabelValues("own")
	m.decisions.duplicate = dec.WithLabelValues("duplicate")
	m.decisions.foreign = dec.WithLabelValues("foreign")
	m.decisions.malformed = dec.WithLabelValues("malformed")
	m.effects.applied = eff.WithLabelValues("applied")
	m.effects.skipped = eff.WithLabelValues("skipped")
	m.effects.stale = eff.WithLabelValues("stale")
	if reg != nil {
		reg.MustRegister(dec, eff, m.completions, m.lag)
	}
	return m
}
