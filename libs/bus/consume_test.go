package bus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/testkit/bustest"
)

// collector records what a Consumer delivers.
type collector struct {
	mu    sync.Mutex
	ids   []string
	metas []Meta
}

func (c *collector) handle(d *eventsv1.RoutingDecision, m Meta) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids = append(c.ids, d.GetDecisionId())
	c.metas = append(c.metas, m)
}

func (c *collector) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ids)
}

func (c *collector) got() ([]string, []Meta) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.ids...), append([]Meta(nil), c.metas...)
}

func (c *collector) wait(t *testing.T, n int) {
	t.Helper()
	eventually(t, 10*time.Second, fmt.Sprintf("%d messages not delivered", n), func() bool { return c.len() >= n })
}

// consume starts a Consumer of decisions, closed when the test ends.
func consume(t *testing.T, e env, o ConsumeOptions, handler func(*eventsv1.RoutingDecision, Meta)) *Consumer {
	t.Helper()
	if o.Stream == "" {
		o.Stream = DecisionsStream
	}
	if o.Logger == nil {
		o.Logger = testLogger(t)
	}
	c, err := Consume(testContext(t), e.js, o, handler)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not closed after 10s", what)
	}
}

func TestConsumeReplaysAndFollows(t *testing.T) {
	t.Parallel()
	e := integration(t)
	publishDecisions(t, e.js, "p", 0, 10)
	var col collector
	c := consume(t, e, ConsumeOptions{}, col.handle)
	waitClosed(t, c.CaughtUp(), "CaughtUp")
	if n := col.len(); n != 10 {
		t.Fatalf("caught up after %d messages, want 10", n)
	}
	publishDecisions(t, e.js, "p", 10, 15)
	col.wait(t, 15)
	ids, metas := col.got()
	checkIDs(t, ids, wantIDs("p", 0, 15))
	for i, m := range metas {
		if m.Sequence != uint64(i+1) || m.Stream != DecisionsStream || m.Subject != "hermod.decisions.p" ||
			m.MsgID != fmt.Sprintf("p-%d", i) || m.Published.IsZero() || time.Since(m.Published) > time.Minute {
			t.Fatalf("meta %d: %+v", i, m)
		}
	}
	if metas[9].Pending != 0 || metas[0].Pending != 9 {
		t.Errorf("pending: first %d, tenth %d", metas[0].Pending, metas[9].Pending)
	}
	if c.LastSequence() != 15 {
		t.Errorf("LastSequence = %d", c.LastSequence())
	}
}

func TestConsumeFromStart(t *testing.T) {
	t.Parallel()
	e := integration(t)
	publishDecisions(t, e.js, "p", 0, 5)
	time.Sleep(20 * time.Millisecond)
	start := time.Now()
	time.Sleep(20 * time.Millisecond)
	publishDecisions(t, e.js, "p", 5, 8)

	for _, tc := range []struct {
		name string
		opts ConsumeOptions
		want []string
	}{
		{"time", ConsumeOptions{Start: start}, wantIDs("p", 5, 8)},
		{"sequence", ConsumeOptions{StartSequence: 4}, wantIDs("p", 3, 8)},
		{"all", ConsumeOptions{}, wantIDs("p", 0, 8)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var col collector
			c := consume(t, e, tc.opts, col.handle)
			waitClosed(t, c.CaughtUp(), "CaughtUp")
			ids, _ := col.got()
			checkIDs(t, ids, tc.want)
		})
	}
}

func TestConsumeDeliverNew(t *testing.T) {
	t.Parallel()
	e := integration(t)
	publishDecisions(t, e.js, "p", 0, 5)
	var col collector
	c := consume(t, e, ConsumeOptions{DeliverNew: true}, col.handle)
	if !closed(c.CaughtUp()) {
		t.Fatal("CaughtUp not closed for DeliverNew")
	}
	publishDecisions(t, e.js, "p", 5, 7)
	col.wait(t, 2)
	ids, _ := col.got()
	checkIDs(t, ids, wantIDs("p", 5, 7))
}

