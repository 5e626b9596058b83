package scrape

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of Config.
const (
	DefaultInterval       = 50 * time.Millisecond
	DefaultTimeout        = time.Second
	DefaultModelsInterval = 10 * time.Second
	DefaultJitter         = 0.1
	DefaultMaxBodyBytes   = 16 << 20
)

// Config configures a Scraper. Zero fields take the defaults.
type Config struct {
	// Sink receives every scrape's PodMetrics. Required.
	Sink Sink

	// Interval is the time between two scrapes of an endpoint's /metrics
	// (DefaultInterval).
	Interval time.Duration
	// Timeout bounds one scrape or models poll, connecting and reading the
	// body included (DefaultTimeout). It may exceed Interval (ticks are
	// skipped meanwhile) but must be less than ModelsInterval. A hung
	// endpoint keeps its last good values for up to Timeout before its
	// first failure is published, so keep it below the age at which
	// consumers treat PodMetrics as stale.
	Timeout time.Duration
	// ModelsInterval is the time between two polls of /v1/models
	// (DefaultModelsInterval) unless a ModelsPoll sets its own; the first
	// poll is at once.
	ModelsInterval time.Duration
	// Jitter is the fraction by which each wait between ticks varies at
	// random, both ways (DefaultJitter); at most 0.5, negative for none.
	// The first tick is at a random phase within an interval either way.
	Jitter float64
	// MaxBodyBytes caps a /metrics body (DefaultMaxBodyBytes); a larger one
	// fails the scrape with reason parse. A model list is capped at
	// datalayer.MaxBodyBytes.
	MaxBodyBytes int64

	// Client makes the requests (NewHTTPClient when nil, closed with the
	// Scraper).
	Client *http.Client
	// Registerer gets the Scraper's metrics (not registered when nil); they
	// are unregistered by Close.
	Registerer prometheus.Registerer
	// Logger logs failure streaks and endpoint changes (slog.Default when
	// nil).
	Logger *slog.Logger
}

var errNoSink = errors.New("no sink")

// withDefaults returns c with the zero fields set and checks it.
func (c Config) withDefaults() (Config, error) {
	if c.Sink == nil {
		return c, errNoSink
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.ModelsInterval == 0 {
		c.ModelsInterval = DefaultModelsInterval
	}
	switch {
	case c.Jitter == 0:
		c.Jitter = DefaultJitter
	case c.Jitter < 0:
		c.Jitter = 0
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	switch {
	case c.Interval < time.Millisecond:
		return c, fmt.Errorf("interval %v: less than 1ms", c.Interval)
	case c.Timeout < 0:
		return c, fmt.Errorf("timeout %v: negative", c.Timeout)
	case c.Timeout >= c.ModelsInterval:
		return c, fmt.Errorf("timeout %v: not less than the models interval %v", c.Timeout, c.ModelsInterval)
	case c.Jitter > 0.5:
		return c, fmt.Errorf("jitter %v: more than 0.5", c.Jitter)
	case c.MaxBodyBytes < 0:
		return c, fmt.Errorf("max body bytes %d: negative", c.MaxBodyBytes)
	}
	return c, nil
}
