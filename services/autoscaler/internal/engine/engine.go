// Package engine runs the autoscaler: it folds the input events into the
// observe.Tracker on every replica (so a standby is warm), and on the
// elected leader it evaluates each model's variant group when an event
// asks for it — analyzers, optimizer, enforcer — actuates the changed
// targets, publishes each decision on hermod.scaling.<pool> and persists
// what a new leader needs (learned parameters, the models' activity).
package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/services/autoscaler/internal/actuator"
	"github.com/hermod/hermod/services/autoscaler/internal/config"
	"github.com/hermod/hermod/services/autoscaler/internal/observe"
	"github.com/hermod/hermod/services/autoscaler/internal/scaling"
	"github.com/hermod/hermod/services/autoscaler/internal/store"
)

// Options configure an Engine.
type Options struct {
	Pool    string
	Replica string
	Client  *clientv3.Client
	// Actuator applies the targets.
	Actuator actuator.Actuator
	// Publish sends a decision on hermod.scaling.<pool>.
	Publish func(context.Context, *eventsv1.ScalingDecision) error
	// LeaseTTL is the leader lease (default 15 s).
	LeaseTTL time.Duration
	// Interval is the least time between two evaluations started by
	// metrics (default 250 ms); scale from zero does not wait for it.
	Interval time.Duration
	// Resync evaluates at least this often (default 5 s): retention
	// periods end without an event.
	Resync time.Duration
	// Persist writes the leader's state to etcd this often (default 5 s),
	// and when the term ends.
	Persist time.Duration
	// Status, when set, receives each variant's status after every
	// evaluation (the Kubernetes VariantAutoscaling status writer).
	Status StatusSink
	// Env reads the environment (WVA_SCALE_TO_ZERO); nil: none.
	Env     func(string) string
	Log     *slog.Logger
	Metrics *Metrics
	Now     func() time.Time
}

func (o *Options) defaults() {
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 15 * time.Second
	}
	if o.Interval <= 0 {
		o.Interval = 250 * time.Millisecond
	}
	if o.Resync <= 0 {
		o.Resync = 5 * time.Second
	}
	if o.Persist <= 0 {
		o.Persist = 5 * time.Second
	}
	if o.Env == nil {
		o.Env = func(string) string { return "" }
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
}

// Engine is one autoscaler replica.
type Engine struct {
	o       Options
	tracker *observe.Tracker
	planner *planner
	pending *pending

	mu  sync.Mutex
	set *config.Set
	// settled is when each model's fleet last stopped changing; the
	// analyzers' max-over-time windows start there.
	settled map[string]time.Time
	moving  map[string]bool
	// grown is when each model last scaled up: no scale-down follows
	// within a gauge window (the new replicas' short windows would look
	// idle, and up/down would alternate).
	grown map[string]time.Time
	// desired caches the actuator's targets (refreshed each term).
	desired map[string]int
	leader  bool
}

// New returns an engine.
func New(o Options) (*Engine, error) {
	if o.Pool == "" || o.Replica == "" {
		return nil, errors.New("engine: pool and replica are required")
	}
	if o.Client == nil || o.Actuator == nil || o.Publish == nil {
		return nil, errors.New("engine: etcd client, actuator and publisher are required")
	}
	o.defaults()
	return &Engine{
		o: o, tracker: observe.New(o.Now), planner: newPlanner(), pending: newPending(),
		settled: map[string]time.Time{}, moving: map[string]bool{}, grown: map[string]time.Time{}, desired: map[string]int{},
	}, nil
}

// Tracker returns the engine's inputs.
func (e *Engine) Tracker() *observe.Tracker { return e.tracker }

// SetConfig replaces the variants and analyzer configuration.
func (e *Engine) SetConfig(s *config.Set) {
	e.mu.Lock()
	e.set = s
	e.mu.Unlock()
	e.pending.add(trigger{kind: TriggerConfig, received: e.o.Now()})
}

func (e *Engine) config() *config.Set {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.set
}

// OnMetrics folds a PodMetrics event.
func (e *Engine) OnMetrics(m *eventsv1.PodMetrics) {
	e.tracker.ObserveMetrics(m)
	e.pending.add(trigger{kind: TriggerMetrics, published: m.GetTime().AsTime(), received: e.o.Now()})
}

// OnCompletion folds a RequestCompleted event.
func (e *Engine) OnCompletion(c *eventsv1.RequestCompleted) {
	e.tracker.ObserveCompletion(c)
	e.pending.add(trigger{kind: TriggerCompletions, published: c.GetTime().AsTime(), received: e.o.Now()})
}

