// Package observe folds the autoscaler's input events — the collector's
// PodMetrics, the gateways' flow-control queues, the completion events and
// the endpoint registry — into the windowed per-replica and per-model
// inputs the analyzers read (the spec's windows: the max over the last
// minute for kv and queue, rates over five minutes, latencies over one).
package observe

import (
	"sort"
	"sync"
	"time"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/services/autoscaler/internal/scaling"
)

// Labels that tie a registered endpoint to its variant and role.
const (
	VariantLabel = "hermod.io/variant"
	RoleLabel    = "llm-d.ai/role"
)

// Windows of the inputs.
const (
	GaugeWindow   = time.Minute     // max over time of kv usage and queue
	RateWindow    = 5 * time.Minute // token averages and prefix hit rate
	LatencyWindow = time.Minute     // TTFT, ITL and arrival rate
	// gatewayStale: a gateway replica's queue report older than this no
	// longer counts (they report every 5 s).
	gatewayStale = 15 * time.Second
	// metricsStale: a replica whose metrics are older than this is not
	// ready (its collector lost it).
	metricsStale = 10 * time.Second
)

// Tracker holds the windows. It is safe for concurrent use.
type Tracker struct {
	now   func() time.Time
	start time.Time

	mu        sync.Mutex
	endpoints map[string]*registryv1.Endpoint
	replicas  map[string]*replica
	gateways  map[string]gatewayReport
	// lastSuccess is when a model last completed a request successfully.
	lastSuccess map[string]time.Time
}

type replica struct {
	metrics *eventsv1.PodMetrics
	at      time.Time
	kv      maxWindow
	queue   maxWindow
	counts  counterWindow
	done    events[completion]
}

type completion struct {
	ttft, itl time.Duration
}

type gatewayReport struct {
	queued map[string]int64
	at     time.Time
}

// New returns an empty tracker; now is the clock (nil: time.Now).
func New(now func() time.Time) *Tracker {
	if now == nil {
		now = time.Now
	}
	return &Tracker{
		now: now, start: now(), endpoints: map[string]*registryv1.Endpoint{}, replicas: map[string]*replica{},
		gateways: map[string]gatewayReport{}, lastSuccess: map[string]time.Time{},
	}
}

// Restore seeds the models' last successful request times (persisted by an
// earlier leader) and when observation began, so a new leader neither
// scales an active model to zero nor waits a whole retention period again.
func (t *Tracker) Restore(since time.Time, lastSuccess map[string]time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !since.IsZero() && since.Before(t.start) {
		t.start = since
	}
	for m, at := range lastSuccess {
		if at.After(t.lastSuccess[m]) {
			t.lastSuccess[m] = at
		}
	}
}

// LastSuccess returns a copy of the models' last successful request times.
func (t *Tracker) LastSuccess() map[string]time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]time.Time, len(t.lastSuccess))
	for m, at := range t.lastSuccess {
		out[m] = at
	}
	return out
}

// Since returns when observation began.
func (t *Tracker) Since() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.start
}

// SetEndpoints replaces the registered endpoints (a registry snapshot).
func (t *Tracker) SetEndpoints(eps []*registryv1.Endpoint) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.endpoints = make(map[string]*registryv1.Endpoint, len(eps))
	for _, ep := range eps {
		t.endpoints[ep.GetName()] = ep
	}
	for name := range t.replicas {
		if _, ok := t.endpoints[name]; !ok {
			delete(t.replicas, name)
		}
	}
}

func (t *Tracker) replica(name string) *replica {
	r := t.replicas[name]
	if r == nil {
		r = &replica{
			kv: maxWindow{span: GaugeWindow}, queue: maxWindow{span: GaugeWindow},
			counts: counterWindow{span: RateWindow, step: time.Second}, done: events[completion]{span: LatencyWindow},
		}
		t.replicas[name] = r
	}
	return r
}

// ObserveMetrics folds an endpoint's PodMetrics (a failed scrape only
// ages it).
func (t *Tracker) ObserveMetrics(m *eventsv1.PodMetrics) {
	if m.GetError() != "" {
		return
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.endpoints[m.GetEndpoint()]; !ok {
		return // not (or no longer) registered
	}
	r := t.replica(m.GetEndpoint())
	if prev := r.metrics; prev != nil && m.GetRequestSuccessTotal() > prev.GetRequestSuccessTotal() {
		t.noteSuccess(t.endpoints[m.GetEndpoint()].GetModel(), now)
	}
	r.metrics, r.at = m, now
	r.kv.add(now, m.GetKvCacheUsage())
	r.queue.add(now, float64(m.GetWaitingRequests()))
	r.counts.add(now, [nCounters]float64{
		m.GetPromptTokensTotal(), m.GetGenerationTokensTotal(), m.GetRequestSuccessTotal(),
		m.GetPrefixCacheQueriesTotal(), m.GetPrefixCacheHitsTotal(),
	})
}

func (t *Tracker) noteSuccess(model string, at time.Time) {
	if model != "" && at.After(t.lastSuccess[model]) {
		t.lastSuccess[model] = at
	}
}

// ObserveCompletion folds a completed request: a success marks its model
// active, and its TTFT and time per output token feed its endpoint's
// latency averages and arrival rate.
func (t *Tracker) ObserveCompletion(c *eventsv1.RequestCompleted) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	ok := c.GetStatusCode() >= 200 && c.GetStatusCode() < 300
	if ok {
		model := c.GetModel()
		if ep := t.endpoints[c.GetEndpointName()]; ep != nil && ep.GetModel() != "" {
			model = ep.GetModel()
		}
		t.noteSuccess(model, now)
	}
	if _, known := t.endpoints[c.GetEndpointName()]; !known {
		return
	}
	t.replica(c.GetEndpointName()).done.add(now, completion{ttft: c.GetTtft().AsDuration(), itl: c.GetTpot().AsDuration()})
}

