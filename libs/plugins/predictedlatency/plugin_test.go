package predictedlatency_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/hermod/hermod/libs/plugins/predictedlatency"
	_ "github.com/hermod/hermod/libs/plugins/standard" // every plugin type
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/decisions"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

const config = `
plugins:
- type: predicted-latency-scorer
  parameters: {epsilonExploreNeg: 0, epsilonExploreSticky: 0}
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins: [{pluginRef: predicted-latency-scorer}, {pluginRef: max-score-picker}]
`

func withStrategy(strategy string) string {
	return strings.Replace(config, "{epsilonExploreNeg: 0,", "{headroomSelectionStrategy: "+strategy+", epsilonExploreNeg: 0,", 1)
}

// stack is one picker replica's scheduler with a fake clock.
type stack struct {
	t     *testing.T
	s     *scheduling.Scheduler
	clock *schedulingtest.Clock
	eps   []*scheduling.Endpoint
	n     int
}

func newStack(t *testing.T, cfg string, clock *schedulingtest.Clock, eps []*scheduling.Endpoint) *stack {
	t.Helper()
	if clock == nil {
		clock = schedulingtest.NewClock()
	}
	return &stack{t: t, s: schedulingtest.Scheduler(t, cfg, scheduling.WithClock(clock.Now)), clock: clock, eps: eps}
}

func (st *stack) plugin() *predictedlatency.Plugin {
	for _, p := range st.s.Plugins() {
		if pl, ok := p.(*predictedlatency.Plugin); ok {
			return pl
		}
	}
	st.t.Fatal("no predicted-latency-scorer")
	return nil
}

// request is a completion of about tokens prompt tokens and output
// tokens, with headers.
func request(id string, tokens, output int, headers map[string]string) *scheduling.Request {
	r := schedulingtest.Completion(id, "m", strings.Repeat("word ", tokens*4/5))
	r.Body.MaxTokens = output
	r.Headers = headers
	return r
}

// schedule routes a request among the given endpoints (all when none) and
// returns the result (not released: the caller completes it).
func (st *stack) schedule(req *scheduling.Request, among ...*scheduling.Endpoint) (*scheduling.Result, error) {
	st.t.Helper()
	if len(among) == 0 {
		among = st.eps
	}
	st.n++
	return st.s.Schedule(context.Background(), req, among)
}

func (st *stack) must(req *scheduling.Request, among ...*scheduling.Endpoint) *scheduling.Result {
	st.t.Helper()
	res, err := st.schedule(req, among...)
	if err != nil {
		st.t.Fatal(err)
	}
	return res
}

func completion(res *scheduling.Result, at time.Time, ttft, tpot time.Duration, output int, streamed bool) *scheduling.Response {
	resp := scheduling.NewResponse(res, 200)
	resp.Time, resp.Streamed = at, streamed
	resp.Usage = scheduling.Usage{CompletionTokens: output, TTFT: ttft, TPOT: tpot, Duration: ttft + time.Duration(output-1)*tpot}
	return resp
}

func target(res *scheduling.Result) string { return res.Target().Endpoint.Name }

// Without an SLO, a burst of requests is spread by the work each pod
// already has: request n+1 sees request n, a long one weighs more than a
// short one.
func TestBurstIsSpreadByWork(t *testing.T) {
	st := newStack(t, config, nil, schedulingtest.Endpoints(4))
	counts := map[string]int{}
	for i := range 40 {
		res := st.must(request(fmt.Sprint("r", i), 2000, 500, nil))
		counts[target(res)]++
	}
	for _, e := range st.eps {
		if c := counts[e.Name]; c != 10 {
			t.Fatalf("40 equal requests over 4 idle pods: %v", counts)
		}
	}
	// one pod gets a heavy request: the next light ones go elsewhere
	st = newStack(t, config, nil, schedulingtest.Endpoints(2))
	heavy := st.must(request("heavy", 8000, 1000, nil))
	for i := range 3 {
		if res := st.must(request(fmt.Sprint("light", i), 200, 50, nil)); target(res) == target(heavy) {
			t.Fatalf("light request %d went to the pod busy with the heavy one", i)
		}
	}
}

