package flowcontrol

import (
	"container/list"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermod/hermod/libs/giemetrics"
	"github.com/hermod/hermod/libs/telemetry"
)

// Outcomes of a request in flow control, as upstream names them (the
// outcome label).
const (
	OutcomeNotYetFinalized         = "NotYetFinalized"
	OutcomeDispatched              = "Dispatched"
	OutcomeRejectedCapacity        = "RejectedCapacity"
	OutcomeEvictedTTL              = "EvictedTTL"
	OutcomeEvictedContextCancelled = "EvictedContextCancelled"
)

// DefaultFlow is the fairness id of a request that names none.
const DefaultFlow = "default-flow"

// Metrics are GIE's flow-control family, for one pool. The fairness id,
// the model and the priority are the clients' to choose: each label keeps
// its first giemetrics.MaxLabelValues values (the rest are "other"), and
// of the queue-size series whose queue emptied (0, as dashboards expect)
// the maxIdleSeries most recent stay, the older ones are deleted.
type Metrics struct {
	pool                      string
	flows, models, priorities *giemetrics.BoundedLabel

	mu     sync.Mutex
	series map[seriesKey]*queueSeries
	idle   *list.List // of seriesKey, whose queue is empty, oldest first

	queueDuration   *prometheus.HistogramVec
	enqueueDuration *prometheus.HistogramVec
	dispatchCycle   prometheus.Histogram
	queueSize       *prometheus.GaugeVec
	queueBytes      *prometheus.GaugeVec
	// program-aware fairness (the llm-d router's llm_d_epp_program_aware_*)
	programs      *giemetrics.BoundedLabel
	serviceTokens *prometheus.GaugeVec
	waitMs        *prometheus.GaugeVec
	jainIndex     prometheus.Gauge
	// in-flight eviction (the llm-d router's llm_d_epp_flow_control_*)
	issued          *prometheus.CounterVec
	revocations     *prometheus.CounterVec
	revocationWait  prometheus.Observer
	reclaimTargetG  prometheus.Gauge
	pendingReclaimG prometheus.Gauge
}

// Outcomes of an eviction (the revocations counter's outcome label).
const (
	revocationConfirmed = "confirmed"
	revocationTimedOut  = "timed_out"
)

