// Package workload holds benchmark workloads: requests with launch times.
// A workload is data (an arrival schedule and request specs), built once
// from its knobs and a seed, so that every policy of a benchmark serves
// exactly the same requests at the same simulated times.
package workload

import (
	"fmt"
	"time"
)

// Request is one request of a workload, sent to the OpenAI completions
// endpoint.
type Request struct {
	// ID names the request (the reference's ids: S001_HEAVY, B0001_SHORT,
	// M0001_MED, I001_HEAVY).
	ID string `json:"id"`
	// Kind is the request's class, for reports: HEAVY (a seed), SHORT, MED
	// or HEAVY_INLINE.
	Kind string `json:"kind"`
	// At is when the request is sent, after the workload starts, in
	// simulated time.
	At time.Duration `json:"at"`
	// ISLWords is the input length knob, in words.
	ISLWords int `json:"isl_words"`
	// MaxTokens is the output length (max_tokens).
	MaxTokens int `json:"max_tokens"`
	// Prompt is the text sent.
	Prompt string `json:"-"`
	// Headers are extra request headers (session tokens and the like).
	Headers map[string]string `json:"headers,omitempty"`
}

// Workload is a list of requests in the order they were generated; their
// launch times need not be sorted.
type Workload struct {
	// Name says what generated the workload.
	Name string `json:"name"`
	// Requests are the requests, in generation order.
	Requests []Request `json:"requests"`
	// Summary lines describe the workload (printed before a run).
	Summary []string `json:"summary"`
}

// Duration is the latest launch time.
func (w *Workload) Duration() time.Duration {
	var d time.Duration
	for _, r := range w.Requests {
		d = max(d, r.At)
	}
	return d
}

// Counts returns how many requests there are of each kind.
func (w *Workload) Counts() map[string]int {
	c := map[string]int{}
	for _, r := range w.Requests {
		c[r.Kind]++
	}
	return c
}

// Validate checks that every request can be sent.
func (w *Workload) Validate() error {
	seen := make(map[string]bool, len(w.Requests))
	for i, r := range w.Requests {
		switch {
		case r.ID == "":
			return fmt.Errorf("workload %s: request %d: empty id", w.Name, i)
		case seen[r.ID]:
			return fmt.Errorf("workload %s: request %d: duplicate id %q", w.Name, i, r.ID)
		case r.At < 0:
			return fmt.Errorf("workload %s: request %s: negative launch time %v", w.Name, r.ID, r.At)
		case r.MaxTokens < 1:
			return fmt.Errorf("workload %s: request %s: max_tokens must be positive (got %d)", w.Name, r.ID, r.MaxTokens)
		}
		seen[r.ID] = true
	}
	return nil
}

// seconds converts the reference's float seconds to a Duration, rounded to
// the nanosecond.
func seconds(s float64) time.Duration { return time.Duration(s*1e9 + 0.5) }
