package bus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/testkit/bustest"
)

// newTestPublisher starts a Publisher with fast retries, closed (with a
// bounded flush) when the test ends.
func newTestPublisher(t *testing.T, e env, opts ...Option) *Publisher {
	t.Helper()
	opts = append([]Option{WithLogger(testLogger(t)), WithBackoff(10*time.Millisecond, 100*time.Millisecond)}, opts...)
	p, err := NewPublisher(e.nc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = p.Close(ctx)
	})
	return p
}

// streamDecisions reads every message of the decisions stream in order and
// returns the decision ids, checking that each carries its id as
// Nats-Msg-Id.
func streamDecisions(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	ctx := testContext(t)
	total := streamMsgs(t, js, DecisionsStream)
	cons, err := js.OrderedConsumer(ctx, DecisionsStream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for uint64(len(ids)) < total {
		batch, err := cons.Fetch(min(1000, int(total)-len(ids)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			var d eventsv1.RoutingDecision
			if err := proto.Unmarshal(m.Data(), &d); err != nil {
				t.Fatal(err)
			}
			if id := m.Headers().Get(jetstream.MsgIDHeader); id != d.GetDecisionId() {
				t.Fatalf("Nats-Msg-Id %q, decision %q", id, d.GetDecisionId())
			}
			ids = append(ids, d.GetDecisionId())
		}
		if err := batch.Error(); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

func wantIDs(pool string, from, to int) []string {
	ids := make([]string, 0, to-from)
	for i := from; i < to; i++ {
		ids = append(ids, fmt.Sprintf("%s-%d", pool, i))
	}
	return ids
}

func checkIDs(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("stream holds %d events, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("event %d is %s, want %s (order or duplicates broken)", i, got[i], want[i])
		}
	}
}

// publishAll publishes decisions from..to-1 of a pool and fails if one is
// refused.
func publishAll(t *testing.T, p *Publisher, pool string, from, to int) {
	t.Helper()
	subject, err := DecisionsSubject(pool)
	if err != nil {
		t.Fatal(err)
	}
	for i := from; i < to; i++ {
		d := decision(pool, i)
		if !p.Publish(subject, d.GetDecisionId(), d) {
			t.Fatalf("publish %s refused: %+v", d.GetDecisionId(), p.Stats())
		}
	}
}

func TestPublisherPublishesInOrder(t *testing.T) {
	t.Parallel()
	e := integration(t)
	reg := prometheus.NewRegistry()
	// A small window, so that the 3000 events go through many of them.
	p := newTestPublisher(t, e, WithRegisterer(reg), WithMaxPending(64))
	publishAll(t, p, "p", 0, 3000)
	if err := p.Close(testContext(t)); err != nil {
		t.Fatal(err)
	}
	checkIDs(t, streamDecisions(t, e.js), wantIDs("p", 0, 3000))
	st := p.Stats()
	if st.Published != 3000 || st.Dropped != 0 || st.Queued != 0 {
		t.Fatalf("stats %+v", st)
	}
	if v := metricValue(t, reg, "hermod_bus_published_total"); v != 3000 {
		t.Fatalf("hermod_bus_published_total = %v", v)
	}
	if v := metricValue(t, reg, "hermod_bus_publish_queue_length"); v != 0 {
		t.Fatalf("hermod_bus_publish_queue_length = %v", v)
	}
}

// TestPublisherPublishesEncodedInOrder: events encoded elsewhere go out as
// they are, in order with the ones the Publisher marshals.
func TestPublisherPublishesEncodedInOrder(t *testing.T) {
	t.Parallel()
	e := integration(t)
	p := newTestPublisher(t, e)
	subject, err := DecisionsSubject("p")
	if err != nil {
		t.Fatal(err)
	}
	encoded := map[string][]byte{}
	for i := range 200 {
		d := decision("p", i)
		if i%2 == 0 {
			if !p.Publish(subject, d.GetDecisionId(), d) {
				t.Fatalf("publish %d refused", i)
			}
			continue
		}
		data, err := proto.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		encoded[d.GetDecisionId()] = data
		if !p.PublishEncoded(subject, d.GetDecisionId(), data) {
			t.Fatalf("publish encoded %d refused", i)
		}
	}
	if err := p.Close(testContext(t)); err != nil {
		t.Fatal(err)
	}
	checkIDs(t, streamDecisions(t, e.js), wantIDs("p", 0, 200))
	// The stored bytes are the caller's (the last event, 199, was encoded).
	stream, err := e.js.Stream(testContext(t), DecisionsStream)
	if err != nil {
		t.Fatal(err)
	}
	last, err := stream.GetLastMsgForSubject(testContext(t), subject)
	if err != nil {
		t.Fatal(err)
	}
	if want := encoded["p-199"]; !bytes.Equal(last.Data, want) {
		t.Fatalf("stored %x, published %x", last.Data, want)
	}
}

func TestPublisherDeduplicatesByMsgID(t *testing.T) {
	t.Parallel()
	e := integration(t)
	reg := prometheus.NewRegistry()
	p := newTestPublisher(t, e, WithRegisterer(reg))
	subject, _ := DecisionsSubject("p")
	d := decision("p", 7)
	for range 3 {
		if !p.Publish(subject, d.GetDecisionId(), d) {
			t.Fatal("refused")
		}
	}
	// A different id is a different event, even with the same payload.
	if !p.Publish(subject, "other-id", d) {
		t.Fatal("refused")
	}
	if err := p.Close(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if n := streamMsgs(t, e.js, DecisionsStream); n != 2 {
		t.Fatalf("stream holds %d messages, want 2", n)
	}
	if st := p.Stats(); st.Published != 4 || st.Duplicates != 2 {
		t.Fatalf("stats %+v, want 4 published, 2 duplicates", st)
	}
	if v := metricValue(t, reg, "hermod_bus_publish_duplicates_total"); v != 2 {
		t.Fatalf("hermod_bus_publish_duplicates_total = %v", v)
	}
}

func TestPublisherSurvivesServerRestart(t *testing.T) {
	t.Parallel()
	e := integration(t)
	p := newTestPublisher(t, e, WithQueueSize(1000))
	publishAll(t, p, "p", 0, 100)
	eventually(t, 10*time.Second, "first 100 events not published", func() bool { return p.Stats().Published == 100 })

	bustest.Stop(t, e.srv)
	// Published while the server is down: queued, not lost.
	publishAll(t, p, "p", 100, 300)
	time.Sleep(100 * time.Millisecond)
	if st := p.Stats(); st.Published != 100 || st.Dropped != 0 {
		t.Fatalf("stats while down: %+v", st)
	}
	bustest.Restart(t, e.srv)
	publishAll(t, p, "p", 300, 400)
	eventually(t, 10*time.Second, "events not published after the restart", func() bool { return p.Stats().Published >= 400 })
	if err := p.Close(testContext(t)); err != nil {
		t.Fatal(err)
	}
	checkIDs(t, streamDecisions(t, e.js), wantIDs("p", 0, 400))
	if st := p.Stats(); st.Dropped != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestPublisherRetriesInFlightEventsAcrossRestart(t *testing.T) {
	t.Parallel()
	e := integration(t)
	p := newTestPublisher(t, e, WithQueueSize(20000))
	// Restart the server while events stream in: whatever was in flight is
	// retried, and a retried event that had been stored is deduplicated.
	var wg sync.WaitGroup
	wg.Go(func() {
		time.Sleep(20 * time.Millisecond)
		bustest.Restart(t, e.srv)
	})
	subject, _ := DecisionsSubject("p")
	const n = 3000
	for i := range n {
		d := decision("p", i)
		for !p.Publish(subject, d.GetDecisionId(), d) {
			time.Sleep(time.Millisecond)
		}
		if i%50 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	wg.Wait()
	if err := p.Close(testContext(t)); err != nil {
		t.Fatal(err)
	}
	// Every event once, in order.
	checkIDs(t, streamDecisions(t, e.js), wantIDs("p", 0, n))
	if st := p.Stats(); st.Published < n || st.Dropped != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestPublisherDropsWhenQueueFull(t *testing.T) {
	t.Parallel()
	e := integration(t)
	reg := prometheus.NewRegistry()
	const queueSize, maxPending = 8, 4
	p := newTestPublisher(t, e, WithRegisterer(reg), WithQueueSize(queueSize), WithMaxPending(maxPending))
	bustest.Stop(t, e.srv)
	subject, _ := DecisionsSubject("p")
	var accepted []string
	refused := 0
	for i := range 100 {
		d := decision("p", i)
		if p.Publish(subject, d.GetDecisionId(), d) {
			accepted = append(accepted, d.GetDecisionId())
		} else {
			refused++
		}
	}
	if len(accepted) < queueSize || len(accepted) > queueSize+maxPending {
		t.Fatalf("%d events accepted with a queue of %d and %d in flight", len(accepted), queueSize, maxPending)
	}
	if got := metricValue(t, reg, "hermod_bus_publish_dropped_total", "reason", "queue_full"); got != float64(refused) {
		t.Fatalf("hermod_bus_publish_dropped_total{reason=queue_full} = %v, want %d", got, refused)
	}
	if got := metricValue(t, reg, "hermod_bus_publish_queue_length"); got < 1 {
		t.Fatalf("hermod_bus_publish_queue_length = %v", got)
	}
	bustest.Restart(t, e.srv)
	if err := p.Close(testContext(t)); err != nil {
		t.Fatal(err)
	}
	checkIDs(t, streamDecisions(t, e.js), accepted)
	if st := p.Stats(); st.Dropped != uint64(refused) || st.Published != uint64(len(accepted)) {
		t.Fatalf("stats %+v, want %d published, %d dropped", st, len(accepted), refused)
	}
}

func TestPublisherCloseFlushes(t *testing.T) {
	t.Parallel()
	e := integration(t)
	p := newTestPublisher(t, e)
	publishAll(t, p, "p", 0, 2000)
	if err := p.Close(testContext(t)); err != nil {
		t.Fatal(err)
	}
	checkIDs(t, streamDecisions(t, e.js), wantIDs("p", 0, 2000))
	// Closed: refuses and counts.
	if p.Publish("hermod.decisions.p", "late", decision("p", 1)) {
		t.Fatal("Publish after Close accepted")
	}
	if st := p.Stats(); st.Dropped != 1 {
		t.Fatalf("stats %+v", st)
	}
	if err := p.Close(testContext(t)); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestPublisherCloseGivesUpWhenContextEnds(t *testing.T) {
	t.Parallel()
	e := integration(t)
	reg := prometheus.NewRegistry()
	p := newTestPublisher(t, e, WithRegisterer(reg))
	bustest.Stop(t, e.srv)
	publishAll(t, p, "p", 0, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := p.Close(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want a deadline error", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close took %s", d)
	}
	if got := metricValue(t, reg, "hermod_bus_publish_dropped_total", "reason", "shutdown"); got != 10 {
		t.Fatalf("dropped{reason=shutdown} = %v, want 10", got)
	}
}

func TestPublisherDropsWhatNoStreamTakes(t *testing.T) {
	t.Parallel()
	e := integration(t)
	reg := prometheus.NewRegistry()
	p := newTestPublisher(t, e, WithRegisterer(reg), WithMaxAttempts(2), WithAckTimeout(200*time.Millisecond))
	if !p.Publish("hermod.nostream.p", "x-1", decision("p", 1)) {
		t.Fatal("refused")
	}
	publishAll(t, p, "p", 0, 5)
	if err := p.Close(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if got := metricValue(t, reg, "hermod_bus_publish_dropped_total", "reason", "rejected"); got != 1 {
		t.Fatalf("dropped{reason=rejected} = %v, want 1", got)
	}
	if got := metricValue(t, reg, "hermod_bus_publish_failed_attempts_total"); got < 2 {
		t.Fatalf("failed attempts = %v, want >= 2", got)
	}
	// The events behind the bad one went through, in order.
	checkIDs(t, streamDecisions(t, e.js), wantIDs("p", 0, 5))
}

func TestPublisherCountsEncodeErrors(t *testing.T) {
	t.Parallel()
	e := integration(t)
	reg := prometheus.NewRegistry()
	p := newTestPublisher(t, e, WithRegisterer(reg))
	// Events are marshalled by the publishing goroutine: a malformed one
	// is dropped there, and counted; the next goes through.
	bad := &eventsv1.RoutingDecision{DecisionId: "\xff\xfe"} // not UTF-8: does not marshal
	if !p.Publish("hermod.decisions.p", "bad", bad) {
		t.Fatal("not queued")
	}
	publishAll(t, p, "p", 0, 1)
	if err := p.Close(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if got := metricValue(t, reg, "hermod_bus_publish_dropped_total", "reason", "encode"); got != 1 {
		t.Fatalf("dropped{reason=encode} = %v", got)
	}
	checkIDs(t, streamDecisions(t, e.js), wantIDs("p", 0, 1))
}

func TestPublishersShareRegisterer(t *testing.T) {
	t.Parallel()
	e := integration(t)
	reg := prometheus.NewRegistry()
	p1 := newTestPublisher(t, e, WithRegisterer(reg))
	p2 := newTestPublisher(t, e, WithRegisterer(reg))
	publishAll(t, p1, "a", 0, 10)
	publishAll(t, p2, "b", 0, 5)
	ctx := testContext(t)
	if err := errors.Join(p1.Close(ctx), p2.Close(ctx)); err != nil {
		t.Fatal(err)
	}
	if got := metricValue(t, reg, "hermod_bus_published_total"); got != 15 {
		t.Fatalf("hermod_bus_published_total = %v, want 15", got)
	}
}

func TestNewPublisherNeedsConnection(t *testing.T) {
	if _, err := NewPublisher(nil); err == nil {
		t.Fatal("nil connection accepted")
	}
}

func TestPublisherRetriesUnackedWithSameMsgID(t *testing.T) {
	t.Parallel()
	e := integration(t)
	// A core subscriber takes the subject but never acks, as a stream that
	// lost the message would.
	sub, err := e.nc.SubscribeSync("hermod.silent.p")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	p := newTestPublisher(t, e, WithRegisterer(reg), WithAckTimeout(100*time.Millisecond), WithMaxAttempts(3))
	if !p.Publish("hermod.silent.p", "silent-1", decision("p", 1)) {
		t.Fatal("refused")
	}
	for attempt := range 3 {
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("attempt %d: %v", attempt+1, err)
		}
		if id := m.Header.Get(jetstream.MsgIDHeader); id != "silent-1" {
			t.Fatalf("attempt %d: Nats-Msg-Id %q", attempt+1, id)
		}
	}
	eventually(t, 5*time.Second, "unacked event not dropped", func() bool {
		return metricValue(t, reg, "hermod_bus_publish_dropped_total", "reason", "rejected") == 1
	})
	if got := metricValue(t, reg, "hermod_bus_publish_failed_attempts_total"); got != 3 {
		t.Fatalf("failed attempts = %v, want 3", got)
	}
}