// ObserveQueue folds a gateway replica's flow-control queue report.
// Requests waiting for a model count as its activity: a model scaled up
// from zero is not idle while its first requests wait for the pod.
func (t *Tracker) ObserveQueue(q *eventsv1.FlowControlQueue) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gateways[q.GetReplica()] = gatewayReport{queued: q.GetQueued(), at: now}
	for model, n := range q.GetQueued() {
		if n > 0 {
			t.noteSuccess(model, now)
		}
	}
}

// GatewayQueue returns the requests for model waiting in the gateways'
// flow control, over the replicas with a fresh report.
func (t *Tracker) GatewayQueue(model string) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.gatewayQueue(model, t.now())
}

func (t *Tracker) gatewayQueue(model string, now time.Time) float64 {
	var n int64
	for id, g := range t.gateways {
		if now.Sub(g.at) > gatewayStale {
			delete(t.gateways, id)
			continue
		}
		n += g.queued[model]
	}
	return float64(n)
}

// Fill sets the observed state of m's variants (Ready and Replicas, from
// the endpoints labelled with the variant's name and serving the model),
// the gateway queue and the retention inputs. retention is the model's
// scale-to-zero retention period; gauge samples older than since (the
// model's fleet last settled) do not count in the max-over-time windows.
func (t *Tracker) Fill(m *scaling.Model, retention time.Duration, since time.Time) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	m.Now = now
	byVariant := map[string][]scaling.Replica{}
	for name, ep := range t.endpoints {
		v := ep.GetLabels()[VariantLabel]
		if v == "" || (ep.GetModel() != "" && ep.GetModel() != m.ID) {
			continue
		}
		r := t.replicas[name]
		if r == nil || r.metrics == nil || now.Sub(r.at) > metricsStale {
			continue // registered, not yet (or no longer) serving
		}
		byVariant[v] = append(byVariant[v], r.inputs(name, v, scaling.Role(ep.GetLabels()[RoleLabel]), now, since))
	}
	for _, v := range m.Variants {
		rs := byVariant[v.Name]
		sort.Slice(rs, func(i, j int) bool { return rs[i].Name < rs[j].Name })
		v.Replicas, v.Ready = rs, len(rs)
	}
	m.GatewayQueue = t.gatewayQueue(m.ID, now)
	if last, ok := t.lastSuccess[m.ID]; ok && now.Sub(last) < retention {
		m.SuccessInRetention = 1
	} else {
		m.SuccessInRetention = 0
	}
	m.RetentionObserved = now.Sub(t.start) >= retention
}

func (r *replica) inputs(name, variant string, role scaling.Role, now, since time.Time) scaling.Replica {
	m := r.metrics
	capacity := float64(m.GetNumGpuBlocks() * m.GetBlockSize())
	out := scaling.Replica{
		Name: name, Variant: variant, Role: role,
		KVUsage: r.kv.max(now, since), Queue: r.queue.max(now, since), Running: float64(m.GetRunningRequests()),
		KVCapacityTokens: capacity, TokensInUse: m.GetKvCacheUsage() * capacity,
	}
	d, span := r.counts.increase()
	if span > 0 && d[cSuccess] > 0 {
		out.AvgInputTokens = d[cPrompt] / d[cSuccess]
		out.AvgOutputTokens = d[cGeneration] / d[cSuccess]
	}
	if d[cPrefixQueries] > 0 {
		out.PrefixHitRate = d[cPrefixHits] / d[cPrefixQueries]
	}
	done := r.done.within(now)
	if n := len(done); n > 0 {
		var ttft, itl time.Duration
		nITL := 0
		for _, c := range done {
			ttft += c.v.ttft
			if c.v.itl > 0 {
				itl += c.v.itl
				nITL++
			}
		}
		out.AvgTTFT = float64(ttft.Microseconds()) / 1000 / float64(n)
		if nITL > 0 {
			out.AvgITL = float64(itl.Microseconds()) / 1000 / float64(nITL)
		}
		// Arrival rate over the window, or over the time observed so far
		// when shorter.
		span := min(LatencyWindow, now.Sub(done[0].at))
		span = max(span, time.Second)
		out.ArrivalRate = float64(n) / span.Seconds()
	}
	return out
}