// OnEndpoints folds a registry snapshot.
func (e *Engine) OnEndpoints(eps []*registryv1.Endpoint) {
	e.tracker.SetEndpoints(eps)
	e.pending.add(trigger{kind: TriggerRegistry, received: e.o.Now()})
}

// OnQueue folds a gateway's flow-control queue. Requests waiting for a
// model whose every variant is at zero start an evaluation at once.
func (e *Engine) OnQueue(q *eventsv1.FlowControlQueue) {
	e.tracker.ObserveQueue(q)
	t := trigger{kind: TriggerQueue, published: q.GetTime().AsTime(), received: e.o.Now()}
	for model, n := range q.GetQueued() {
		if n > 0 && e.atZero(model) {
			t.kind, t.urgent = TriggerFromZero, true
			break
		}
	}
	e.pending.add(t)
}

// atZero reports whether every variant of model is set to zero replicas.
func (e *Engine) atZero(model string) bool {
	set := e.config()
	e.mu.Lock()
	defer e.mu.Unlock()
	found := false
	for _, va := range set.Variants() {
		if va.Spec.ModelID != model {
			continue
		}
		found = true
		if e.desired[va.Metadata.Name] > 0 {
			return false
		}
	}
	return found
}

// Run campaigns for the leadership and, while leader, evaluates; it
// returns when ctx ends.
func (e *Engine) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		lead, err := coord.Campaign(ctx, e.o.Client, "autoscaler-"+e.o.Pool, e.o.Replica, e.o.LeaseTTL, coord.WithLogger(e.o.Log))
		if ctx.Err() != nil {
			return nil //nolint:nilerr // stopping: the campaign's error is the cancellation
		}
		if err != nil {
			return fmt.Errorf("autoscaler: %w", err)
		}
		e.lead(ctx, lead)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = lead.Close(cctx)
		cancel()
	}
	return nil
}

// fencer is an actuator whose writes can be made conditional on the
// leadership (the local actuator's etcd writes).
type fencer interface{ Fence(cmps ...clientv3.Cmp) }

// lead runs one term: restore, evaluate on triggers, persist.
func (e *Engine) lead(ctx context.Context, lead *coord.Leadership) {
	log := e.o.Log.With("term", lead.Revision())
	log.Info("leading the autoscaler")
	e.o.Metrics.leader.Set(1)
	defer e.o.Metrics.leader.Set(0)
	fence := clientv3.Compare(clientv3.CreateRevision(lead.Key()), "=", lead.Revision())
	if f, ok := e.o.Actuator.(fencer); ok {
		f.Fence(fence)
	}
	term := &term{e: e, lead: lead, fence: fence, log: log}
	term.restore(ctx)
	e.mu.Lock()
	e.leader = true
	clear(e.desired)
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.leader = false
		e.mu.Unlock()
	}()
	e.pending.add(trigger{kind: TriggerResync, received: e.o.Now()})
	resync := time.NewTicker(e.o.Resync)
	defer resync.Stop()
	persist := time.NewTicker(e.o.Persist)
	defer persist.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			term.persist(context.WithoutCancel(ctx))
			return
		case <-lead.Done():
			log.Warn("lost the leadership", "error", lead.Err())
			return
		case <-resync.C:
			e.pending.add(trigger{kind: TriggerResync, received: e.o.Now()})
			continue
		case <-persist.C:
			term.persist(ctx)
			continue
		case <-e.pending.wake:
		}
		if wait := e.o.Interval - time.Since(last); wait > 0 && !e.pending.urgent() {
			select {
			case <-ctx.Done():
				continue
			case <-lead.Done():
				continue
			case <-time.After(wait):
			case <-e.pending.wake: // an urgent trigger may have come
				if !e.pending.urgent() {
					time.Sleep(max(0, e.o.Interval-time.Since(last)))
				}
			}
		}
		t, ok := e.pending.take()
		if !ok {
			continue
		}
		last = time.Now()
		term.evaluate(ctx, t)
	}
}

// term is one leadership term's evaluation state.
type term struct {
	e     *Engine
	lead  *coord.Leadership
	fence clientv3.Cmp
	log   *slog.Logger
}

// persisted is the leader's state in etcd.
type persisted struct {
	Since       time.Time            `json:"since"`
	LastSuccess map[string]time.Time `json:"lastSuccess"`
	Planner     json.RawMessage      `json:"planner,omitempty"`
}

