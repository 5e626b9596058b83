package scrape

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hermod/hermod/libs/plugins/datalayer"
	"github.com/hermod/hermod/libs/scheduling"
)

// ModelsPoll is how a Scraper polls each endpoint's served models: Source
// fetches them and Extractor turns what it fetched into the endpoint's
// model names. They are the data-layer plugins of the pool's
// EndpointPickerConfig (a models-data-source, with its scheme, path and
// TLS setting, and model-server-protocol-models), or by default a
// models-data-source with its default parameters (http, /v1/models).
type ModelsPoll struct {
	// Source fetches an endpoint's models; nil: the default
	// models-data-source.
	Source scheduling.DataSource
	// Extractor sets the Models of an endpoint from what Source fetched;
	// nil: model-server-protocol-models.
	Extractor scheduling.DataExtractor
	// Interval is the time between two polls of an endpoint; zero:
	// Config.ModelsInterval.
	Interval time.Duration
}

// SetModelsPoll makes p how every endpoint's served models are polled from
// now on; the zero ModelsPoll restores the default (http, /v1/models,
// Config.ModelsInterval). Every endpoint is polled with it at once; until
// that poll succeeds, its served models stay those of its latest good poll.
// SetModelsPoll returns once no poll uses the previous ModelsPoll any more
// (at most Config.Timeout later), so the caller may then close the previous
// Source. The Scraper does not close the sources it is given.
func (s *Scraper) SetModelsPoll(p ModelsPoll) {
	if p.Source == nil {
		p.Source = s.defaultModels
	}
	if p.Extractor == nil {
		p.Extractor = datalayer.NewModelsExtractor("")
	}
	if p.Interval <= 0 {
		p.Interval = s.cfg.ModelsInterval
	}
	s.polls.replace(p)
}

// runModels polls t's served models at once and then every models
// interval, and at once again when the ModelsPoll changes, until ctx ends.
// It keeps the served model names of the latest good poll.
func (s *Scraper) runModels(ctx context.Context, t *target, log *slog.Logger) {
	st := streak{log: log, kind: kindModels}
	timer := time.NewTimer(0)
	defer timer.Stop()
	var replaced <-chan struct{} // nil until the first poll
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-replaced:
		}
		a := s.polls.acquire()
		start := time.Now()
		ids, err := s.pollModels(ctx, &a.poll, t)
		replaced = a.replaced
		interval := a.poll.Interval
		a.release()
		if errors.Is(err, errStopped) {
			return
		}
		end := time.Now()
		s.tel.observe(kindModels, end.Sub(start), err)
		if err != nil {
			st.fail(end, err)
		} else {
			t.models.Store(&ids)
			st.ok(end)
		}
		timer.Reset(jittered(interval, s.cfg.Jitter))
	}
}

// pollModels fetches t's models with p within the scrape timeout and
// returns their names.
func (s *Scraper) pollModels(ctx context.Context, p *ModelsPoll, t *target) ([]string, error) {
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	data, err := p.Source.Fetch(rctx, t.endpoint)
	if err != nil {
		return nil, classifyFetch(ctx, err)
	}
	ep := *t.endpoint // the extractor's own copy
	if err := p.Extractor.Extract(rctx, data, &ep); err != nil {
		return nil, &scrapeError{reasonParse, fmt.Errorf("%s: %w", p.Source.TypedName(), err)}
	}
	return ep.Models, nil
}

// classifyFetch turns an error of a data source's Fetch into a
// *scrapeError, or errStopped when the loop's context has ended.
func classifyFetch(loop context.Context, err error) error {
	if loop.Err() != nil {
		return errStopped
	}
	var status *datalayer.StatusError
	var body *datalayer.BodyError
	switch {
	case errors.As(err, &status):
		return &scrapeError{reasonStatus, err}
	case errors.As(err, &body):
		return &scrapeError{reasonParse, err}
	}
	return classify(loop, err)
}