func TestConsumeCaughtUpWaitsForHandler(t *testing.T) {
	t.Parallel()
	e := integration(t)
	const n = 200
	publishDecisions(t, e.js, "p", 0, n)
	release := make(chan struct{})
	var handled int
	var mu sync.Mutex
	c := consume(t, e, ConsumeOptions{}, func(d *eventsv1.RoutingDecision, m Meta) {
		if m.Sequence == n {
			<-release // the last pre-existing message: hold it
		}
		mu.Lock()
		handled++
		mu.Unlock()
	})
	// New messages keep arriving meanwhile; they must not count.
	publishDecisions(t, e.js, "p", n, n+20)
	time.Sleep(100 * time.Millisecond)
	if closed(c.CaughtUp()) {
		t.Fatal("CaughtUp closed before the last pre-existing message was handled")
	}
	close(release)
	waitClosed(t, c.CaughtUp(), "CaughtUp")
	mu.Lock()
	defer mu.Unlock()
	if handled < n {
		t.Fatalf("CaughtUp closed after %d messages, want >= %d", handled, n)
	}
}

func TestConsumeCaughtUpWithNothingToReplay(t *testing.T) {
	t.Parallel()
	e := integration(t)
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T)
		opts    ConsumeOptions
	}{
		{name: "empty stream", opts: ConsumeOptions{Stream: CompletionsStream}},
		{name: "filter matches nothing", prepare: func(t *testing.T) { publishDecisions(t, e.js, "other", 0, 5) },
			opts: ConsumeOptions{FilterSubject: "hermod.decisions.none"}},
		{name: "start after the last message", opts: ConsumeOptions{FilterSubject: "hermod.decisions.other", Start: time.Now().Add(time.Hour)}},
		{name: "start sequence after the last message", opts: ConsumeOptions{FilterSubject: "hermod.decisions.other", StartSequence: 1000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.prepare != nil {
				tc.prepare(t)
			}
			var col collector
			c := consume(t, e, tc.opts, col.handle)
			if !closed(c.CaughtUp()) {
				t.Fatal("CaughtUp not closed at once")
			}
		})
	}
}

func TestConsumeCaughtUpWithFilter(t *testing.T) {
	t.Parallel()
	e := integration(t)
	// Pool a's messages are interleaved with pool b's, and b's come last.
	for i := range 10 {
		publishDecisions(t, e.js, "a", i, i+1)
		publishDecisions(t, e.js, "b", i, i+1)
	}
	publishDecisions(t, e.js, "b", 10, 20)
	filter, _ := DecisionsSubject("a")
	var col collector
	c := consume(t, e, ConsumeOptions{FilterSubject: filter}, col.handle)
	waitClosed(t, c.CaughtUp(), "CaughtUp")
	ids, _ := col.got()
	checkIDs(t, ids, wantIDs("a", 0, 10))
}