// revocationBuckets are the eviction-to-end latency's buckets, seconds.
var revocationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// NewMetrics returns the family, registered on reg (nil: not registered),
// with saturation the pool saturation gauge's source (nil: no gauge).
func NewMetrics(reg prometheus.Registerer, pool string, saturation func() float64) *Metrics {
	m := &Metrics{
		pool:       pool,
		flows:      giemetrics.NewBoundedLabel(giemetrics.MaxLabelValues),
		models:     giemetrics.NewBoundedLabel(giemetrics.MaxLabelValues),
		priorities: giemetrics.NewBoundedLabel(giemetrics.MaxLabelValues),
		series:     map[seriesKey]*queueSeries{},
		idle:       list.New(),
		queueDuration: telemetry.NewHistogramVec("inference_extension_flow_control_request_queue_duration_seconds",
			"[ALPHA] Distribution of the total time requests spend in the EPP flow control layer, measured from the start of the EnqueueAndWait call until a final outcome is reached.",
			giemetrics.FlowQueueBuckets, "fairness_id", "priority", "outcome", "inference_pool", "model_name", "target_model_name"),
		enqueueDuration: telemetry.NewHistogramVec("inference_extension_flow_control_request_enqueue_duration_seconds",
			"[ALPHA] Distribution of the time it takes to enqueue requests in the EPP flow control layer.",
			giemetrics.FastBuckets, "fairness_id", "priority", "outcome"),
		dispatchCycle: telemetry.NewHistogram("inference_extension_flow_control_dispatch_cycle_duration_seconds",
			"[ALPHA] Distribution of the time taken for each dispatch cycle in the EPP flow control layer.", giemetrics.FastBuckets),
		queueSize: telemetry.NewGaugeVec("inference_extension_flow_control_queue_size",
			"[ALPHA] Current number of requests being actively managed by the EPP flow control layer.",
			"fairness_id", "priority", "inference_pool", "model_name", "target_model_name"),
		queueBytes: telemetry.NewGaugeVec("inference_extension_flow_control_queue_bytes",
			"[ALPHA] Current size in bytes of all requests being actively managed by the EPP flow control layer.",
			"fairness_id", "priority", "inference_pool", "model_name", "target_model_name"),
	}
	m.programs = giemetrics.NewBoundedLabel(giemetrics.MaxLabelValues)
	m.serviceTokens = telemetry.NewGaugeVec("llm_d_epp_program_aware_attained_service_tokens",
		"[ALPHA] Time-decayed attained service (weighted tokens consumed) per program.", "program_id")
	m.waitMs = telemetry.NewGaugeVec("llm_d_epp_program_aware_avg_wait_time_milliseconds",
		"[ALPHA] Cumulative mean of flow-control queue wait time per program in milliseconds.", "program_id")
	m.jainIndex = telemetry.NewGauge("llm_d_epp_program_aware_jains_fairness_index",
		"[ALPHA] Jain's fairness index over average wait time across active programs.")
	m.issued = telemetry.NewCounterVec("llm_d_epp_flow_control_revocations_issued_total",
		"[ALPHA] Requests in flight evicted by flow control, by the priority of the band they made room for.", "priority", "inference_pool")
	m.revocations = telemetry.NewCounterVec("llm_d_epp_flow_control_revocations_total",
		"[ALPHA] Evictions by how they ended: confirmed (the request ended) or timed_out (it did not end in time and counts as ended).",
		"outcome", "inference_pool")
	wait := telemetry.NewHistogramVec("llm_d_epp_flow_control_revocation_confirmation_seconds",
		"[ALPHA] Time from an eviction to the end of the evicted request.", revocationBuckets, "inference_pool")
	m.revocationWait = wait.WithLabelValues(pool)
	target := telemetry.NewGaugeVec("llm_d_epp_flow_control_reclaim_target",
		"[ALPHA] The saturation an eviction decision last set out to free (its excess over the blocked band's ceiling).", "inference_pool")
	m.reclaimTargetG = target.WithLabelValues(pool)
	pending := telemetry.NewGaugeVec("llm_d_epp_flow_control_pending_reclaim",
		"[ALPHA] The saturation the evictions not yet ended, or still in their grace, are expected to free.", "inference_pool")
	m.pendingReclaimG = pending.WithLabelValues(pool)
	if reg != nil {
		reg.MustRegister(m.queueDuration, m.enqueueDuration, m.dispatchCycle, m.queueSize, m.queueBytes,
			m.serviceTokens, m.waitMs, m.jainIndex, m.issued, m.revocations, wait, target, pending)
		if saturation != nil {
			reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "inference_extension_flow_control_pool_saturation", Help: "[ALPHA] Current saturation level of the inference pool.",
				ConstLabels: prometheus.Labels{"inference_pool": pool},
			}, saturation))
		}
	}
	return m
}

// seriesKey is a queue-size series' labels (besides the pool's).
type seriesKey struct{ flow, priority, model string }

// queueSeries is a queue-size series' requests queued, and its place in
// the idle list while that is 0.
type queueSeries struct {
	queued int
	idle   *list.Element
}

// maxIdleSeries bounds the queue-size (and bytes) series kept at 0.
const maxIdleSeries = 256

// labels are r's bounded labels.
func (m *Metrics) labels(r Request) seriesKey {
	flow := r.Flow
	if flow == "" {
		flow = DefaultFlow
	}
	return seriesKey{flow: m.flows.Value(flow), priority: m.priorities.Value(strconv.Itoa(r.Priority)), model: m.models.Value(r.Model)}
}

