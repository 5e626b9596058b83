package scrape

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hermod/hermod/services/collector/internal/enginemetrics"
)

// runModels polls t's /v1/models at once and then every models interval
// until ctx ends, keeping the served model names of the latest good poll.
func (s *Scraper) runModels(ctx context.Context, t *target, log *slog.Logger) {
	var body bytes.Buffer
	st := streak{log: log, kind: kindModels}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		start := time.Now()
		ids, err := s.pollModels(ctx, t, &body)
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
		timer.Reset(jittered(s.cfg.ModelsInterval, s.cfg.Jitter))
	}
}

// pollModels fetches and parses /v1/models and returns the model IDs.
func (s *Scraper) pollModels(ctx context.Context, t *target, body *bytes.Buffer) ([]string, error) {
	if _, err := s.fetch(ctx, t.modelsURL, acceptModels, body); err != nil {
		return nil, err
	}
	models, err := enginemetrics.ParseModels(body.Bytes())
	if err != nil {
		return nil, &scrapeError{reasonParse, fmt.Errorf("GET %s: %w", t.modelsURL, err)}
	}
	return enginemetrics.ModelIDs(models), nil
}
