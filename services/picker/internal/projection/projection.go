// Package projection folds the decision and completion streams of every
// picker replica into the stateful plugins of this replica's scheduler, so
// that N replicas hold one view of in-flight requests, cold-request recency
// and the approximate prefix index (and a restarted replica rebuilds it by
// replaying the streams).
package projection

import (
	"context"
	"log/slog"
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
)

// DefaultWindow is the default deduplication window.
const DefaultWindow = 2 * time.Minute

// Lookup resolves an endpoint by name (for completions).
type Lookup func(name string) (*scheduling.Endpoint, bool)

// Folder applies decision and completion events to the scheduler in force.
// Each decision and each completion is applied once, whatever the number of
// redeliveries and whichever path brought it (stream or Complete RPC); this
// replica's own decisions were applied when it took them and are skipped.
// Its methods are safe for concurrent use.
type Folder struct {
	pool, replica string
	loader        *schedconfig.Loader
	lookup        Lookup
	decisions     *idSet
	completions   *idSet
	log           *slog.Logger
	m             *metrics
}

// Options configure a Folder.
type Options struct {
	Pool, Replica string
	// Window is how long applied ids are remembered for deduplication
	// (redeliveries, and a completion that comes by RPC and by stream).
	// Default DefaultWindow.
	Window time.Duration
	Lookup Lookup
	Logger *slog.Logger
	// Metrics registers the folder's metrics (nil: not registered).
	Metrics prometheus.Registerer
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
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
	return &Folder{
		pool: o.Pool, replica: o.Replica, loader: loader, lookup: o.Lookup,
		decisions:   newIDSet(o.Window, o.Now),
		completions: newIDSet(o.Window, o.Now),
		log:         o.Logger, m: newMetrics(o.Metrics),
	}
}

// Decision folds one decision event.
func (f *Folder) Decision(d *eventsv1.RoutingDecision) {
	if d.GetReplica() == f.replica {
		f.m.decisions.own.Inc()
		return
	}
	if d.GetPool() != f.pool {
		f.m.decisions.foreign.Inc()
		return
	}
	id, err := decisions.ParseID(d.GetDecisionId())
	if err != nil {
		f.m.decisions.malformed.Inc()
		f.log.Warn("dropping a decision event with a malformed id", "pool", f.pool, "error", err)
		return
	}
	if !f.decisions.add(id) {
		f.m.decisions.duplicate.Inc()
		return
	}
	lease := f.loader.Acquire()
	applied, skipped := lease.Scheduler().ApplyEffects(id, d.GetTime().AsTime(), decisions.Effects(d))
	lease.Release()
	f.m.decisions.applied.Inc()
	f.m.effects.applied.Add(float64(applied))
	f.m.effects.skipped.Add(float64(skipped))
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
	resp := &scheduling.Response{
		RequestID:  c.GetRequestId(),
		DecisionID: id,
		StatusCode: int(c.GetStatusCode()),
		Usage: scheduling.Usage{
			PromptTokens:     int(c.GetPromptTokens()),
			CachedTokens:     int(c.GetCachedTokens()),
			CompletionTokens: int(c.GetCompletionTokens()),
			TTFT:             c.GetTtft().AsDuration(),
			TPOT:             c.GetTpot().AsDuration(),
			Duration:         c.GetDuration().AsDuration(),
		},
	}
	if e, ok := f.lookup(c.GetEndpointName()); ok {
		resp.Target = scheduling.Target{Endpoint: e, Port: e.Port}
	}
	lease := f.loader.Acquire()
	lease.Scheduler().ResponseComplete(ctx, nil, resp)
	lease.Release()
	f.m.completions.WithLabelValues(source, "applied").Inc()
	return true
}

type metrics struct {
	decisions struct {
		applied, own, duplicate, foreign, malformed prometheus.Counter
	}
	effects struct {
		applied, skipped prometheus.Counter
	}
	completions *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	dec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hermod_picker_projection_decisions_total",
		Help: "Decision events folded from the stream, by result: applied, own (taken here), duplicate, foreign (another pool), malformed.",
	}, []string{"result"})
	eff := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hermod_picker_projection_effects_total",
		Help: "Plugin effects of other replicas' decisions, by result: applied, or skipped (no plugin of that name and type in the config in force).",
	}, []string{"result"})
	m := &metrics{completions: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hermod_picker_projection_completions_total",
		Help: "Completions folded, by source (rpc, stream) and result (applied, duplicate, foreign, malformed).",
	}, []string{"source", "result"})}
	m.decisions.applied = dec.WithLabelValues("applied")
	m.decisions.own = dec.WithLabelValues("own")
	m.decisions.duplicate = dec.WithLabelValues("duplicate")
	m.decisions.foreign = dec.WithLabelValues("foreign")
	m.decisions.malformed = dec.WithLabelValues("malformed")
	m.effects.applied = eff.WithLabelValues("applied")
	m.effects.skipped = eff.WithLabelValues("skipped")
	if reg != nil {
		reg.MustRegister(dec, eff, m.completions)
	}
	return m
}
