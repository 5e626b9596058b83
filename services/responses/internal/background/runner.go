// Package background runs background responses: each runner takes due
// jobs from the store and sends each job's request to a gateway (with
// the run header naming the job and the run), renewing the job's lease
// while the gateway works. A gateway that cannot be reached or answers
// 429 or 5xx gets the job again later, with backoff, so a job outlives
// gateway restarts; a 4xx fails it; a cancelled job's run is stopped at
// the next renewal.
package background

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermod/hermod/libs/retry"
	"github.com/hermod/hermod/libs/telemetry"
	"github.com/hermod/hermod/services/responses/internal/store"
)

// RunHeader is the header a run sends: "<response id> <run token>" (the
// gateway's name for it).
const RunHeader = "Hermod-Background-Run"

// Options configure a runner.
type Options struct {
	Jobs store.Jobs
	// GatewayURL is the gateway's base URL ("http://host:port").
	GatewayURL string
	// Client sends the runs; nil is a client without a timeout (RunTimeout
	// bounds each run).
	Client *http.Client
	// Workers is how many runs go at once; 0 is 4.
	Workers int
	// Lease is how long a run holds a job between renewals; 0 is 30s. A
	// runner that dies leaves its jobs to others once it runs out.
	Lease time.Duration
	// Poll is how often an idle worker looks for due jobs; 0 is 500ms.
	Poll time.Duration
	// RunTimeout bounds one run; 0 is 10 minutes.
	RunTimeout time.Duration
	// MaxAttempts fails a job after that many runs that the gateway did
	// not answer; 0 is 20.
	MaxAttempts int
	Log         *slog.Logger
}

// Runner runs background responses.
type Runner struct {
	o    Options
	wake chan struct{}
	runs *prometheus.CounterVec
}

// New returns a runner; Collectors are its metrics.
func New(o Options) *Runner {
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.Lease <= 0 {
		o.Lease = 30 * time.Second
	}
	if o.Poll <= 0 {
		o.Poll = 500 * time.Millisecond
	}
	if o.RunTimeout <= 0 {
		o.RunTimeout = 10 * time.Minute
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 20
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	o.GatewayURL = strings.TrimRight(o.GatewayURL, "/")
	return &Runner{o: o, wake: make(chan struct{}, o.Workers),
		runs: telemetry.NewCounterVec("hermod_responses_background_runs_total",
			"Background response runs by outcome: completed, retried (the gateway was unreachable or busy), failed, cancelled, lost (the run no longer held its job), error (the store did not answer).", "outcome")}
}

// Collectors are the runner's metrics.
func (r *Runner) Collectors() []prometheus.Collector { return []prometheus.Collector{r.runs} }

// Wake tells an idle worker that a job was submitted.
func (r *Runner) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run works until ctx ends; runs in flight then give their jobs back.
func (r *Runner) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range r.o.Workers {
		wg.Go(func() { r.work(ctx) })
	}
	wg.Wait()
}

func (r *Runner) work(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.wake:
		}
		for ctx.Err() == nil && r.runOne(ctx) {
		}
		t.Reset(r.o.Poll)
	}
}

// runOne claims a due job and runs it; false when none was due.
func (r *Runner) runOne(ctx context.Context) bool {
	token := newToken()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	job, err := r.o.Jobs.Claim(cctx, token, r.o.Lease)
	cancel()
	if err != nil {
		r.runs.WithLabelValues("error").Inc()
		r.o.Log.Warn("background: could not claim a job", "err", err)
		return false
	}
	if job == nil {
		return false
	}
	r.finish(ctx, job, r.send(ctx, job))
	return true
}

// outcome is what a run came to.
type outcome struct {
	done   bool   // the gateway stored the response (or it was cancelled)
	lost   bool   // the run no longer holds the job
	retry  bool   // try again later
	reason string // why it was retried or failed
}

// send runs job once, renewing its lease until the gateway answers.
func (r *Runner) send(ctx context.Context, job *store.Job) outcome {
	rctx, cancel := context.WithTimeout(ctx, r.o.RunTimeout)
	defer cancel()
	var lost bool
	stop := r.renew(rctx, job, func() { lost = true; cancel() })
	defer stop()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, r.o.GatewayURL+"/v1/responses", bytes.NewReader(job.Request))
	if err != nil {
		return outcome{reason: "the gateway address is unusable: " + err.Error()}
	}
	for k, v := range job.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(RunHeader, job.ID+" "+job.Token)
	resp, err := r.o.Client.Do(req)
	if err != nil {
		stop()
		if lost {
			return outcome{lost: true}
		}
		return outcome{retry: true, reason: "the gateway did not answer: " + err.Error()}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch code := resp.StatusCode; {
	case code == http.StatusOK:
		return outcome{done: true}
	case code == http.StatusConflict:
		return outcome{lost: true}
	case code == http.StatusTooManyRequests || code >= 500:
		return outcome{retry: true, reason: fmt.Sprintf("the gateway answered %d: %s", code, errorMessage(body))}
	default:
		return outcome{reason: errorMessage(body)}
	}
}

// renew extends the job's lease every third of it; onLost is called once
// the run no longer holds the job. The returned func stops renewing.
func (r *Runner) renew(ctx context.Context, job *store.Job, onLost func()) (stop func()) {
	done := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(r.o.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			ectx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := r.o.Jobs.Extend(ectx, job.ID, job.Token, r.o.Lease)
			cancel()
			if errors.Is(err, store.ErrNotHeld) {
				onLost()
				return
			}
			if err != nil {
				r.o.Log.Warn("background: could not renew a lease", "id", job.ID, "err", err)
			}
		}
	})
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// finish records a run's outcome in the store.
func (r *Runner) finish(ctx context.Context, job *store.Job, o outcome) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	var err error
	label := "completed"
	switch {
	case o.done:
	case o.lost:
		label = "lost"
	case ctx.Err() != nil:
		label, err = "retried", r.o.Jobs.Retry(sctx, job.ID, job.Token, 0, "the runner stopped")
	case o.retry && job.Attempts < r.o.MaxAttempts:
		label, err = "retried", r.o.Jobs.Retry(sctx, job.ID, job.Token, retry.Nth(500*time.Millisecond, 30*time.Second, job.Attempts), o.reason)
	default:
		if o.retry {
			o.reason = fmt.Sprintf("gave up after %d attempts: %s", job.Attempts, o.reason)
		}
		label, err = "failed", r.o.Jobs.Fail(sctx, job.ID, job.Token, o.reason)
	}
	if errors.Is(err, store.ErrNotHeld) {
		label, err = "lost", nil
	}
	r.runs.WithLabelValues(label).Inc()
	if err != nil {
		r.runs.WithLabelValues("error").Inc()
		r.o.Log.Warn("background: could not record a run", "id", job.ID, "outcome", label, "err", err)
		return
	}
	r.o.Log.Info("background run", "id", job.ID, "attempt", job.Attempts, "outcome", label, "reason", o.reason)
}

// errorMessage is an OpenAI error body's message, or the body.
func errorMessage(body []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	return strings.TrimSpace(string(body))
}

func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