func TestConsumeSkipsMalformed(t *testing.T) {
	t.Parallel()
	e := integration(t)
	ctx := testContext(t)
	subject, _ := DecisionsSubject("p")
	publishDecisions(t, e.js, "p", 0, 2)
	for _, bad := range [][]byte{[]byte("not a protobuf"), {0xff, 0xff, 0xff}} {
		if _, err := e.js.Publish(ctx, subject, bad); err != nil {
			t.Fatal(err)
		}
	}
	publishDecisions(t, e.js, "p", 2, 3)
	if _, err := e.js.Publish(ctx, subject, []byte{0x0a, 0x05}); err != nil { // truncated field, last
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	var col collector
	c := consume(t, e, ConsumeOptions{Registerer: reg}, col.handle)
	waitClosed(t, c.CaughtUp(), "CaughtUp")
	ids, _ := col.got()
	checkIDs(t, ids, wantIDs("p", 0, 3))
	if got := metricValue(t, reg, "hermod_bus_decode_errors_total", "stream", DecisionsStream); got != 3 {
		t.Fatalf("hermod_bus_decode_errors_total{stream=%s} = %v, want 3", DecisionsStream, got)
	}
	if got := metricValue(t, reg, "hermod_bus_consumed_total", "stream", DecisionsStream); got != 3 {
		t.Fatalf("hermod_bus_consumed_total = %v, want 3", got)
	}
	// Still consuming.
	publishDecisions(t, e.js, "p", 3, 4)
	col.wait(t, 4)
}

func TestConsumeSurvivesServerRestart(t *testing.T) {
	t.Parallel()
	e := integration(t)
	publishDecisions(t, e.js, "p", 0, 20)
	var col collector
	c := consume(t, e, ConsumeOptions{}, col.handle)
	col.wait(t, 20)
	for range 2 {
		restart(t, e)
		from := col.len()
		publishDecisions(t, e.js, "p", from, from+20)
		col.wait(t, from+20)
	}
	// A stop long enough for the client to notice, with events published
	// by a Publisher meanwhile.
	p := newTestPublisher(t, e)
	bustest.Stop(t, e.srv)
	publishAll(t, p, "p", 60, 80)
	time.Sleep(50 * time.Millisecond)
	restart(t, e)
	col.wait(t, 80)
	time.Sleep(100 * time.Millisecond) // room for duplicates to show up
	ids, metas := col.got()
	checkIDs(t, ids, wantIDs("p", 0, 80))
	for i, m := range metas {
		if m.Sequence != uint64(i+1) {
			t.Fatalf("message %d has sequence %d", i, m.Sequence)
		}
	}
	if closed(c.Done()) {
		t.Fatal("consumer stopped")
	}
}

func TestConsumeStops(t *testing.T) {
	t.Parallel()
	e := integration(t)
	publishDecisions(t, e.js, "p", 0, 3)

	t.Run("close", func(t *testing.T) {
		var col collector
		c := consume(t, e, ConsumeOptions{}, col.handle)
		col.wait(t, 3)
		c.Close()
		if !closed(c.Done()) {
			t.Fatal("Done not closed after Close")
		}
		publishDecisions(t, e.js, "p", 3, 4)
		time.Sleep(50 * time.Millisecond)
		if n := col.len(); n != 3 {
			t.Fatalf("%d messages delivered after Close", n-3)
		}
		c.Close() // again: no-op
	})
	t.Run("context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var col collector
		c, err := Consume(ctx, e.js, ConsumeOptions{Stream: DecisionsStream, Logger: testLogger(t)}, col.handle)
		if err != nil {
			t.Fatal(err)
		}
		col.wait(t, 3)
		cancel()
		waitClosed(t, c.Done(), "Done")
	})
	t.Run("connection closed", func(t *testing.T) {
		nc, js := bustest.Connect(t, e.srv)
		var col collector
		c, err := Consume(testContext(t), js, ConsumeOptions{Stream: DecisionsStream, Logger: testLogger(t)}, col.handle)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		col.wait(t, 3)
		nc.Close()
		waitClosed(t, c.Done(), "Done")
	})
}

func TestConsumeRejectsBadOptions(t *testing.T) {
	t.Parallel()
	e := integration(t)
	ctx := testContext(t)
	h := func(*eventsv1.RoutingDecision, Meta) {}
	for _, tc := range []struct {
		name string
		opts ConsumeOptions
	}{
		{"no stream", ConsumeOptions{}},
		{"missing stream", ConsumeOptions{Stream: "NOPE"}},
		{"two starts", ConsumeOptions{Stream: DecisionsStream, DeliverNew: true, StartSequence: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Consume(ctx, e.js, tc.opts, h); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	if _, err := Consume[*eventsv1.RoutingDecision](ctx, e.js, ConsumeOptions{Stream: DecisionsStream}, nil); err == nil {
		t.Fatal("nil handler accepted")
	}
	if _, err := Consume(ctx, e.js, ConsumeOptions{Stream: "NOPE"}, h); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("missing stream: %v, want ErrStreamNotFound", err)
	}
}

// Skip passes messages over by their id before they are decoded: the
// stream consumer's handler and a core subscriber's see only the others.
func TestSkipByMessageID(t *testing.T) {
	t.Parallel()
	e := integration(t)
	skip := func(id string) bool { return id == "p-1" || id == "p-3" }
	var live collector
	subject, err := DecisionsSubject("p")
	if err != nil {
		t.Fatal(err)
	}
	sub, err := Subscribe(e.nc, subject, func(d *eventsv1.RoutingDecision, _ string) { live.handle(d, Meta{}) }, WithSkip(skip), WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Close() }()
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	publishDecisions(t, e.js, "p", 0, 5)
	var col collector
	c := consume(t, e, ConsumeOptions{Skip: skip}, col.handle)
	waitClosed(t, c.CaughtUp(), "CaughtUp")
	ids, _ := col.got()
	checkIDs(t, ids, []string{"p-0", "p-2", "p-4"})
	live.wait(t, 3)
	ids, _ = live.got()
	checkIDs(t, ids, []string{"p-0", "p-2", "p-4"})
}
