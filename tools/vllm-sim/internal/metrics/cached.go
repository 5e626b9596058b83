package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// cachedCollector serves what its inner collector collected for up to ttl:
// the process collector reads several /proc files per collection, which a
// fleet of simulated pods scraped every 50 ms turned into a fifth of the
// simulator's CPU; the values change slowly. Collected metrics are
// immutable, so they are sent again as they are.
type cachedCollector struct {
	inner prometheus.Collector
	ttl   time.Duration
	now   func() time.Time

	mu      sync.Mutex
	at      time.Time
	metrics []prometheus.Metric
}

func newCachedCollector(inner prometheus.Collector, ttl time.Duration, now func() time.Time) *cachedCollector {
	return &cachedCollector{inner: inner, ttl: ttl, now: now}
}

// Describe implements prometheus.Collector.
func (c *cachedCollector) Describe(ch chan<- *prometheus.Desc) { c.inner.Describe(ch) }

// Collect implements prometheus.Collector.
func (c *cachedCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	now := c.now()
	if c.metrics == nil || now.Sub(c.at) >= c.ttl {
		c.metrics = c.metrics[:0]
		in := make(chan prometheus.Metric, 16)
		go func() {
			c.inner.Collect(in)
			close(in)
		}()
		for m := range in {
			c.metrics = append(c.metrics, m)
		}
		c.at = now
	}
	ms := c.metrics
	c.mu.Unlock()
	for _, m := range ms {
		ch <- m
	}
}