// The model learns a slow pod from finished requests, and routes away
// from it under equal load.
func TestLearnsASlowPod(t *testing.T) {
	st := newStack(t, config, nil, schedulingtest.Endpoints(2))
	pl := st.plugin()
	speed := map[string]float64{"pod-0": 1, "pod-1": 0.5}
	for i := range 40 {
		// each request alone on its pod: 20 ms to the first token, 5 ms a
		// token, divided by the pod's speed
		pod := st.eps[i%2]
		res := st.must(request(fmt.Sprint("r", i), 500, 100, nil), pod)
		s := speed[pod.Name]
		st.clock.Advance(time.Second)
		st.s.ResponseComplete(context.Background(), completion(res, st.clock.Now(), time.Duration(20e6/s), time.Duration(5e6/s), 100, true))
		res.Release()
	}
	pl.Refit()
	res := st.must(request("probe", 500, 100, nil))
	fast, _ := res.Predictions().Get("pod-0")
	slow, _ := res.Predictions().Get("pod-1")
	if target(res) != "pod-0" {
		t.Fatalf("routed to %s; predictions fast %+v slow %+v", target(res), fast, slow)
	}
	for _, c := range []struct {
		name       string
		got, want  time.Duration
		tolerance  float64
		prediction scheduling.Prediction
	}{
		{"fast TTFT", fast.TTFT, 20 * time.Millisecond, 0.15, fast}, {"fast TPOT", fast.TPOT, 5 * time.Millisecond, 0.15, fast},
		{"slow TTFT", slow.TTFT, 40 * time.Millisecond, 0.15, slow}, {"slow TPOT", slow.TPOT, 10 * time.Millisecond, 0.15, slow},
	} {
		if r := float64(c.got) / float64(c.want); math.Abs(r-1) > c.tolerance {
			t.Errorf("%s predicted %v, want %v", c.name, c.got, c.want)
		}
	}
}

// loaded returns a stack whose pod-1 has several long requests in flight
// and pod-0 one short one.
func loaded(t *testing.T, cfg string) *stack {
	eps := schedulingtest.Endpoints(2)
	for _, e := range eps {
		e.Metrics.KVCacheUsage = 0.5 // not cold
	}
	st := newStack(t, cfg, nil, eps)
	st.must(request("a", 100, 10, nil), st.eps[0])
	for i := range 6 {
		st.must(request(fmt.Sprint("b", i), 4000, 800, nil), st.eps[1])
	}
	return st
}

