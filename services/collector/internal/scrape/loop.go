package scrape

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/enginemetrics"
)

// metricsLoop scrapes one target's /metrics. Its state is the loop
// goroutine's own.
type metricsLoop struct {
	s      *Scraper
	t      *target
	parser *enginemetrics.Parser
	body   bytes.Buffer
	// at and url are the metrics source the loop scrapes and its URL for
	// this target.
	at     *metricsEndpoint
	url    string
	streak streak

	// last is the latest good scrape, taken at lastSuccess.
	last        enginemetrics.Metrics
	lastSuccess time.Time
	failures    int
}

// runMetrics scrapes t's /metrics at every tick until ctx ends.
func (s *Scraper) runMetrics(ctx context.Context, t *target, log *slog.Logger) {
	l := &metricsLoop{s: s, t: t, parser: enginemetrics.NewParser(), streak: streak{log: log, kind: kindMetrics}}
	tick := newTicker(time.Now(), s.cfg.Interval, s.cfg.Jitter)
	timer := time.NewTimer(tick.wait(time.Now()))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		if !l.scrape(ctx) {
			return
		}
		now := time.Now()
		if n := tick.advance(now); n > 0 {
			s.tel.skipped.Add(float64(n))
		}
		timer.Reset(tick.wait(now))
	}
}

// scrape scrapes once and publishes the result; false when ctx ended.
func (l *metricsLoop) scrape(ctx context.Context) bool {
	start := time.Now()
	m, err := l.get(ctx)
	if errors.Is(err, errStopped) {
		return false
	}
	end := time.Now()
	l.s.tel.observe(kindMetrics, end.Sub(start), err)
	if err != nil {
		l.failures++
		l.streak.fail(end, err)
	} else {
		l.last, l.lastSuccess, l.failures = m, start, 0
		l.t.lastGood.Store(start.UnixNano())
		l.streak.ok(end)
	}
	l.s.cfg.Sink.Publish(l.podMetrics(start, err))
	return true
}

// get fetches and parses /metrics.
func (l *metricsLoop) get(ctx context.Context) (enginemetrics.Metrics, error) {
	if at := l.s.metricsAt.Load(); at != l.at {
		l.at, l.url = at, at.url(l.t.address)
	}
	contentType, err := l.s.fetch(ctx, l.at.client, l.url, acceptMetrics, &l.body)
	if err != nil {
		return enginemetrics.Metrics{}, err
	}
	m, err := l.parser.Parse(l.body.Bytes(), enginemetrics.FormatOf(contentType))
	if err != nil {
		return enginemetrics.Metrics{}, &scrapeError{reasonParse, fmt.Errorf("GET %s: %w", l.url, err)}
	}
	return m, nil
}

// podMetrics returns the event of a scrape taken at at that failed with err
// (nil if it succeeded): the latest good values and the scrape's health.
func (l *metricsLoop) podMetrics(at time.Time, err error) *eventsv1.PodMetrics {
	pm := &eventsv1.PodMetrics{
		Pool:                l.t.pool,
		Endpoint:            l.t.name,
		Address:             l.t.address,
		Time:                timestamppb.New(at),
		ServedModels:        l.t.servedModels(),
		Attributes:          l.t.attributesNow(),
		ConsecutiveFailures: int32(min(l.failures, math.MaxInt32)),
	}
	if err != nil {
		pm.Error = err.Error()
	}
	if l.lastSuccess.IsZero() {
		return pm
	}
	m := &l.last
	pm.LastSuccess = timestamppb.New(l.lastSuccess)
	pm.Engine = m.Engine
	pm.WaitingRequests = m.Waiting
	pm.RunningRequests = m.Running
	pm.KvCacheUsage = m.KVCacheUsage
	pm.BlockSize = m.BlockSize
	pm.NumGpuBlocks = m.NumGPUBlocks
	pm.MaxLora = m.MaxLoRA
	pm.RunningLoraAdapters = append([]string(nil), m.RunningLoRAAdapters...)
	pm.WaitingLoraAdapters = append([]string(nil), m.WaitingLoRAAdapters...)
	pm.PromptTokensTotal = m.PromptTokensTotal
	pm.GenerationTokensTotal = m.GenerationTokensTotal
	pm.PrefixCacheQueriesTotal = m.PrefixCacheQueriesTotal
	pm.PrefixCacheHitsTotal = m.PrefixCacheHitsTotal
	pm.PreemptionsTotal = m.PreemptionsTotal
	pm.RequestSuccessTotal = m.RequestSuccessTotal
	return pm
}
