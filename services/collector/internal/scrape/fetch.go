package scrape

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
)

// The reasons of failed scrapes (label reason).
const (
	reasonTimeout = "timeout"
	reasonConnect = "connect"
	reasonStatus  = "status"
	reasonParse   = "parse"
)

// scrapeError is a failed scrape and its reason.
type scrapeError struct {
	reason string
	err    error
}

func (e *scrapeError) Error() string { return e.err.Error() }
func (e *scrapeError) Unwrap() error { return e.err }

// errStopped is returned when the loop's context ends during a request.
var errStopped = errors.New("scrape loop stopped")

// acceptMetrics is the Accept header of scrapes. It asks for the classic
// text format: Python's prometheus_client (vLLM, SGLang) answers
// OpenMetrics to any Accept that mentions it, whatever the q-values, and
// the text format is the cheaper to read. (Model lists are fetched by the
// models data source, libs/plugins/datalayer.)
const acceptMetrics = "text/plain;version=0.0.4;q=1,*/*;q=0.1"

// fetch GETs url within the scrape timeout and reads the body into buf. It
// returns the response's Content-Type, or a *scrapeError, or errStopped when
// ctx ends.
func (s *Scraper) fetch(ctx context.Context, client *http.Client, url, accept string, buf *bytes.Buffer) (string, error) {
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
	if err != nil {
		return "", &scrapeError{reasonConnect, fmt.Errorf("new request: %w", err)}
	}
	req.Header.Set("Accept", accept)
	resp, err := client.Do(req)
	if err != nil {
		return "", classify(ctx, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// Drain a little so the connection can be reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return "", &scrapeError{reasonStatus, fmt.Errorf("GET %s: status %s", url, resp.Status)}
	}
	buf.Reset()
	n, err := buf.ReadFrom(io.LimitReader(resp.Body, s.cfg.MaxBodyBytes+1))
	if err != nil {
		return "", classify(ctx, fmt.Errorf("GET %s: read body: %w", url, err))
	}
	if n > s.cfg.MaxBodyBytes {
		return "", &scrapeError{reasonParse, fmt.Errorf("GET %s: body larger than %d bytes", url, s.cfg.MaxBodyBytes)}
	}
	return resp.Header.Get("Content-Type"), nil
}

// classify turns a transport error into a *scrapeError, or errStopped when
// the loop's context has ended.
func classify(loop context.Context, err error) error {
	if loop.Err() != nil {
		return errStopped
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return &scrapeError{reasonTimeout, err}
	}
	return &scrapeError{reasonConnect, err}
}