func TestSLOTiers(t *testing.T) {
	probe := func(st *stack, headers map[string]string) (*scheduling.Result, error) {
		return st.schedule(request("probe", 1000, 100, headers))
	}
	st := loaded(t, config)
	res, err := probe(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	p0, _ := res.Predictions().Get("pod-0")
	p1, _ := res.Predictions().Get("pod-1")
	if target(res) != "pod-0" || p1.TTFT <= p0.TTFT {
		t.Fatalf("without an SLO: %s; predictions %+v %+v", target(res), p0, p1)
	}
	// an SLO both meet: least headroom packs onto the busy pod, most
	// keeps to the idle one
	generous := map[string]string{predictedlatency.HeaderSLOTTFT: fmt.Sprint(2 * p1.TTFT.Milliseconds())}
	for strategy, want := range map[string]string{"least": "pod-1", "most": "pod-0"} {
		st := loaded(t, withStrategy(strategy))
		res, err := probe(st, generous)
		if err != nil || target(res) != want {
			t.Fatalf("%s with a generous SLO: %v %v, want %s", strategy, res, err, want)
		}
		if pr, _ := res.Predictions().Get(want); !pr.MeetsSLO || pr.TTFTHeadroom <= 0 {
			t.Fatalf("%s: prediction %+v", strategy, pr)
		}
	}
	// an SLO only the idle pod meets
	between := map[string]string{predictedlatency.HeaderLLMDSLOTTFT: fmt.Sprint((p0.TTFT + p1.TTFT).Milliseconds() / 2)}
	if res, err := probe(loaded(t, withStrategy("least")), between); err != nil || target(res) != "pod-0" {
		t.Fatalf("an SLO only pod-0 meets: %v %v", res, err)
	}
	// an SLO nobody meets: the least bad, unless the request is sheddable
	// and no pod is idle
	impossible := map[string]string{predictedlatency.HeaderSLOTTFT: "0.001"}
	if res, err := probe(loaded(t, config), impossible); err != nil || target(res) != "pod-0" {
		t.Fatalf("an impossible SLO: %v %v", res, err)
	}
	shed := map[string]string{predictedlatency.HeaderSLOTTFT: "0.001", predictedlatency.HeaderPriority: "-1"}
	_, err = probe(loaded(t, config), shed)
	var serr *scheduling.Error
	if !errors.As(err, &serr) || serr.Kind != scheduling.KindShed {
		t.Fatalf("a sheddable request nobody can serve in time: %v, want shed", err)
	}
	// an idle pod might do better than predicted: not shed
	st = newStack(t, config, nil, schedulingtest.Endpoints(2))
	st.must(request("x", 4000, 800, nil), st.eps[1])
	if _, err := probe(st, shed); err != nil {
		t.Fatalf("sheddable with an idle pod: %v", err)
	}
}

// Replicas fed the same decisions and completions, in any order (a
// completion before its decision, as a replay delivers them), hold the
// same model; the decision events carry the predictions.
func TestReplicasHoldTheSameModel(t *testing.T) {
	clock := schedulingtest.NewClock()
	eps := schedulingtest.Endpoints(3)
	a := newStack(t, config, clock, eps)
	b := newStack(t, config, clock, eps)
	c := newStack(t, config, clock, eps)
	type done struct {
		ev   *scheduling.Response
		dec  uint64
		at   time.Time
		effs []scheduling.Effect
	}
	var log []done
	for i := range 90 {
		res := a.must(request(fmt.Sprint("r", i), 300+10*i, 20+i, nil))
		ev := decisions.Event("pool", &scheduling.Request{ID: fmt.Sprint("r", i)}, res)
		if len(ev.GetEffects()) != 1 || len(ev.GetEffects()[0].GetValues()) == 0 {
			t.Fatalf("decision effects %v", ev.GetEffects())
		}
		for _, p := range ev.GetProfiles()[0].GetEndpoints() {
			if p.GetPrediction().GetTtftSeconds() <= 0 {
				t.Fatalf("no prediction for %s in the decision event", p.GetName())
			}
		}
		// the event's effects, as another replica decodes them
		effs := decisions.Effects(ev)
		b.s.ApplyEffects(res.DecisionID, res.Time, effs)
		clock.Advance(50 * time.Millisecond)
		speed := 1.0 + float64(res.Target().Endpoint.Name[4]-'0')/2
		resp := completion(res, clock.Now(), time.Duration(float64(15e6)*speed), time.Duration(float64(4e6)*speed), 20+i, i%3 != 0)
		log = append(log, done{resp, res.DecisionID, res.Time, effs})
		a.s.ResponseComplete(context.Background(), resp)
		res.Release()
	}
	// b gets the completions in reverse; c (a replica rebuilding) every
	// completion before any decision
	for i := len(log) - 1; i >= 0; i-- {
		b.s.ResponseComplete(context.Background(), log[i].ev)
		c.s.ResponseComplete(context.Background(), log[i].ev)
	}
	for _, d := range log {
		c.s.ApplyEffects(d.dec, d.at, d.effs)
	}
	for _, st := range []*stack{a, b, c} {
		st.plugin().Refit()
	}
	for _, d := range log[:10] {
		for _, e := range eps {
			at, ad, ok := a.plugin().Predict(e.Name, &d.effs[0])
			bt, bd, _ := b.plugin().Predict(e.Name, &d.effs[0])
			ct, cd, _ := c.plugin().Predict(e.Name, &d.effs[0])
			if !ok || at != bt || ad != bd || at != ct || ad != cd {
				t.Fatalf("replicas predict %v/%v, %v/%v, %v/%v", at, ad, bt, bd, ct, cd)
			}
		}
	}
	if p := a.plugin().String(); !strings.Contains(p, "model of 90 samples") {
		t.Fatalf("state: %s", p)
	}
}

func TestParameters(t *testing.T) {
	for _, c := range []struct{ params, field string }{
		{`{"contextTTL": "0s"}`, "contextTTL"},
		{`{"headroomSelectionStrategy": "best"}`, "headroomSelectionStrategy"},
		{`{"sloBufferFactor": 0}`, "sloBufferFactor"},
		{`{"epsilonExploreNeg": 2}`, "epsilonExploreNeg"},
		{`{"headroomTTFTWeight": -1}`, "headroomTTFTWeight"},
		{`{"samplesPerEndpoint": 0}`, "samplesPerEndpoint"},
		{`{"prefixPluginName": "nothing"}`, "prefixPluginName"},
	} {
		_, err := schedulingtest.NewErr(schedulingtest.NewHandle(), predictedlatency.Type, "", c.params)
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: err = %v, want it to name %s", c.params, err, c.field)
		}
	}
	// upstream's full parameter set loads; what has no effect here warns
	h := schedulingtest.NewHandle()
	_, err := schedulingtest.NewErr(h, predictedlatency.Type, "", `{"samplingMean": 1000, "maxSampledTokens": 0, "sloBufferFactor": 1.2,
		"negHeadroomTTFTWeight": 0.8, "negHeadroomTPOTWeight": 0.2, "headroomTTFTWeight": 0.8, "headroomTPOTWeight": 0.2,
		"headroomSelectionStrategy": "composite-most", "compositeKVWeight": 1, "compositeQueueWeight": 1, "compositePrefixWeight": 1,
		"epsilonExploreSticky": 0.01, "epsilonExploreNeg": 0.01, "affinityGateTau": 0.8, "affinityGateTauGlobal": 0.99,
		"affinityMaxTTFTPenaltyMs": 5000, "contextTTL": "5m", "selectionMode": "linear", "streamingMode": true, "endpointRoleLabel": "role",
		"futureKnob": 3}`)
	if err != nil {
		t.Fatal(err)
	}
	w := strings.Join(h.Warnings, "\n")
	for _, want := range []string{"samplingMean", "selectionMode", "futureKnob"} {
		if !strings.Contains(w, want) {
			t.Errorf("no warning about %s in %q", want, w)
		}
	}
}

