package preciseprefix

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

// logBuffer collects what the agreement tracker logs.
type logBuffer struct{ strings.Builder }

// The counters add predicted and reported cached tokens of this replica's
// decisions; engines reporting hits the index never predicted warn once,
// and not again before warnEvery.
func TestAgreementWarnsOfATokenizerMismatch(t *testing.T) {
	h := schedulingtest.NewHandle()
	clock := schedulingtest.NewClock()
	h.Clock = clock.Now
	var logs logBuffer
	a := newAgreement(h, slog.New(slog.NewTextHandler(&logs, nil)))
	ctx := context.Background()
	a.completed(ctx, 999, 500) // not this replica's decision: ignored
	for i := range agreementWindow - 1 {
		a.expect(uint64(i), 0)
		a.completed(ctx, uint64(i), 64)
	}
	if logs.Len() != 0 {
		t.Fatal("warned before the window filled")
	}
	a.expect(1000, 0)
	a.completed(ctx, 1000, 64)
	if !strings.Contains(logs.String(), "tokenizer mismatch?") {
		t.Fatalf("no warning after %d completions with hits the index never predicted: %q", agreementWindow, logs.String())
	}
	if got := testutil.ToFloat64(a.metrics.WithLabelValues("reported")); got != agreementWindow*64 {
		t.Errorf("reported cached tokens %v", got)
	}
	logs.Reset()
	clock.Advance(time.Minute)
	a.expect(1001, 0)
	a.completed(ctx, 1001, 64)
	if logs.Len() != 0 {
		t.Error("warned again within warnEvery")
	}
	// once predictions agree over a window, no warning, even after warnEvery
	for i := range agreementWindow {
		a.expect(uint64(2000+i), 60)
		a.completed(ctx, uint64(2000+i), 64)
	}
	clock.Advance(warnEvery)
	a.expect(3000, 60)
	a.completed(ctx, 3000, 64)
	if logs.Len() != 0 {
		t.Errorf("warned while predictions agree: %q", logs.String())
	}
	// the pending decisions are bounded
	for i := range maxPending + 10 {
		a.expect(uint64(10000+i), 1)
	}
	if len(a.pending) != maxPending {
		t.Errorf("%d pending decisions, want at most %d", len(a.pending), maxPending)
	}
}
