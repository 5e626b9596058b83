package scrape

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The kinds of request a loop makes (label kind).
const (
	kindMetrics = "metrics"
	kindModels  = "models"
	// kindAttributes is a fetch of an attribute poll's source (a DCGM
	// exporter's page).
	kindAttributes = "attributes"
)

// telemetry holds a Scraper's own Prometheus metrics.
type telemetry struct {
	reg        prometheus.Registerer
	collectors []prometheus.Collector

	duration  *prometheus.HistogramVec
	errors    *prometheus.CounterVec
	skipped   prometheus.Counter
	endpoints prometheus.Gauge
}

// newTelemetry creates the metrics and registers them on reg (if not nil),
// with the staleness of the targets that targets returns.
func newTelemetry(reg prometheus.Registerer, targets func() []*target) (*telemetry, error) {
	t := &telemetry{
		reg: reg,
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hermod_collector_scrape_duration_seconds",
			Help:    "Time of one scrape of an endpoint's /metrics (kind metrics, parsing included) /v1/models (kind models) or an attribute source such as a DCGM exporter (kind attributes), failed ones included.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5},
		}, []string{"kind"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hermod_collector_scrape_errors_total",
			Help: "Failed scrapes by kind (metrics, models, attributes) and reason (timeout, connect, status, parse).",
		}, []string{"kind", "reason"}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hermod_collector_scrape_skipped_total",
			Help: "Scrape ticks skipped because the endpoint's previous scrape was still in flight.",
		}),
		endpoints: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hermod_collector_endpoints",
			Help: "Endpoints being scraped.",
		}),
	}
	for _, kind := range []string{kindMetrics, kindModels, kindAttributes} {
		t.duration.WithLabelValues(kind)
		for _, reason := range []string{reasonTimeout, reasonConnect, reasonStatus, reasonParse} {
			t.errors.WithLabelValues(kind, reason)
		}
	}
	t.collectors = []prometheus.Collector{t.duration, t.errors, t.skipped, t.endpoints, &stalenessCollector{targets: targets}}
	if reg == nil {
		return t, nil
	}
	for i, c := range t.collectors {
		if err := reg.Register(c); err != nil {
			for _, done := range t.collectors[:i] {
				reg.Unregister(done)
			}
			return nil, fmt.Errorf("register scrape metrics: %w", err)
		}
	}
	return t, nil
}

// unregister removes the metrics from the registerer.
func (t *telemetry) unregister() {
	if t.reg == nil {
		return
	}
	for _, c := range t.collectors {
		t.reg.Unregister(c)
	}
}

// observe records one attempt of a kind that took d and failed with err
// (nil when it succeeded).
func (t *telemetry) observe(kind string, d time.Duration, err error) {
	t.duration.WithLabelValues(kind).Observe(d.Seconds())
	var se *scrapeError
	if errors.As(err, &se) {
		t.errors.WithLabelValues(kind, se.reason).Inc()
	}
}

var stalenessDesc = prometheus.NewDesc("hermod_collector_staleness_seconds",
	"Age of the endpoint's latest good scrape of /metrics (before the first one, of the start of its scraping).",
	[]string{"pool", "endpoint"}, nil)

// stalenessCollector reports the staleness of every current target when
// collected, so that a hung endpoint's staleness grows between scrapes and
// a removed endpoint's series goes with it.
type stalenessCollector struct {
	targets func() []*target
}

// Describe implements prometheus.Collector.
func (c *stalenessCollector) Describe(ch chan<- *prometheus.Desc) { ch <- stalenessDesc }

// Collect implements prometheus.Collector.
func (c *stalenessCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	for _, t := range c.targets() {
		ch <- prometheus.MustNewConstMetric(stalenessDesc, prometheus.GaugeValue,
			now.Sub(t.freshSince()).Seconds(), t.pool, t.name)
	}
}
