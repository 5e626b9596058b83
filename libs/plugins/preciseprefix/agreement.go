package preciseprefix

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/telemetry"
)

// The self-check: per request, the prompt tokens the index said the chosen
// endpoint held against the cached tokens the engine reported when it
// answered (usage.prompt_tokens_details.cached_tokens). When the engines
// report hits the index never predicted, the picker's tokenizer is not the
// engines' and precise prefix routing matches nothing: a warning says so.
const (
	// maxPending bounds the decisions awaiting their completion.
	maxPending = 8192
	// agreementWindow is how many completions the warning looks back on,
	// and minReportedTokens how many cached tokens they must have reported.
	agreementWindow   = 100
	minReportedTokens = 1000
	// mismatchShare: predictions below this share of the reported cached
	// tokens are a mismatch.
	mismatchShare = 0.05
	// warnEvery spaces the warnings out.
	warnEvery = 10 * time.Minute
)

// agreement tracks predicted and reported cached tokens.
type agreement struct {
	log     *slog.Logger
	now     func() time.Time
	metrics *prometheus.CounterVec

	mu       sync.Mutex
	pending  map[uint64]int // decision -> predicted cached tokens
	order    []uint64       // pending's keys, oldest first
	window   [agreementWindow][2]int
	filled   int
	next     int
	lastWarn time.Time
}

func newAgreement(h scheduling.Handle, log *slog.Logger) *agreement {
	return &agreement{log: log, now: h.Now, pending: map[uint64]int{},
		metrics: scheduling.Metric(h, telemetry.NewCounterVec("hermod_picker_prefix_cached_tokens_total",
			"Prompt tokens of the requests a precise-prefix-cache-scorer routed: predicted cached on the chosen endpoint by the index (source=predicted), and reported cached by the engine (source=reported). Far apart: the picker's tokenizer is not the engines'.", "source"))}
}

// expect records what decision predicts (called in PreRequest).
func (a *agreement) expect(decision uint64, predicted int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.pending[decision]; ok {
		return
	}
	if len(a.order) >= maxPending {
		delete(a.pending, a.order[0])
		a.order = a.order[1:]
	}
	a.pending[decision] = predicted
	a.order = append(a.order, decision)
}

// completed compares a finished request's reported cached tokens with the
// prediction of its decision, if this replica took it.
func (a *agreement) completed(ctx context.Context, decision uint64, reported int) {
	a.mu.Lock()
	predicted, ok := a.pending[decision]
	if !ok {
		a.mu.Unlock()
		return
	}
	delete(a.pending, decision)
	a.window[a.next] = [2]int{predicted, reported}
	a.next = (a.next + 1) % agreementWindow
	a.filled = min(a.filled+1, agreementWindow)
	var sumP, sumR int
	for i := range a.filled {
		sumP += a.window[i][0]
		sumR += a.window[i][1]
	}
	warn := a.filled == agreementWindow && sumR >= minReportedTokens && float64(sumP) < mismatchShare*float64(sumR) &&
		a.now().Sub(a.lastWarn) >= warnEvery
	if warn {
		a.lastWarn = a.now()
	}
	a.mu.Unlock()
	a.metrics.WithLabelValues("predicted").Add(float64(predicted))
	a.metrics.WithLabelValues("reported").Add(float64(reported))
	if warn {
		a.log.LogAttrs(ctx, slog.LevelWarn, "tokenizer mismatch? the engines report cached prompt tokens the index never predicted: "+
			"precise prefix routing is matching nothing; give the picker the engines' tokenizer (tokenizersPoolConfig, or the tokenizer plugin's vllm render endpoint)",
			slog.Int("requests", agreementWindow), slog.Int("reported_cached_tokens", sumR), slog.Int("predicted_cached_tokens", sumP))
	}
}
