package projection

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/plugins/activerequest"
	_ "github.com/hermod/hermod/libs/plugins/standard"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/decisions"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
	"github.com/hermod/hermod/services/picker/internal/schedconfig"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type replica struct {
	loader *schedconfig.Loader
	folder *Folder
	reg    *prometheus.Registry
}

func newReplica(t *testing.T, name string, seed uint64) *replica {
	t.Helper()
	l, err := schedconfig.New(schedconfig.Version{Source: schedconfig.SourceFile, Data: []byte("plugins: [{type: active-request-scorer}]\n")},
		schedconfig.Options{Pool: "p", Replica: name, Logger: quiet, SchedulerOptions: []scheduling.Option{scheduling.WithRandSeed(seed), scheduling.WithLogger(quiet)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	reg := prometheus.NewRegistry()
	return &replica{loader: l, reg: reg, folder: New(l, Options{Pool: "p", Replica: name, Logger: quiet, Metrics: reg})}
}

func (r *replica) tracker() *activerequest.Tracker[uint64] {
	lease := r.loader.Acquire()
	defer lease.Release()
	for _, p := range lease.Scheduler().Plugins() {
		if s, ok := p.(*activerequest.Scorer); ok {
			return s.Tracker()
		}
	}
	return nil
}

func (r *replica) decide(t *testing.T, name string) *eventsv1.RoutingDecision {
	t.Helper()
	lease := r.loader.Acquire()
	defer lease.Release()
	req := schedulingtest.Completion("req", "m", "x")
	res, err := lease.Scheduler().Schedule(context.Background(), req, schedulingtest.Endpoints(3))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	ev := decisions.Event("p", req, res)
	ev.Replica = name
	return ev
}

func TestFoldsOtherReplicasOnce(t *testing.T) {
	a, b := newReplica(t, "a", 1), newReplica(t, "b", 2)
	d := a.decide(t, "a")
	target := d.GetPrimaryName()

	a.folder.Decision(d) // its own: already applied
	b.folder.Decision(d)
	b.folder.Decision(d) // redelivered
	if a.tracker().InFlight(target) != 1 || b.tracker().InFlight(target) != 1 {
		t.Fatalf("in flight on %s: a %d b %d, want 1 and 1", target, a.tracker().InFlight(target), b.tracker().InFlight(target))
	}
	other := &eventsv1.RoutingDecision{DecisionId: decisions.ID(99), Pool: "q", Replica: "c"}
	b.folder.Decision(other)
	bad := &eventsv1.RoutingDecision{DecisionId: "zz", Pool: "p", Replica: "c"}
	b.folder.Decision(bad)

	c := &eventsv1.RequestCompleted{DecisionId: d.GetDecisionId(), Pool: "p", EndpointName: target, StatusCode: 200}
	if !a.folder.Completion(context.Background(), c, SourceRPC) || a.folder.Completion(context.Background(), c, SourceStream) {
		t.Error("completion by rpc then stream: want new then duplicate")
	}
	b.folder.Completion(context.Background(), c, SourceStream)
	if a.tracker().Len() != 0 || b.tracker().Len() != 0 {
		t.Errorf("after completion: a %d b %d in flight", a.tracker().Len(), b.tracker().Len())
	}
	for _, want := range []struct {
		name  string
		value float64
		reg   *prometheus.Registry
	}{{"own", 1, a.reg}, {"applied", 1, b.reg}, {"duplicate", 1, b.reg}, {"foreign", 1, b.reg}, {"malformed", 1, b.reg}} {
		got := counter(t, want.reg, "hermod_picker_projection_decisions_total", want.name)
		if got != want.value {
			t.Errorf("decisions{result=%s} = %v, want %v", want.name, got, want.value)
		}
	}
}

func counter(t *testing.T, reg *prometheus.Registry, name, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// A completion folded before its decision (they travel on different
// streams) leaves nothing in flight.
func TestCompletionBeforeDecision(t *testing.T) {
	a, b := newReplica(t, "a", 1), newReplica(t, "b", 2)
	d := a.decide(t, "a")
	b.folder.Completion(context.Background(), &eventsv1.RequestCompleted{DecisionId: d.GetDecisionId(), Pool: "p"}, SourceStream)
	b.folder.Decision(d)
	if n := b.tracker().Len(); n != 0 {
		t.Errorf("in flight = %d, want 0", n)
	}
	if got := testutil.ToFloat64(b.folder.m.completions.WithLabelValues(SourceStream, "applied")); got != 1 {
		t.Errorf("completions applied = %v", got)
	}
}

func TestIDSetForgetsAfterTwoWindows(t *testing.T) {
	now := time.Unix(0, 0)
	s := newIDSet(time.Minute, func() time.Time { return now })
	if !s.add(1) || s.add(1) {
		t.Fatal("add twice")
	}
	now = now.Add(61 * time.Second)
	if s.add(1) {
		t.Error("forgotten after one window")
	}
	now = now.Add(61 * time.Second)
	s.add(2)
	now = now.Add(61 * time.Second)
	if !s.add(1) || s.len() > 3 {
		t.Errorf("still remembered after three windows (len %d)", s.len())
	}
}
