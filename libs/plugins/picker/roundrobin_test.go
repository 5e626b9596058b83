package picker_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hermod/hermod/libs/plugins/picker"
	_ "github.com/hermod/hermod/libs/plugins/standard" // every plugin type
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

const roundRobinConfig = `
apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: queue-scorer
- type: round-robin-picker
  parameters:
    maxNumOfEndpoints: 2
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: queue-scorer
  - pluginRef: round-robin-picker
`

// decision is what a scheduler decided, as another replica receives it.
type decision struct {
	id      uint64
	at      time.Time
	effects []scheduling.Effect
}

func schedule(t *testing.T, s *scheduling.Scheduler, eps []*scheduling.Endpoint) (target string, fallbacks []string, d decision) {
	t.Helper()
	res, err := s.Schedule(context.Background(), schedulingtest.Completion("r", "m", "hello"), eps)
	if err != nil {
		t.Fatal(err)
	}
	for i, tg := range res.Primary.Targets {
		if i == 0 {
			target = tg.Endpoint.Name
		} else {
			fallbacks = append(fallbacks, tg.Endpoint.Name)
		}
	}
	d = decision{id: res.DecisionID, at: res.Time}
	for _, e := range res.Effects {
		e.Endpoints = slices.Clone(e.Endpoints)
		d.effects = append(d.effects, e)
	}
	return target, fallbacks, d
}

func TestRoundRobinRotatesInNameOrderIgnoringScores(t *testing.T) {
	s := schedulingtest.Scheduler(t, roundRobinConfig)
	// endpoint names out of order, and queues that a score-based picker
	// would follow
	eps := []*scheduling.Endpoint{
		schedulingtest.Endpoint("pod-c", nil, &scheduling.Metrics{WaitingRequests: 9}),
		schedulingtest.Endpoint("pod-a", nil, &scheduling.Metrics{WaitingRequests: 0}),
		schedulingtest.Endpoint("pod-b", nil, &scheduling.Metrics{WaitingRequests: 5}),
	}
	var got []string
	for range 7 {
		target, fallbacks, _ := schedule(t, s, eps)
		got = append(got, target)
		if len(fallbacks) != 1 {
			t.Fatalf("fallbacks %v, want the next one in rotation", fallbacks)
		}
	}
	if want := []string{"pod-a", "pod-b", "pod-c", "pod-a", "pod-b", "pod-c", "pod-a"}; !slices.Equal(got, want) {
		t.Fatalf("rotation %v, want %v", got, want)
	}
	// pod-b leaves, pod-d joins: the rotation goes on after pod-a
	eps = []*scheduling.Endpoint{eps[0], eps[1], schedulingtest.Endpoint("pod-d", nil, nil)}
	got = got[:0]
	for range 4 {
		target, _, _ := schedule(t, s, eps)
		got = append(got, target)
	}
	if want := []string{"pod-c", "pod-d", "pod-a", "pod-c"}; !slices.Equal(got, want) {
		t.Fatalf("rotation after a change %v, want %v", got, want)
	}
}

// Two replicas that receive each other's decisions (in any order, some
// twice) rotate as one.
func TestRoundRobinReplicasShareTheRotation(t *testing.T) {
	a := schedulingtest.Scheduler(t, roundRobinConfig)
	b := schedulingtest.Scheduler(t, roundRobinConfig, scheduling.WithRandSeed(2))
	eps := schedulingtest.Endpoints(4)
	var got []string
	replicas := []*scheduling.Scheduler{a, b}
	var pending []decision
	for i := range 12 {
		self, other := replicas[i%2], replicas[(i+1)%2]
		target, _, d := schedule(t, self, eps)
		got = append(got, target)
		pending = append(pending, d)
		// the other replica sees the decisions so far, newest first and
		// the older ones again
		for j := len(pending) - 1; j >= 0; j-- {
			other.ApplyEffects(pending[j].id, pending[j].at, pending[j].effects)
		}
	}
	names := schedulingtest.Names(eps)
	for i, g := range got {
		if want := names[i%4]; g != want {
			t.Fatalf("pick %d went to %s, want %s (picks %v)", i, g, want, got)
		}
	}
}

func TestRoundRobinStateSurvivesReload(t *testing.T) {
	old := schedulingtest.New[*picker.RoundRobin](t, schedulingtest.NewHandle(), picker.RoundRobinType, "rr", "")
	old.ApplyEffect(7, time.Unix(100, 0), &scheduling.Effect{Plugin: old.TypedName(), Endpoints: []string{"pod-2"}})
	// an older decision arriving late changes nothing
	old.ApplyEffect(3, time.Unix(99, 0), &scheduling.Effect{Plugin: old.TypedName(), Endpoints: []string{"pod-0"}})
	next := schedulingtest.New[*picker.RoundRobin](t, schedulingtest.NewHandle(), picker.RoundRobinType, "rr", "")
	if !next.InheritState(old) || next.Last() != "pod-2" {
		t.Fatalf("inherited last pick %q, want pod-2", next.Last())
	}
	cs := schedulingtest.CycleState(1)
	got := next.Pick(context.Background(), cs, nil, schedulingtest.Endpoints(4), make([]float64, 4), nil)
	if len(got) != 1 || got[0] != 3 {
		t.Fatalf("pick after pod-2 = %v, want [3]", got)
	}
}