func (t *term) restore(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var p persisted
	err := store.GetJSON(ctx, t.e.o.Client, store.StateKey(t.e.o.Pool), &p)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return
	case err != nil:
		t.log.Warn("the persisted state could not be read; starting cold", "error", err)
		return
	}
	t.e.tracker.Restore(p.Since, p.LastSuccess)
	if len(p.Planner) > 0 {
		if err := t.e.planner.restore(p.Planner); err != nil {
			t.log.Warn("the learned parameters could not be restored", "error", err)
		}
	}
	t.log.Info("restored the persisted state", "models", len(p.LastSuccess), "since", p.Since)
}

func (t *term) persist(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	p := persisted{Since: t.e.tracker.Since(), LastSuccess: t.e.tracker.LastSuccess()}
	if raw, err := t.e.planner.snapshot(); err == nil {
		p.Planner = raw
	}
	if ok, err := store.PutJSON(ctx, t.e.o.Client, store.StateKey(t.e.o.Pool), p, t.fence); err != nil {
		t.log.Warn("persisting the state failed", "error", err)
	} else if !ok {
		t.log.Warn("persisting the state refused: not the leader any more")
	}
}

// evaluate runs the pipeline over every model group: the analyzers per
// model, the optimizer (one GPU budget across the models that use the
// limiter), the enforcer, then the changed targets are actuated.
func (t *term) evaluate(ctx context.Context, trig trigger) {
	e := t.e
	set := e.config()
	start := time.Now()
	defer func() { e.o.Metrics.evaluation.Observe(time.Since(start).Seconds()) }()
	type group struct {
		a       *analyzed
		targets map[string]actuator.Target
	}
	var groups []group
	var models []*analyzed
	for _, g := range set.Groups() {
		m, full, targets, err := t.model(ctx, set, g)
		if err != nil {
			t.log.Warn("reading the variants' replicas failed", "model", g.ModelID, "error", err)
			continue
		}
		a := e.planner.analyze(m, full, set, e.o.Env)
		if a.analyzeEr != nil {
			t.log.Warn("analyzing failed", "model", g.ModelID, "error", a.analyzeEr)
		}
		e.mu.Lock()
		grown := e.grown[m.ID]
		e.mu.Unlock()
		if since := m.Now.Sub(grown); since < observe.GaugeWindow {
			for i := range a.d.Analyses {
				if a.d.Analyses[i].Spare > 0 {
					a.d.Analyses[i].Spare = 0
					a.d.Analyses[i].Reasons = append(a.d.Analyses[i].Reasons,
						fmt.Sprintf("no scale-down: the model scaled up %v ago (within %v)", since.Round(time.Millisecond), observe.GaugeWindow))
				}
			}
		}
		groups = append(groups, group{&a, targets})
		models = append(models, &a)
	}
	optimize(models)
	for _, g := range groups {
		changed := false
		for _, tg := range g.a.d.Targets {
			if tg.Desired != tg.Current {
				changed = true
			}
		}
		if changed {
			t.apply(ctx, g.a.m, g.targets, g.a.d, trig)
		} else {
			t.reportHeld(g.a)
		}
	}
}

// model builds a group's scaling.Model: the variants' settings, their
// targets from the actuator, and the tracker's inputs with the
// max-over-time windows starting when the fleet last settled; full is the
// same with the whole windows.
func (t *term) model(ctx context.Context, set *config.Set, g config.Group) (m, full *scaling.Model, _ map[string]actuator.Target, _ error) {
	e := t.e
	m = &scaling.Model{ID: g.ModelID}
	targets := map[string]actuator.Target{}
	unknown := map[string]bool{}
	for _, va := range g.Variants {
		v := variantOf(va)
		tg := targetOf(va)
		targets[v.Name] = tg
		e.mu.Lock()
		cur, ok := e.desired[v.Name]
		e.mu.Unlock()
		if !ok {
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			st, err := e.o.Actuator.State(actx, tg)
			cancel()
			switch {
			case errors.Is(err, actuator.ErrNoState):
				unknown[v.Name] = true // the replicas serving, below
			case err != nil:
				return nil, nil, nil, err
			default:
				cur = st.Desired
				e.mu.Lock()
				e.desired[v.Name] = cur
				e.mu.Unlock()
			}
		}
		v.Current = cur
		m.Namespace = v.Namespace
		m.Variants = append(m.Variants, v)
	}
	retention := set.ScaleToZero(g.ModelID, m.Namespace, e.o.Env).RetentionPeriod
	e.mu.Lock()
	since := e.settled[g.ModelID]
	e.mu.Unlock()
	full = &scaling.Model{ID: m.ID, Namespace: m.Namespace}
	for _, v := range m.Variants {
		c := *v
		full.Variants = append(full.Variants, &c)
	}
	e.tracker.Fill(m, retention, since)
	e.tracker.Fill(full, retention, time.Time{})
	for i, v := range m.Variants {
		if unknown[v.Name] {
			v.Current = v.Ready
			full.Variants[i].Current = v.Ready
		}
	}
	e.mu.Lock()
	moving := m.Transitioning()
	if e.moving[g.ModelID] && !moving {
		e.settled[g.ModelID] = m.Now
	}
	e.moving[g.ModelID] = moving
	e.mu.Unlock()
	return m, full, targets, nil
}