// BenchmarkScorePerCandidate measures a prediction: the candidate's
// features from the requests in flight to it (16 each) and the model.
// Reported per candidate.
func BenchmarkScorePerCandidate(b *testing.B) {
	for _, inFlight := range []int{4, 16, 64} {
		b.Run(fmt.Sprintf("in-flight=%d", inFlight), func(b *testing.B) {
			h := schedulingtest.NewHandle()
			p := schedulingtest.New[*predictedlatency.Plugin](b, h, predictedlatency.Type, "", "")
			eps := schedulingtest.Endpoints(100)
			id := uint64(1)
			for _, e := range eps {
				for range inFlight {
					// a decision recorded elsewhere, as the projection applies it
					res := &scheduling.Result{DecisionID: id, Time: h.Clock()}
					cs := schedulingtest.CycleState(id)
					req := request("x", 1000, 200, nil)
					schedulingtest.Score(p, cs, req, []*scheduling.Endpoint{e})
					res.Primary = &scheduling.ProfileResult{Targets: []scheduling.Target{{Endpoint: e}}}
					schedulingtest.PreRequest(context.Background(), p, cs, req, res)
					id++
				}
			}
			req := request("probe", 1000, 200, nil)
			scores := make([]float64, len(eps))
			cs := schedulingtest.CycleState(1)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				p.Score(context.Background(), cs, req, eps, scores)
				cs.Reset()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(eps)), "ns/candidate")
		})
	}
}
