package telemetry

import "github.com/prometheus/client_golang/prometheus"

// Constructors of the common metric shapes: a name, its help and, for a
// vector, its labels. Metrics that need more (constant labels, native
// histograms) use prometheus's own.

// NewCounter returns an unregistered counter.
func NewCounter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

// NewCounterVec returns an unregistered counter vector.
func NewCounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// NewGauge returns an unregistered gauge.
func NewGauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

// NewGaugeVec returns an unregistered gauge vector.
func NewGaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

// NewHistogram returns an unregistered histogram with buckets (nil:
// prometheus.DefBuckets).
func NewHistogram(name, help string, buckets []float64) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
}

// NewHistogramVec returns an unregistered histogram vector with buckets
// (nil: prometheus.DefBuckets).
func NewHistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}
