package predictedlatency

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/telemetry"
)

// Kinds of latency the metrics are labelled with.
const (
	kindTTFT = "ttft"
	kindTPOT = "tpot"
	kindE2E  = "e2e"
)

type metricSet struct {
	predicted *prometheus.HistogramVec
	observed  *prometheus.HistogramVec
	errRatio  *prometheus.HistogramVec
	violation *prometheus.CounterVec
	shed      prometheus.Counter
	fits      prometheus.Counter
	fitTime   prometheus.Histogram
}

// newMetrics registers the plugin's metrics with h (once per process:
// a reloaded config's plugin shares them).
func newMetrics(h scheduling.Handle) *metricSet {
	latency := prometheus.ExponentialBuckets(0.0005, 2, 18) // 0.5 ms .. 65 s
	return &metricSet{
		predicted: scheduling.Metric(h, telemetry.NewHistogramVec("hermod_picker_latency_predicted_seconds", "predicted-latency-scorer: the TTFT and TPOT predicted for the target of each request this replica routed, by kind (ttft, tpot).", latency, "kind")),
		observed:  scheduling.Metric(h, telemetry.NewHistogramVec("hermod_picker_latency_observed_seconds", "predicted-latency-scorer: the TTFT and TPOT measured for the requests this replica routed (streamed ones), and the duration of unstreamed ones (e2e), by kind.", latency, "kind")),
		errRatio:  scheduling.Metric(h, telemetry.NewHistogramVec("hermod_picker_latency_prediction_error_ratio", "predicted-latency-scorer: |predicted - observed| / observed for the requests this replica routed, by kind (ttft, tpot; e2e for unstreamed requests: TTFT + (output-1) x TPOT against the duration).", []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.125, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1, 2, 5}, "kind")),
		violation: scheduling.Metric(h, telemetry.NewCounterVec("hermod_picker_latency_slo_violations_total", "predicted-latency-scorer: requests this replica routed whose measured TTFT or TPOT exceeded the SLO they set, by kind.", "kind")),
		shed:      scheduling.Metric(h, telemetry.NewCounter("hermod_picker_latency_shed_total", "predicted-latency-scorer: sheddable requests shed because no endpoint was predicted to meet their SLO.")),
		fits:      scheduling.Metric(h, telemetry.NewCounter("hermod_picker_latency_model_fits_total", "predicted-latency-scorer: times the model was refitted to the finished requests.")),
		fitTime:   scheduling.Metric(h, telemetry.NewHistogram("hermod_picker_latency_model_fit_seconds", "predicted-latency-scorer: how long a refit took (off the request path).", prometheus.ExponentialBuckets(1e-5, 4, 10))),
	}
}

// observe records a finished request this replica routed.
func (metrics *metricSet) observe(s *inflight, o *outcome) {
	metrics.predicted.WithLabelValues(kindTTFT).Observe(s.ttft)
	metrics.predicted.WithLabelValues(kindTPOT).Observe(s.tpot)
	if !o.ok {
		return
	}
	rel := func(kind string, pred, obs float64) {
		if obs > 0 {
			metrics.observed.WithLabelValues(kind).Observe(obs)
			metrics.errRatio.WithLabelValues(kind).Observe(math.Abs(pred-obs) / obs)
		}
	}
	if o.streamed {
		rel(kindTTFT, s.ttft, o.ttft)
		if o.output > 1 {
			rel(kindTPOT, s.tpot, o.tpot)
		}
		if s.sloTTFT > 0 && o.ttft > s.sloTTFT {
			metrics.violation.WithLabelValues(kindTTFT).Inc()
		}
		if s.sloTPOT > 0 && o.tpot > s.sloTPOT {
			metrics.violation.WithLabelValues(kindTPOT).Inc()
		}
		return
	}
	rel(kindE2E, s.ttft+max(o.output-1, 0)*s.tpot, o.e2e)
}
