package standard_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/plugins/activerequest"
	"github.com/hermod/hermod/libs/plugins/nohitlru"
	"github.com/hermod/hermod/libs/plugins/prefix"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/decisions"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

const statefulConfig = `
plugins:
- {type: active-request-scorer}
- {type: prefix-cache-scorer, parameters: {autoTune: false, blockSizeTokens: 4}}
- {type: no-hit-lru-scorer}
- {type: queue-scorer}
schedulingProfiles:
- name: default
  plugins:
  - {pluginRef: active-request-scorer, weight: 2}
  - {pluginRef: prefix-cache-scorer, weight: 3}
  - {pluginRef: no-hit-lru-scorer}
  - {pluginRef: queue-scorer}
`

func pluginOf[T scheduling.Plugin](t *testing.T, s *scheduling.Scheduler) T {
	t.Helper()
	for _, p := range s.Plugins() {
		if q, ok := p.(T); ok {
			return q
		}
	}
	var zero T
	t.Fatalf("no plugin of type %T", zero)
	return zero
}

// wire sends a decision event through its protobuf encoding, as the bus
// does.
func wire(t *testing.T, d *eventsv1.RoutingDecision) *eventsv1.RoutingDecision {
	t.Helper()
	b, err := proto.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	out := &eventsv1.RoutingDecision{}
	if err := proto.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func apply(t *testing.T, s *scheduling.Scheduler, d *eventsv1.RoutingDecision) {
	t.Helper()
	id, err := decisions.ParseID(d.GetDecisionId())
	if err != nil {
		t.Fatal(err)
	}
	if applied, skipped := s.ApplyEffects(id, d.GetTime().AsTime(), decisions.Effects(d)); skipped != 0 || applied != len(d.GetEffects()) {
		t.Fatalf("applied %d skipped %d of %d effects", applied, skipped, len(d.GetEffects()))
	}
}

// Two replicas that fold each other's decisions and every completion hold
// the same in-flight counts, prefix index and cold-request order as they
// route, and so make the same choices a single scheduler would.
func TestReplicasConvergeThroughDecisionEffects(t *testing.T) {
	// Distinct seeds, as distinct processes have: decision ids are a
	// random base plus a sequence.
	replicas := []*scheduling.Scheduler{
		schedulingtest.Scheduler(t, statefulConfig, scheduling.WithRandSeed(1)),
		schedulingtest.Scheduler(t, statefulConfig, scheduling.WithRandSeed(2)),
	}
	eps := schedulingtest.Endpoints(6)
	rng := rand.New(rand.NewPCG(1, 2))
	var inFlight []uint64
	for i := range 300 {
		self := replicas[i%2]
		other := replicas[1-i%2]
		// Shared prefixes: 10 conversations with growing prompts.
		prompt := fmt.Sprintf("conversation %d: %s", rng.IntN(10), "a b c d e f g h i j k l m n o p q r s t u v w x y z ")
		req := schedulingtest.Completion(fmt.Sprintf("r%d", i), "m", prompt[:20+rng.IntN(len(prompt)-20)])
		res, err := self.Schedule(ctx, req, eps)
		if err != nil {
			t.Fatal(err)
		}
		d := wire(t, decisions.Event("pool", req, res))
		if len(d.GetEffects()) == 0 {
			t.Fatal("a decision of a stateful config carries no effects")
		}
		apply(t, other, d)
		inFlight = append(inFlight, res.DecisionID)
		res.Release()
		// Complete a random in-flight request on both replicas.
		if rng.IntN(3) > 0 && len(inFlight) > 0 {
			k := rng.IntN(len(inFlight))
			for _, r := range replicas {
				r.ResponseComplete(ctx, &scheduling.Response{DecisionID: inFlight[k]})
			}
			inFlight = append(inFlight[:k], inFlight[k+1:]...)
		}
		assertSameState(t, replicas[0], replicas[1], eps)
	}
	if got := pluginOf[*activerequest.Scorer](t, replicas[0]).Tracker().Len(); got != len(inFlight) {
		t.Errorf("tracker holds %d requests, want %d", got, len(inFlight))
	}
}

func assertSameState(t *testing.T, a, b *scheduling.Scheduler, eps []*scheduling.Endpoint) {
	t.Helper()
	ta, tb := pluginOf[*activerequest.Scorer](t, a).Tracker(), pluginOf[*activerequest.Scorer](t, b).Tracker()
	xa, xb := pluginOf[*prefix.Plugin](t, a).Index(), pluginOf[*prefix.Plugin](t, b).Index()
	for _, e := range eps {
		if ta.InFlight(e.Name) != tb.InFlight(e.Name) {
			t.Fatalf("%s in flight: %d vs %d", e.Name, ta.InFlight(e.Name), tb.InFlight(e.Name))
		}
		if xa.Blocks(e.Name) != xb.Blocks(e.Name) {
			t.Fatalf("%s prefix blocks: %d vs %d", e.Name, xa.Blocks(e.Name), xb.Blocks(e.Name))
		}
	}
	cold := schedulingtest.Completion("probe", "m", "a prompt no endpoint has seen before, long enough for blocks")
	la, lb := pluginOf[*nohitlru.Scorer](t, a), pluginOf[*nohitlru.Scorer](t, b)
	sa := schedulingtest.Score(la, schedulingtest.CycleState(1), cold, eps)
	sb := schedulingtest.Score(lb, schedulingtest.CycleState(1), cold, eps)
	if fmt.Sprint(sa) != fmt.Sprint(sb) {
		t.Fatalf("no-hit-lru scores differ: %v vs %v", sa, sb)
	}
}

// Completions and decisions travel on different streams: a completion that
// arrives before its decision must leave nothing in flight, and a decision
// redelivered after its completion counts nothing.
func TestCompletionBeforeDecision(t *testing.T) {
	a := schedulingtest.Scheduler(t, statefulConfig, scheduling.WithRandSeed(1))
	b := schedulingtest.Scheduler(t, statefulConfig, scheduling.WithRandSeed(2))
	eps := schedulingtest.Endpoints(3)
	req := schedulingtest.Completion("r", "m", "hello world, hello world")
	res, err := a.Schedule(ctx, req, eps)
	if err != nil {
		t.Fatal(err)
	}
	d := wire(t, decisions.Event("pool", req, res))
	res.Release()
	id, _ := decisions.ParseID(d.GetDecisionId())

	b.ResponseComplete(ctx, &scheduling.Response{DecisionID: id})
	apply(t, b, d)
	apply(t, b, d)
	tb := pluginOf[*activerequest.Scorer](t, b).Tracker()
	if tb.Len() != 0 {
		t.Errorf("in flight after completion then decision: %d, want 0", tb.Len())
	}
	// On the deciding replica a redelivery of its own decision is a no-op too.
	apply(t, a, d)
	ta := pluginOf[*activerequest.Scorer](t, a).Tracker()
	if ta.Len() != 1 {
		t.Errorf("deciding replica: %d in flight after a redelivery, want 1", ta.Len())
	}
}

// Effects naming a plugin this configuration lacks (or has with another
// type) are skipped, not misapplied.
func TestEffectsOfUnknownPluginsAreSkipped(t *testing.T) {
	s := schedulingtest.Scheduler(t, statefulConfig)
	applied, skipped := s.ApplyEffects(7, time.Now(), []scheduling.Effect{
		{Plugin: scheduling.TypedName{Name: "active-request-scorer", Type: "active-request-scorer"}, Endpoints: []string{"pod-0"}},
		{Plugin: scheduling.TypedName{Name: "gone", Type: "active-request-scorer"}, Endpoints: []string{"pod-0"}},
		{Plugin: scheduling.TypedName{Name: "prefix-cache-scorer", Type: "no-hit-lru-scorer"}, Endpoints: []string{"pod-0"}},
	})
	if applied != 1 || skipped != 2 {
		t.Errorf("applied %d skipped %d, want 1 and 2", applied, skipped)
	}
	if got := pluginOf[*activerequest.Scorer](t, s).Tracker().InFlight("pod-0"); got != 1 {
		t.Errorf("pod-0 in flight = %d, want 1", got)
	}
}

// A reloaded configuration keeps the state of plugins that keep their name
// and type: requests in flight under the old config complete under the new
// one. A prefix plugin whose block size changed starts empty.
func TestReloadCarriesStateOver(t *testing.T) {
	old := schedulingtest.Scheduler(t, statefulConfig)
	eps := schedulingtest.Endpoints(3)
	var ids []uint64
	for i := range 4 {
		req := schedulingtest.Completion(fmt.Sprint(i), "m", "some shared prompt text")
		res, err := old.Schedule(ctx, req, eps)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.DecisionID)
		res.Release()
	}
	reweighted := schedulingtest.Scheduler(t, statefulConfig+"\n", scheduling.WithPrevious(old))
	tr := pluginOf[*activerequest.Scorer](t, reweighted).Tracker()
	if tr.Len() != 4 {
		t.Fatalf("new config sees %d in flight, want 4", tr.Len())
	}
	if pluginOf[*prefix.Plugin](t, reweighted).Index().Blocks(eps[0].Name)+pluginOf[*prefix.Plugin](t, reweighted).Index().Blocks(eps[1].Name)+
		pluginOf[*prefix.Plugin](t, reweighted).Index().Blocks(eps[2].Name) == 0 {
		t.Error("prefix index not carried over")
	}
	for _, id := range ids {
		reweighted.ResponseComplete(ctx, &scheduling.Response{DecisionID: id})
	}
	if tr.Len() != 0 || pluginOf[*activerequest.Scorer](t, old).Tracker().Len() != 0 {
		t.Errorf("after completing under the new config: new %d old %d in flight", tr.Len(), pluginOf[*activerequest.Scorer](t, old).Tracker().Len())
	}

	resized := schedulingtest.Scheduler(t, `
plugins:
- {type: active-request-scorer}
- {type: prefix-cache-scorer, parameters: {autoTune: false, blockSizeTokens: 8}}
`, scheduling.WithPrevious(reweighted))
	x := pluginOf[*prefix.Plugin](t, resized).Index()
	if x.Blocks(eps[0].Name)+x.Blocks(eps[1].Name)+x.Blocks(eps[2].Name) != 0 {
		t.Error("prefix index carried over across a block size change")
	}
}

func TestFreshProjectionsAndRetention(t *testing.T) {
	first := schedulingtest.Scheduler(t, statefulConfig)
	if got := len(first.Fresh()); got != 3 {
		t.Errorf("a first config has %d fresh projections, want 3 (%v)", got, first.Fresh())
	}
	if got := first.StateRetention(); got != 2*time.Minute {
		t.Errorf("retention %s, want the active-request-scorer's 2m", got)
	}
	same := schedulingtest.Scheduler(t, statefulConfig, scheduling.WithPrevious(first))
	if got := same.Fresh(); len(got) != 0 {
		t.Errorf("a reload of the same config has fresh projections %v", got)
	}
	resized := schedulingtest.Scheduler(t, strings.Replace(statefulConfig, "blockSizeTokens: 4", "blockSizeTokens: 8", 1)+
		"", scheduling.WithPrevious(same))
	if got := resized.Fresh(); len(got) != 1 || got[0].Type != "prefix-cache-scorer" {
		t.Errorf("after a block size change: fresh %v, want the prefix plugin", got)
	}
	if got := schedulingtest.Scheduler(t, "plugins: [{type: queue-scorer}]").StateRetention(); got != 0 {
		t.Errorf("stateless config retention %s", got)
	}
}
