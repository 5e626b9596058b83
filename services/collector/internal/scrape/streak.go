package scrape

import (
	"errors"
	"log/slog"
	"time"
)

// streak tracks a loop's failures in a row and logs their start and end,
// rather than every failure.
type streak struct {
	log   *slog.Logger
	kind  string
	fails int
	since time.Time
}

// fail records a failure at now.
func (s *streak) fail(now time.Time, err error) {
	s.fails++
	if s.fails > 1 {
		return
	}
	s.since = now
	reason := ""
	var se *scrapeError
	if errors.As(err, &se) {
		reason = se.reason
	}
	s.log.Warn("scrape failed", "kind", s.kind, "reason", reason, "error", err.Error())
}

// ok records a success at now.
func (s *streak) ok(now time.Time) {
	if s.fails == 0 {
		return
	}
	s.log.Info("scrape recovered", "kind", s.kind, "failed_scrapes", s.fails, "down_for", now.Sub(s.since))
	s.fails = 0
}
