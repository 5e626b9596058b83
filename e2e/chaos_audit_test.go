package e2e

import (
	"context"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/bus"
)

// chaosAudit is the routing-decision and completion streams as an auditor
// reads them: every stored message once, by its stream sequence, so that
// a redelivery (a consumer that reconnected) is not mistaken for a second
// message, and a message stored twice is.
type chaosAudit struct {
	mu          sync.Mutex
	decisions   map[string]map[uint64]bool // request id -> stream sequences
	completions map[string]map[uint64]bool
}

func (s *devstack) audit(t *testing.T) *chaosAudit {
	t.Helper()
	ctx := context.Background()
	js, err := jetstream.New(s.connectNATS(t, "e2e-audit"))
	if err != nil {
		t.Fatal(err)
	}
	a := &chaosAudit{decisions: map[string]map[uint64]bool{}, completions: map[string]map[uint64]bool{}}
	dsubj, _ := bus.DecisionsSubject(s.state.Pool)
	csubj, _ := bus.CompletionsSubject(s.state.Pool)
	dc, err := bus.Consume(ctx, js, bus.ConsumeOptions{Stream: bus.DecisionsStream, FilterSubject: dsubj}, func(d *eventsv1.RoutingDecision, m bus.Meta) {
		a.add(a.decisions, d.GetRequestId(), m.Sequence)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dc.Close)
	cc, err := bus.Consume(ctx, js, bus.ConsumeOptions{Stream: bus.CompletionsStream, FilterSubject: csubj}, func(c *eventsv1.RequestCompleted, m bus.Meta) {
		a.add(a.completions, c.GetRequestId(), m.Sequence)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Close)
	return a
}

func (a *chaosAudit) add(m map[string]map[uint64]bool, requestID string, seq uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if m[requestID] == nil {
		m[requestID] = map[uint64]bool{}
	}
	m[requestID][seq] = true
}

// counts returns how many decisions and completions the streams hold for
// a request.
func (a *chaosAudit) counts(requestID string) (int, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.decisions[requestID]), len(a.completions[requestID])
}
