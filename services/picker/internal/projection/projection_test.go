package projection

import (
	"context"
	"io"
	"log/slog"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/types/known/timestamppb"

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

func (r *replica) tracker() *activerequest.Tracker {
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
	r.folder.Own(res.DecisionID)
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

// What was applied is known by its message id alone, so that its events
// need not be decoded: this replica's own decisions count as own, the
// others' as duplicates once folded; unknown or malformed ids are not
// seen.
func TestSeenByMessageID(t *testing.T) {
	a, b := newReplica(t, "a", 1), newReplica(t, "b", 2)
	d := a.decide(t, "a")
	id := d.GetDecisionId()
	if !a.folder.DecisionSeen(id) || b.folder.DecisionSeen(id) {
		t.Fatal("own decision: seen by a, not by b")
	}
	b.folder.Decision(d)
	if !b.folder.DecisionSeen(id) || b.folder.DecisionSeen(decisions.ID(12345)) || b.folder.DecisionSeen("not an id") {
		t.Fatal("b: the folded decision seen, others not")
	}
	c := &eventsv1.RequestCompleted{DecisionId: id, Pool: "p", EndpointName: d.GetPrimaryName(), StatusCode: 200}
	if a.folder.CompletionSeen(id, SourceStream) {
		t.Fatal("completion seen before it came")
	}
	a.folder.Completion(context.Background(), c, SourceRPC)
	if !a.folder.CompletionSeen(id, SourceLive) {
		t.Fatal("completion not seen after it came")
	}
	if got := counter(t, a.reg, "hermod_picker_projection_decisions_total", "own"); got != 1 {
		t.Errorf("a: own %v, want 1", got)
	}
	if got := counter(t, b.reg, "hermod_picker_projection_decisions_total", "duplicate"); got != 1 {
		t.Errorf("b: duplicate %v, want 1", got)
	}
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

// A replica restarted under the same name replays its own old decisions
// like anybody's: only ids it took itself in this process are skipped.
func TestRestartUnderTheSameNameReplaysOwnDecisions(t *testing.T) {
	a := newReplica(t, "picker-0", 1)
	d := a.decide(t, "picker-0")
	restarted := newReplica(t, "picker-0", 2)
	restarted.folder.Decision(d)
	if n := restarted.tracker().Len(); n != 1 {
		t.Errorf("restarted replica: %d in flight, want 1", n)
	}
	if got := counter(t, restarted.reg, "hermod_picker_projection_decisions_total", "applied"); got != 1 {
		t.Errorf("applied %v", got)
	}
}

func TestReplayBypassesDeduplication(t *testing.T) {
	a, b := newReplica(t, "a", 1), newReplica(t, "b", 2)
	d := a.decide(t, "a")
	b.folder.Decision(d)
	lease := b.loader.Acquire()
	b.folder.Replay(lease.Scheduler(), d) // idempotent: still one
	b.folder.ReplayCompletion(context.Background(), lease.Scheduler(), &eventsv1.RequestCompleted{DecisionId: d.GetDecisionId(), Pool: "p"})
	lease.Release()
	if n := b.tracker().Len(); n != 0 {
		t.Errorf("in flight after replayed completion: %d", n)
	}
}

// Effects on endpoints that left the registry do not bring their state
// back: older than the removal, or (never seen removed) older than the lag
// slack.
func TestEffectsOnDepartedEndpoints(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	registered := map[string]bool{"pod-0": true, "pod-1": true, "pod-2": true}
	l, err := schedconfig.New(schedconfig.Version{Source: schedconfig.SourceFile, Data: []byte("plugins: [{type: active-request-scorer}]\n")},
		schedconfig.Options{Pool: "p", Replica: "b", Logger: quiet, SchedulerOptions: []scheduling.Option{scheduling.WithLogger(quiet), scheduling.WithClock(func() time.Time { return now })}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	f := New(l, Options{Pool: "p", Replica: "b", Logger: quiet, Now: func() time.Time { return now },
		Registered: func(n string) bool { return registered[n] }})
	tr := func() *activerequest.Tracker {
		lease := l.Acquire()
		defer lease.Release()
		return lease.Scheduler().Plugins()[0].(*activerequest.Scorer).Tracker()
	}
	decision := func(id uint64, at time.Time, ep string) *eventsv1.RoutingDecision {
		return &eventsv1.RoutingDecision{DecisionId: decisions.ID(id), Pool: "p", Replica: "a", Time: timestamppb.New(at),
			Effects: []*eventsv1.PluginEffect{{Plugin: "active-request-scorer", Type: "active-request-scorer", Endpoints: []string{ep}}}}
	}
	// pod-1 leaves now; a late decision from before is dropped, a later one
	// (it came back) applies.
	delete(registered, "pod-1")
	f.EndpointRemoved("pod-1")
	f.Decision(decision(1, now.Add(-time.Second), "pod-1"))
	if tr().InFlight("pod-1") != 0 {
		t.Error("a decision older than the removal brought pod-1 back")
	}
	registered["pod-1"] = true
	f.Decision(decision(2, now.Add(time.Millisecond), "pod-1"))
	if tr().InFlight("pod-1") != 1 {
		t.Error("a decision after pod-1 came back was dropped")
	}
	// pod-9 is not (yet) registered here: a recent decision applies, an old
	// one (a replay of a long-gone endpoint) does not.
	f.Decision(decision(3, now.Add(-2*time.Second), "pod-9"))
	f.Decision(decision(4, now.Add(-time.Minute), "pod-8"))
	if tr().InFlight("pod-9") != 1 || tr().InFlight("pod-8") != 0 {
		t.Errorf("unregistered endpoints: pod-9 %d pod-8 %d, want 1 and 0", tr().InFlight("pod-9"), tr().InFlight("pod-8"))
	}
	// A decision without a time counts from now.
	d := decision(5, now, "pod-2")
	d.Time = nil
	f.Decision(d)
	if tr().InFlight("pod-2") != 1 {
		t.Error("a decision without a time was not counted")
	}
}

func TestDecisionLagMeasuredOnlyWhenLive(t *testing.T) {
	l, err := schedconfig.New(schedconfig.Version{Source: schedconfig.SourceFile, Data: []byte("plugins: [{type: active-request-scorer}]\n")},
		schedconfig.Options{Pool: "p", Replica: "b", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	now := time.Unix(1000, 0)
	var live atomic.Bool
	reg := prometheus.NewRegistry()
	f := New(l, Options{Pool: "p", Replica: "b", Logger: quiet, Metrics: reg, Now: func() time.Time { return now }, Live: live.Load})
	decide := func(id uint64, age time.Duration) {
		f.Decision(&eventsv1.RoutingDecision{DecisionId: decisions.ID(id), Pool: "p", Replica: "a", Time: timestamppb.New(now.Add(-age))})
	}
	decide(1, time.Minute) // replayed at start: not a lag
	live.Store(true)
	decide(2, 3*time.Millisecond)
	decide(3, 30*time.Millisecond)
	decide(3, 30*time.Millisecond) // redelivered: measured once
	h := &dto.Metric{}
	if err := f.m.lag.Write(h); err != nil {
		t.Fatal(err)
	}
	if got := h.GetHistogram().GetSampleCount(); got != 2 {
		t.Fatalf("lag samples = %d, want 2 (live, first deliveries only)", got)
	}
	if got, want := h.GetHistogram().GetSampleSum(), 0.033; math.Abs(got-want) > 1e-9 {
		t.Fatalf("lag sum = %v, want %v", got, want)
	}
}
