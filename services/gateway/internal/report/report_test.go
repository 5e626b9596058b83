package report

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
	"github.com/hermod/hermod/services/gateway/internal/pickerclient"
)

type pub struct {
	mu   sync.Mutex
	ids  []string
	full bool
	// encoded: the encoded events, as "subject id data".
	encoded []string
}

func (p *pub) Publish(subject, msgID string, _ proto.Message) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.full || subject != "hermod.completions.p" {
		return false
	}
	p.ids = append(p.ids, msgID)
	return true
}

func (p *pub) PublishEncoded(subject, msgID string, data []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.full {
		return false
	}
	p.encoded = append(p.encoded, subject+" "+msgID+" "+string(data))
	return true
}

type completer struct {
	mu    sync.Mutex
	ids   []string
	block chan struct{}
}

func (c *completer) Complete(_ context.Context, _ pickerclient.Decision, ev *eventsv1.RequestCompleted) error {
	if c.block != nil {
		<-c.block
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids = append(c.ids, ev.GetDecisionId())
	return nil
}

func TestReportPublishesAndCompletes(t *testing.T) {
	p, c := &pub{}, &completer{}
	r := New(Options{Publisher: p, Subject: "hermod.completions.p", Completer: c})
	for _, id := range []string{"a", "b", "c"} {
		r.Report(pickerclient.Decision{}, &eventsv1.RequestCompleted{DecisionId: id})
	}
	r.Close(context.Background())
	if len(p.ids) != 3 || p.ids[0] != "a" || len(c.ids) != 3 {
		t.Errorf("published %v completed %v", p.ids, c.ids)
	}
}

func TestFullQueuesDropAndCount(t *testing.T) {
	p := &pub{full: true}
	c := &completer{block: make(chan struct{})}
	r := New(Options{Publisher: p, Subject: "hermod.completions.p", Completer: c, Queue: 2, Workers: 1})
	for range 10 {
		r.Report(pickerclient.Decision{}, &eventsv1.RequestCompleted{DecisionId: "x"})
	}
	if got := testutil.ToFloat64(r.dropped.WithLabelValues("stream")); got != 10 {
		t.Errorf("stream drops %v", got)
	}
	// One in the worker, two queued, the rest dropped.
	if got := testutil.ToFloat64(r.dropped.WithLabelValues("rpc")); got < 7 {
		t.Errorf("rpc drops %v", got)
	}
	close(c.block)
	r.Close(context.Background())
}

// Close gives up on the queue when its context ends: a picker that does
// not answer does not hold the gateway's shutdown.
func TestCloseIsBounded(t *testing.T) {
	c := &completer{block: make(chan struct{})} // never answers unless canceled
	r := New(Options{Completer: ctxCompleter{c}, Queue: 100, Workers: 2})
	for range 50 {
		r.Report(pickerclient.Decision{}, &eventsv1.RequestCompleted{DecisionId: "x"})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	r.Close(ctx)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %s", d)
	}
	close(c.block)
}

// ctxCompleter honours the context like a gRPC call.
type ctxCompleter struct{ c *completer }

func (cc ctxCompleter) Complete(ctx context.Context, d pickerclient.Decision, ev *eventsv1.RequestCompleted) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-cc.c.block:
		return nil
	}
}

func TestDecidedPublishesTheEventHandedOver(t *testing.T) {
	p := &pub{}
	r := New(Options{Publisher: p, Subject: "hermod.completions.p", DecisionSubject: "hermod.decisions.p", Completer: &completer{}})
	defer r.Close(context.Background())
	if !r.PublishesDecisions() {
		t.Fatal("a reporter with a decision subject does not publish decisions")
	}
	r.Decided(pickerclient.Decision{PickResponse: &pickerv1.PickResponse{DecisionId: "a", DecisionEvent: []byte("event-a")}})
	// A picker that published the event itself handed none over.
	r.Decided(pickerclient.Decision{PickResponse: &pickerv1.PickResponse{DecisionId: "b"}})
	if got := strings.Join(p.encoded, ", "); got != "hermod.decisions.p a event-a" {
		t.Errorf("published %s", got)
	}
	p.full = true
	r.Decided(pickerclient.Decision{PickResponse: &pickerv1.PickResponse{DecisionId: "c", DecisionEvent: []byte("event-c")}})
	if got := testutil.ToFloat64(r.decisionsDropped); got != 1 {
		t.Errorf("decision drops %v", got)
	}

	// Without a decision subject, nothing is asked for nor published.
	p2 := &pub{}
	r2 := New(Options{Publisher: p2, Subject: "hermod.completions.p", Completer: &completer{}})
	defer r2.Close(context.Background())
	r2.Decided(pickerclient.Decision{PickResponse: &pickerv1.PickResponse{DecisionId: "a", DecisionEvent: []byte("event-a")}})
	if r2.PublishesDecisions() || len(p2.encoded) != 0 {
		t.Errorf("publishes decisions %v, published %v", r2.PublishesDecisions(), p2.encoded)
	}
}
