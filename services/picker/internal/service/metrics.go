package service

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/status"

	"github.com/hermod/hermod/libs/giemetrics"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/telemetry"
	"github.com/hermod/hermod/services/picker/internal/endpoints"
)

// Metrics are the picker service's Prometheus metrics.
type Metrics struct {
	pickDuration     *prometheus.HistogramVec
	decisionsDropped prometheus.Counter
	decisions        *prometheus.CounterVec
}

// DecisionsMetric counts routing decisions by profile and target endpoint
// (its registered name): for each profile of a decision that chose a
// target (decode, and prefill or encode when they ran). Its target label
// is not "endpoint", which Prometheus Operator sets on every scraped
// series (the port's name).
const DecisionsMetric = "hermod_picker_routing_decisions_total"

// NewMetrics registers the service metrics on reg (nil: not registered),
// including the GIE pool gauges computed from set's view.
func NewMetrics(reg prometheus.Registerer, pool string, set *endpoints.Set) *Metrics {
	m := &Metrics{
		pickDuration:     telemetry.NewHistogramVec("hermod_picker_pick_duration_seconds", "Time to serve a Pick RPC, by gRPC code.", prometheus.ExponentialBuckets(10e-6, 2, 16), "code"),
		decisionsDropped: telemetry.NewCounter("hermod_picker_decisions_dropped_total", "Decision events that could not be queued for publishing (the publisher's queue was full)."),
		decisions:        telemetry.NewCounterVec(DecisionsMetric, "Routing decisions taken by this replica, by scheduling profile and chosen target endpoint.", "profile", "target"),
	}
	if reg == nil {
		return m
	}
	reg.MustRegister(m.pickDuration, m.decisionsDropped, prunedDecisions{m.decisions, set})
	if set == nil {
		return m
	}
	labels := prometheus.Labels{"name": pool}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "inference_pool_ready_pods", Help: "Ready endpoints of the pool.", ConstLabels: labels,
		}, func() float64 { return float64(len(set.View().Candidates)) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "inference_pool_average_queue_size", Help: "Mean waiting requests over the pool's ready endpoints.", ConstLabels: labels,
		}, func() float64 {
			return averageOf(set, func(m *scheduling.Metrics) float64 { return float64(m.WaitingRequests) })
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "inference_pool_average_kv_cache_utilization", Help: "Mean KV-cache usage (0..1) over the pool's ready endpoints.", ConstLabels: labels,
		}, func() float64 {
			return averageOf(set, func(m *scheduling.Metrics) float64 { return m.KVCacheUsage })
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "inference_pool_average_running_requests", Help: "Mean running requests over the pool's ready endpoints.", ConstLabels: labels,
		}, func() float64 {
			return averageOf(set, func(m *scheduling.Metrics) float64 { return float64(m.RunningRequests) })
		}),
		perPodQueue{set: set, desc: prometheus.NewDesc("inference_pool_per_pod_queue_size",
			"The total number of requests pending in the model server queue for each underlying pod.", []string{"model_server_pod"}, labels)},
	)
	if err := giemetrics.RegisterInfo(reg); err != nil {
		panic(err)
	}
	return m
}

// perPodQueue exports each ready endpoint's waiting queue, computed when
// scraped (endpoints come and go; nothing is left behind).
type perPodQueue struct {
	set  *endpoints.Set
	desc *prometheus.Desc
}

func (p perPodQueue) Describe(ch chan<- *prometheus.Desc) { ch <- p.desc }

func (p perPodQueue) Collect(ch chan<- prometheus.Metric) {
	for _, e := range p.set.View().Candidates {
		if e.Metrics != nil {
			ch <- prometheus.MustNewConstMetric(p.desc, prometheus.GaugeValue, float64(e.Metrics.WaitingRequests), e.Name)
		}
	}
}

// averageOf is the mean of f over the ready endpoints with metrics (0
// with none).
func averageOf(set *endpoints.Set, f func(*scheduling.Metrics) float64) float64 {
	sum, n := 0.0, 0
	for _, e := range set.View().Candidates {
		if e.Metrics == nil {
			continue
		}
		sum += f(e.Metrics)
		n++
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// observeDecision counts a decision's targets.
func (m *Metrics) observeDecision(res *scheduling.Result) {
	for _, pr := range res.Profiles {
		if t, ok := pr.Target(); ok {
			m.decisions.WithLabelValues(pr.Profile, t.Endpoint.Name).Inc()
		}
	}
}

// prunedDecisions exports the decision counters of the endpoints still
// registered, and forgets the others' when scraped: pods come and go (a
// rollout, the autoscaler), and their series must not pile up.
type prunedDecisions struct {
	vec *prometheus.CounterVec
	set *endpoints.Set
}

func (p prunedDecisions) Describe(ch chan<- *prometheus.Desc) { p.vec.Describe(ch) }

func (p prunedDecisions) Collect(ch chan<- prometheus.Metric) {
	if p.set == nil {
		p.vec.Collect(ch)
		return
	}
	all := make(chan prometheus.Metric, 64)
	go func() {
		p.vec.Collect(all)
		close(all)
	}()
	view := p.set.View()
	var gone []prometheus.Labels
	for m := range all {
		var d dto.Metric
		if err := m.Write(&d); err == nil {
			var profile, target string
			for _, l := range d.GetLabel() {
				switch l.GetName() {
				case "profile":
					profile = l.GetValue()
				case "target":
					target = l.GetValue()
				}
			}
			if _, ok := view.Lookup(target); !ok {
				gone = append(gone, prometheus.Labels{"profile": profile, "target": target})
				continue
			}
		}
		ch <- m
	}
	for _, l := range gone {
		p.vec.Delete(l)
	}
}

func (m *Metrics) observePick(start time.Time, err error) {
	code := strings.ToLower(status.Code(err).String())
	m.pickDuration.WithLabelValues(code).Observe(time.Since(start).Seconds())
}