// enqueued observes the time Acquire took to reach outcome (queued:
// NotYetFinalized).
func (m *Metrics) enqueued(r Request, since time.Time, outcome string) {
	if m == nil {
		return
	}
	k := m.labels(r)
	m.enqueueDuration.WithLabelValues(k.flow, k.priority, outcome).Observe(time.Since(since).Seconds())
}

// finalized observes a request's whole time in flow control, to outcome.
func (m *Metrics) finalized(r Request, since time.Time, outcome string) {
	if m == nil {
		return
	}
	k := m.labels(r)
	m.queueDuration.WithLabelValues(k.flow, k.priority, outcome, m.pool, k.model, k.model).Observe(time.Since(since).Seconds())
}

// managed counts a request in (d = 1) or out (d = -1) of the queue.
func (m *Metrics) managed(r Request, d int) {
	if m == nil {
		return
	}
	k := m.labels(r)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.queueSize.WithLabelValues(k.flow, k.priority, m.pool, k.model, k.model).Add(float64(d))
	m.queueBytes.WithLabelValues(k.flow, k.priority, m.pool, k.model, k.model).Add(float64(d * r.Bytes))
	sr := m.series[k]
	if sr == nil {
		sr = &queueSeries{}
		m.series[k] = sr
	}
	if sr.idle != nil {
		m.idle.Remove(sr.idle)
		sr.idle = nil
	}
	if sr.queued += d; sr.queued > 0 {
		return
	}
	sr.idle = m.idle.PushBack(k)
	for m.idle.Len() > maxIdleSeries {
		old := m.idle.Remove(m.idle.Front()).(seriesKey)
		delete(m.series, old)
		m.queueSize.DeleteLabelValues(old.flow, old.priority, m.pool, old.model, old.model)
		m.queueBytes.DeleteLabelValues(old.flow, old.priority, m.pool, old.model, old.model)
	}
}

// dispatchCycle observes one dispatch pass that began at since.
func (m *Metrics) dispatched(since time.Time) {
	if m == nil {
		return
	}
	m.dispatchCycle.Observe(time.Since(since).Seconds())
}

// programService records a program's attained service.
func (m *Metrics) programService(id string, tokens float64) {
	if m != nil {
		m.serviceTokens.WithLabelValues(m.programs.Value(id)).Set(tokens)
	}
}

// programWait records a program's mean wait in the queue.
func (m *Metrics) programWait(id string, ms float64) {
	if m != nil {
		m.waitMs.WithLabelValues(m.programs.Value(id)).Set(ms)
	}
}

// programFairness records Jain's index over the programs' mean waits.
func (m *Metrics) programFairness(index float64) {
	if m != nil {
		m.jainIndex.Set(index)
	}
}

// programGone deletes a forgotten program's series.
func (m *Metrics) programGone(id string) {
	if m == nil {
		return
	}
	if v := m.programs.Value(id); v != giemetrics.OtherLabelValue {
		m.serviceTokens.DeleteLabelValues(v)
		m.waitMs.DeleteLabelValues(v)
		m.programs.Forget(v)
	}
}

// revocationsIssued counts n evictions for a band of priority demand.
func (m *Metrics) revocationsIssued(demand, n int) {
	if m != nil {
		m.issued.WithLabelValues(m.priorities.Value(strconv.Itoa(demand)), m.pool).Add(float64(n))
	}
}

// revocationEnded counts an eviction's end by outcome; a confirmed one
// took that long from the eviction.
func (m *Metrics) revocationEnded(outcome string, took time.Duration) {
	if m == nil {
		return
	}
	m.revocations.WithLabelValues(outcome, m.pool).Inc()
	if outcome == revocationConfirmed {
		m.revocationWait.Observe(took.Seconds())
	}
}

// reclaimTarget records the saturation a decision set out to free.
func (m *Metrics) reclaimTarget(v float64) {
	if m != nil {
		m.reclaimTargetG.Set(v)
	}
}

// pendingReclaim records the saturation the evictions under way are
// expected to free.
func (m *Metrics) pendingReclaim(v float64) {
	if m != nil {
		m.pendingReclaimG.Set(v)
	}
}
