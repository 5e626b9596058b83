package scrape

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/hermod/hermod/libs/scheduling"
)

// AttributePoll is a data source of the pool's config other than the
// engine's metrics and models (dcgm-data-source, say) with its
// extractors: every endpoint is fetched from with Source, and what the
// Extractors make of it (the attributes they set on the endpoint's
// metrics) is published with the endpoint's metrics (PodMetrics
// attributes).
type AttributePoll struct {
	Source     scheduling.DataSource
	Extractors []scheduling.DataExtractor
	// Interval is the time between two fetches of an endpoint; zero:
	// Config.Interval, as the metrics.
	Interval time.Duration
}

// SetAttributePolls makes ps the attribute polls of every endpoint from
// now on (nil: none); every endpoint is fetched from at once. Attributes
// of a source no longer polled are dropped; those of a source still
// polled stay those of its latest good fetch until the next. It returns
// once no loop uses the previous polls (at most Config.Timeout later), so
// the caller may then close their sources; the Scraper closes none.
func (s *Scraper) SetAttributePolls(ps []AttributePoll) {
	for i := range ps {
		if ps[i].Interval <= 0 {
			ps[i].Interval = s.cfg.Interval
		}
	}
	s.attributes.replace(ps)
}

// attributeState is a target's attribute loop's own state: for each
// source (by name), the attributes of its latest good fetch.
type attributeState struct {
	bySource map[string]map[string]float64
	due      map[string]time.Time
	streaks  map[string]*streak
}

// runAttributes fetches t's attributes from each attribute poll at its
// interval until ctx ends, and publishes the merged attributes of every
// source's latest good fetch (target.attributes).
func (s *Scraper) runAttributes(ctx context.Context, t *target, log *slog.Logger) {
	st := attributeState{bySource: map[string]map[string]float64{}, due: map[string]time.Time{}, streaks: map[string]*streak{}}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		a := s.attributes.acquire()
		polls, replaced := a.poll, a.replaced
		st.keepOnly(polls)
		now := time.Now()
		var next time.Time
		for i := range polls {
			p := &polls[i]
			name := p.Source.TypedName().Name
			if due, ok := st.due[name]; !ok || !now.Before(due) {
				if !s.fetchAttributes(ctx, p, t, &st, log) {
					a.release()
					return
				}
				st.due[name] = time.Now().Add(jittered(p.Interval, s.cfg.Jitter))
			}
			if due := st.due[name]; next.IsZero() || due.Before(next) {
				next = due
			}
		}
		a.release()
		t.attributes.Store(st.merged())

		var wake <-chan time.Time // nil: no poll, wait for one
		if !next.IsZero() {
			timer.Reset(time.Until(next))
			wake = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-replaced:
			timer.Stop()
			clear(st.due) // the new polls fetch at once
		}
	}
}

// fetchAttributes fetches t's attributes with p within the scrape timeout
// and records them as the source's latest good ones; false when ctx
// ended.
func (s *Scraper) fetchAttributes(ctx context.Context, p *AttributePoll, t *target, st *attributeState, log *slog.Logger) bool {
	name := p.Source.TypedName().Name
	sk := st.streaks[name]
	if sk == nil {
		sk = &streak{log: log.With("source", name), kind: kindAttributes}
		st.streaks[name] = sk
	}
	start := time.Now()
	attrs, err := s.extractAttributes(ctx, p, t)
	if errors.Is(err, errStopped) {
		return false
	}
	end := time.Now()
	s.tel.observe(kindAttributes, end.Sub(start), err)
	if err != nil {
		sk.fail(end, err)
		if len(attrs) > 0 {
			// An extractor set some attributes before it failed (a
			// multicluster-metrics-extractor missing one of its two
			// series): those are news; the others stay as they were.
			merged := maps.Clone(st.bySource[name])
			if merged == nil {
				merged = map[string]float64{}
			}
			maps.Copy(merged, attrs)
			st.bySource[name] = merged
		}
		return true
	}
	sk.ok(end)
	st.bySource[name] = attrs
	return true
}

// extractAttributes fetches and runs the extractors on an endpoint of its
// own, and returns the attributes they set. When an extractor fails, the
// error comes with what the extractors set before and after it.
func (s *Scraper) extractAttributes(ctx context.Context, p *AttributePoll, t *target) (map[string]float64, error) {
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	data, err := p.Source.Fetch(rctx, t.endpoint)
	if err != nil {
		return nil, classifyFetch(ctx, err)
	}
	ep := *t.endpoint
	ep.Metrics = nil
	var failed error
	for _, x := range p.Extractors {
		if err := x.Extract(rctx, data, &ep); err != nil && failed == nil {
			failed = &scrapeError{reasonParse, fmt.Errorf("%s: %w", x.TypedName(), err)}
		}
	}
	if ep.Metrics == nil {
		return nil, failed
	}
	return ep.Metrics.Attributes, failed
}

// keepOnly forgets the sources not among polls.
func (st *attributeState) keepOnly(polls []AttributePoll) {
	for name := range st.bySource {
		if !polled(polls, name) {
			delete(st.bySource, name)
		}
	}
	for name := range st.due {
		if !polled(polls, name) {
			delete(st.due, name)
			delete(st.streaks, name)
		}
	}
}

func polled(polls []AttributePoll, name string) bool {
	for i := range polls {
		if polls[i].Source.TypedName().Name == name {
			return true
		}
	}
	return false
}

// merged returns the attributes of every source, nil when there are none.
func (st *attributeState) merged() *map[string]float64 {
	if len(st.bySource) == 0 {
		return nil
	}
	out := map[string]float64{}
	for _, attrs := range st.bySource {
		maps.Copy(out, attrs)
	}
	return &out
}