// apply actuates a decision's changed targets, records them and
// publishes the decision.
func (t *term) apply(ctx context.Context, m *scaling.Model, targets map[string]actuator.Target, d decision, trig trigger) {
	e := t.e
	select {
	case <-t.lead.Done():
		return // deposed: no actuation
	default:
	}
	ev := &eventsv1.ScalingDecision{
		DecisionId: uuid.NewString(), Pool: e.o.Pool, ModelId: m.ID, Time: timestamppb.New(e.o.Now()),
		Replica: e.o.Replica, Term: t.lead.Revision(), Trigger: trig.kind,
		TriggerReceived: timestamppb.New(trig.received), Analyzer: d.Analyzer, Optimizer: d.Optimizer,
		Inputs: inputsOf(m), Reasons: d.Reasons,
	}
	if !trig.published.IsZero() && trig.published.Unix() > 0 {
		ev.TriggerPublished = timestamppb.New(trig.published)
	}
	for _, a := range d.Analyses {
		ev.Signals = append(ev.Signals, &eventsv1.AnalyzerSignal{Analyzer: a.Analyzer, Role: string(a.Role), Required: a.Required,
			Spare: a.Spare, Demand: a.Demand, Supply: a.Supply, Hold: a.Hold, Reasons: a.Reasons})
	}
	byName := map[string]*scaling.Variant{}
	for _, v := range m.Variants {
		byName[v.Name] = v
	}
	for _, tg := range d.Targets {
		v := byName[tg.Variant]
		vd := &eventsv1.VariantDecision{Variant: tg.Variant, Current: int32(tg.Current), Desired: int32(tg.Desired), Reason: tg.Reason,
			Actuator: e.o.Actuator.Name(), Capacity: d.capacity(tg.Variant)}
		if v != nil {
			vd.Namespace, vd.Cost, vd.Ready = v.Namespace, v.Cost, int32(v.Ready)
		}
		if tg.Desired != tg.Current {
			actx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := e.o.Actuator.Scale(actx, targets[tg.Variant], tg.Desired)
			cancel()
			if err != nil {
				vd.Error = err.Error()
				e.o.Metrics.actuations.WithLabelValues("error").Inc()
				t.log.Warn("scaling failed", "variant", tg.Variant, "replicas", tg.Desired, "error", err)
				e.mu.Lock()
				delete(e.desired, tg.Variant) // read it again next time
				e.mu.Unlock()
			} else {
				vd.Applied = true
				e.o.Metrics.actuations.WithLabelValues("applied").Inc()
				e.mu.Lock()
				e.desired[tg.Variant] = tg.Desired
				e.moving[m.ID] = true
				if tg.Desired > tg.Current {
					e.grown[m.ID] = m.Now
				}
				e.mu.Unlock()
				t.log.Info("scaled", "model", m.ID, "variant", tg.Variant, "from", tg.Current, "to", tg.Desired,
					"trigger", trig.kind, "reason", tg.Reason)
			}
		} else {
			vd.Applied = true
		}
		e.o.Metrics.desired.WithLabelValues(tg.Variant).Set(float64(tg.Desired))
		ev.Variants = append(ev.Variants, vd)
	}
	if !trig.received.IsZero() {
		e.o.Metrics.reaction.WithLabelValues(trig.kind).Observe(e.o.Now().Sub(trig.received).Seconds())
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := e.o.Publish(pctx, ev); err != nil {
		t.log.Warn("publishing the decision failed", "error", err)
	}
	e.o.Metrics.decisions.WithLabelValues(trig.kind).Inc()
	t.writeStatus(ctx, ev)
}
