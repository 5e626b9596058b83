package workload

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
)

// SteadyOptions shape an open-loop stream of like requests arriving as a
// Poisson process: the "many proxies, slow requests" traffic of
// reference/002, where each request holds a pod for about a second.
type SteadyOptions struct {
	// Requests is how many requests are sent.
	Requests int
	// Rate is the mean arrivals per second (simulated).
	Rate float64
	// PromptTokens and MaxTokens size every request.
	PromptTokens, MaxTokens int
	Seed                    int64
}

// KindSteady is the kind of the steady workload's requests.
const KindSteady = "STEADY"

// Validate checks the options.
func (o SteadyOptions) Validate() error {
	var errs []error
	if o.Requests <= 0 {
		errs = append(errs, fmt.Errorf("requests: must be positive (got %d)", o.Requests))
	}
	if !(o.Rate > 0) || math.IsInf(o.Rate, 0) {
		errs = append(errs, fmt.Errorf("rate: must be positive (got %v)", o.Rate))
	}
	if o.PromptTokens <= 0 || o.MaxTokens <= 0 {
		errs = append(errs, errors.New("prompt and max tokens: must be positive"))
	}
	return errors.Join(errs...)
}

// Steady builds the workload, deterministically from the seed: every
// prompt differs from the first word (no prefix to share).
func Steady(o SteadyOptions) (*Workload, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0x57ead))
	w := &Workload{Name: "steady"}
	at := 0.0
	for i := range o.Requests {
		at += rng.ExpFloat64() / o.Rate
		w.Requests = append(w.Requests, Request{
			ID: fmt.Sprintf("R%05d", i+1), Kind: KindSteady, At: seconds(at),
			ISLWords: o.PromptTokens / 4, MaxTokens: o.MaxTokens, Prompt: text(rng, fmt.Sprintf("Request %d.", i+1), o.PromptTokens),
		})
	}
	w.Summary = append(w.Summary, fmt.Sprintf("[Workload] steady: %d requests, Poisson at %.2f/s, %d prompt tokens, max_tokens %d", o.Requests, o.Rate, o.PromptTokens, o.MaxTokens))
	return w, nil
}
