package predictedlatency

import (
	"math"
	"testing"
	"time"

	"github.com/hermod/hermod/libs/scheduling"
)

// The tokens counted for an endpoint's requests in flight are the
// counters' growth since the first scrape, less the finished requests'
// tokens; an engine restart or an idle endpoint starts the count afresh.
func TestProgressFollowsTheCounters(t *testing.T) {
	p := newProgress()
	e := scheduling.NewEndpoint("pod-0", "10.0.0.1", 8000, nil)
	at := time.Unix(1e9, 0)
	scrape := func(prompt, output float64) {
		at = at.Add(50 * time.Millisecond)
		e = e.WithMetrics(&scheduling.Metrics{PromptTokens: prompt, OutputTokens: output, UpdatedAt: at})
	}
	if _, _, ok := p.sync(e, 2); ok {
		t.Fatal("counted without metrics")
	}
	scrape(5000, 900) // the baseline: what earlier requests were counted for
	if _, _, ok := p.sync(e, 2); ok {
		t.Fatal("counted with one scrape")
	}
	scrape(7000, 1000)
	if pi, oi, ok := p.sync(e, 2); !ok || pi != 2000 || oi != 100 {
		t.Fatalf("after a scrape: %v %v %v", pi, oi, ok)
	}
	p.finished("pod-0", 1500, 60)
	scrape(7000, 1030)
	if pi, oi, _ := p.sync(e, 1); pi != 500 || oi != 70 {
		t.Fatalf("after a completion: %v %v", pi, oi)
	}
	if pi, oi, _ := p.sync(e, 1); pi != 500 || oi != 70 {
		t.Fatalf("the same scrape twice: %v %v", pi, oi)
	}
	scrape(100, 10) // restarted
	if pi, oi, _ := p.sync(e, 1); pi != 0 || oi != 0 {
		t.Fatalf("after a restart: %v %v", pi, oi)
	}
	scrape(300, 40)
	if _, oi, _ := p.sync(e, 0); oi != 0 {
		t.Fatalf("idle: %v", oi)
	}
}

// Predicted progress is scaled to what the engine counted.
func TestCorrectProgress(t *testing.T) {
	a := flightWork{prompt: 1000, output: 100}
	b := flightWork{prompt: 3000, output: 300}
	work := []flightWork{a, b}
	work[0].generated, work[1].pending = 40, 1
	// the prediction: a prefilled and 40 tokens out, b waiting; the engine:
	// half of b's prompt too, and 80 tokens
	correct(work, 2500, 80, 1000, 40, 4000)
	// 1500 of the 4000 prompt tokens are left, all b's: half of its prompt
	if got := work[1].pending; math.Abs(got-0.5) > 1e-9 {
		t.Errorf("b still to prefill %v of its prompt, want 0.5", got)
	}
	if got := work[0].generated; got != 80 {
		t.Errorf("a generated %v, want 80", got)
	}
	// a request cannot be done while in flight
	correct(work, 4000, 1000, 4000, 80, 4000)
	if work[0].generated != 99 || work[1].generated != 0 {
		t.Errorf("generated %v %v", work[0].generated, work[1].generated)
	}
	// nothing predicted, tokens counted: shared out
	work = []flightWork{a, b}
	work[0].pending, work[1].pending = 1, 1
	correct(work, 0, 50, 0, 0, 4000)
	if work[0].generated != 25 || work[1].generated != 25 || work[0].pending != 1 {
		t.Errorf("shared out: %+v %+v", work[0], work[1])
	}
}
