package bus

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/testkit/bustest"
	"github.com/hermod/hermod/testkit/natsembed"
)

// Every integration test starts a NATS server of its own (bustest.Start),
// so tests can run in parallel and use the real stream names; goleak checks
// that every server, connection, Publisher and Consumer stopped.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// env is an integration test's server and client.
type env struct {
	srv *natsembed.Server
	nc  *nats.Conn
	js  jetstream.JetStream
}

// integration skips the test under -short, and otherwise starts a server
// with Hermod's streams (default limits, file storage) and connects to it.
func integration(t testing.TB) env {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs an embedded NATS server (skipped with -short)")
	}
	srv := bustest.Start(t)
	nc, js := bustest.Connect(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := EnsureStreams(ctx, js, Limits{}); err != nil {
		t.Fatal(err)
	}
	return env{srv: srv, nc: nc, js: js}
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// testLogger logs into the test's output.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// quietLogger drops everything below errors (benchmarks, noisy tests).
func quietLogger() *slog.Logger {
	return slog.New(slog.DiscardHandler)
}

// eventually polls cond every 5ms until it holds or timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// closed says whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// decision returns a RoutingDecision of a pool with id "<pool>-<i>".
func decision(pool string, i int) *eventsv1.RoutingDecision {
	return &eventsv1.RoutingDecision{
		DecisionId:      fmt.Sprintf("%s-%d", pool, i),
		RequestId:       fmt.Sprintf("req-%d", i),
		Pool:            pool,
		Model:           "meta-llama/Llama-3.1-8B-Instruct",
		Time:            timestamppb.Now(),
		PrimaryEndpoint: "10.0.0.5:8000",
		PrimaryName:     "vllm-0",
		Replica:         "picker-0",
	}
}

// publishDecisions publishes decisions from..to-1 of a pool synchronously,
// with their ids as Nats-Msg-Id.
func publishDecisions(t testing.TB, js jetstream.JetStream, pool string, from, to int) {
	t.Helper()
	subject, err := DecisionsSubject(pool)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	for i := from; i < to; i++ {
		d := decision(pool, i)
		if _, err := js.Publish(ctx, subject, mustMarshal(t, d), jetstream.WithMsgID(d.GetDecisionId())); err != nil {
			t.Fatalf("publish %s: %v", d.GetDecisionId(), err)
		}
	}
}

// streamMsgs returns the number of messages in a stream.
func streamMsgs(t testing.TB, js jetstream.JetStream, name string) uint64 {
	t.Helper()
	s, err := js.Stream(testContext(t), name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// metricValue returns the value of a counter or gauge in reg with the given
// labels (name=value pairs), or 0 if it has no such series.
func metricValue(t testing.TB, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if labelValue(m, labels[i]) != labels[i+1] {
					continue next
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func mustMarshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// restart restarts the test's server and waits until its connection is back.
func restart(t testing.TB, e env) {
	t.Helper()
	before := e.nc.Stats().Reconnects
	bustest.Restart(t, e.srv)
	eventually(t, 10*time.Second, "no reconnect after the restart", func() bool {
		return e.nc.Stats().Reconnects > before && e.nc.IsConnected()
	})
}
