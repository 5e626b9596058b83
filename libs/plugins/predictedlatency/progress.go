package predictedlatency

import (
	"sync"
	"time"

	"github.com/hermod/hermod/libs/scheduling"
)

// progress measures how far each endpoint's requests in flight have got,
// from its engine's token counters: the prompt and output tokens counted
// since the requests in flight started, less those of the requests that
// finished since. It corrects the predicted progress of the requests in
// flight (their predicted TTFT and TPOT may be off, in a burst by far),
// so that what is left of an endpoint's work is what its engine shows,
// 50 ms old at most. Each replica measures for itself (metrics are not
// part of the streams); the model's training data stays the decisions'.
type progress struct {
	mu   sync.Mutex
	pods map[string]*podProgress
}

// podProgress is one endpoint's counters and the tokens its requests in
// flight have been counted for.
type podProgress struct {
	scrape         time.Time // of the counters below
	prompt, output float64   // the engine's counters at scrape
	promptIn       float64   // prompt tokens prefilled for the requests in flight
	outputIn       float64   // output tokens generated for them
}

func newProgress() *progress { return &progress{pods: map[string]*podProgress{}} }

// sync folds a newer scrape of e's counters in and returns the tokens the
// requests in flight have been counted for; ok is false before two
// scrapes have been seen (no baseline yet). inFlight is how many requests
// are in flight to e: with none, nothing is counted for them (errors
// that accumulated, from completions that raced the counters, go).
func (p *progress) sync(e *scheduling.Endpoint, inFlight int) (promptIn, outputIn float64, ok bool) {
	m := e.Metrics
	p.mu.Lock()
	defer p.mu.Unlock()
	pp := p.pods[e.Name]
	if m == nil || m.UpdatedAt.IsZero() {
		return 0, 0, false
	}
	if pp == nil {
		pp = &podProgress{scrape: m.UpdatedAt, prompt: m.PromptTokens, output: m.OutputTokens}
		p.pods[e.Name] = pp
		return 0, 0, false
	}
	if m.UpdatedAt.After(pp.scrape) {
		dp, do := m.PromptTokens-pp.prompt, m.OutputTokens-pp.output
		if dp < 0 || do < 0 {
			// the engine restarted: its requests are gone
			dp, do = 0, 0
			pp.promptIn, pp.outputIn = 0, 0
		}
		pp.promptIn += dp
		pp.outputIn += do
		pp.scrape, pp.prompt, pp.output = m.UpdatedAt, m.PromptTokens, m.OutputTokens
	}
	if inFlight == 0 {
		pp.promptIn, pp.outputIn = 0, 0
	}
	return max(pp.promptIn, 0), max(pp.outputIn, 0), true
}

// finished takes a finished request's tokens off its endpoint's count.
func (p *progress) finished(endpoint string, prompt, output float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pp := p.pods[endpoint]; pp != nil {
		pp.promptIn -= prompt
		pp.outputIn -= output
	}
}

// forget drops an endpoint that left the pool.
func (p *progress) forget(endpoint string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.pods, endpoint)
}
