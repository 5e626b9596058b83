package admission_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/hermod/hermod/libs/plugins/admission"
	_ "github.com/hermod/hermod/libs/plugins/standard" // the other plugin types
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

// pods returns endpoints with the given waiting queues and KV usages,
// scraped at at.
func pods(at time.Time, loads ...[2]float64) []*scheduling.Endpoint {
	eps := schedulingtest.Endpoints(len(loads))
	for i, l := range loads {
		eps[i].Metrics = &scheduling.Metrics{WaitingRequests: int(l[0]), KVCacheUsage: l[1], UpdatedAt: at}
	}
	return eps
}

func names(eps []*scheduling.Endpoint) string {
	var out []string
	for _, e := range eps {
		out = append(out, e.Name)
	}
	return strings.Join(out, ",")
}

func sheddable(id string) *scheduling.Request {
	r := schedulingtest.Completion(id, "m", "hello")
	r.Headers = map[string]string{scheduling.PriorityHeader: "-1"}
	return r
}

func TestUtilizationSaturationIsTheMeanLoad(t *testing.T) {
	h := schedulingtest.NewHandle()
	clock := schedulingtest.NewClock()
	h.Clock = clock.Now
	u := schedulingtest.New[*admission.Utilization](t, h, admission.UtilizationDetectorType, "", "")
	now := clock.Now()
	// loads: max(2/5, 0.4/0.8) = 0.5; max(10/5, 0) = 2; max(0, 0.8/0.8) = 1
	eps := pods(now, [2]float64{2, 0.4}, [2]float64{10, 0}, [2]float64{0, 0.8})
	if got := u.Saturation(context.Background(), eps); math.Abs(got-3.5/3) > 1e-9 {
		t.Errorf("saturation %v, want %v", got, 3.5/3)
	}
	// stale metrics (older than 200ms) and none at all count as saturated
	stale := pods(now.Add(-time.Second), [2]float64{0, 0})
	noMetrics := schedulingtest.Endpoints(1)
	noMetrics[0].Metrics = nil
	if got := u.Saturation(context.Background(), append(stale, noMetrics...)); got != 1 {
		t.Errorf("stale and missing metrics: saturation %v, want 1", got)
	}
	if got := u.Saturation(context.Background(), nil); got != 1 {
		t.Errorf("no candidates: saturation %v, want 1", got)
	}
}

func TestUtilizationFilterKeepsEndpointsWithRoom(t *testing.T) {
	h := schedulingtest.NewHandle()
	clock := schedulingtest.NewClock()
	h.Clock = clock.Now
	now := clock.Now()
	eps := pods(now, [2]float64{4, 0.5}, [2]float64{5, 0.1}, [2]float64{0, 0.8}, [2]float64{1, 0.85})
	eps = append(eps, pods(now.Add(-time.Second), [2]float64{0, 0})...) // stale
	eps[4].Name = "stale"
	u := schedulingtest.New[*admission.Utilization](t, h, admission.UtilizationDetectorType, "", "")
	if got := names(u.Filter(context.Background(), nil, nil, eps, nil)); got != "pod-0" {
		t.Errorf("kept %s, want pod-0 (strictly below 5 waiting and 0.8 KV, fresh)", got)
	}
	// headroom 0.1 raises the limits to 5.5 waiting and 0.88 KV
	wide := schedulingtest.New[*admission.Utilization](t, h, admission.UtilizationDetectorType, "", `{"headroom": 0.1}`)
	if got := names(wide.Filter(context.Background(), nil, nil, eps, nil)); got != "pod-0,pod-1,pod-2,pod-3" {
		t.Errorf("with headroom kept %s", got)
	}
	// nothing with room: every endpoint stays (fail open)
	full := pods(now, [2]float64{9, 0.9}, [2]float64{7, 0.2})
	if got := names(u.Filter(context.Background(), nil, nil, full, nil)); got != "pod-0,pod-1" {
		t.Errorf("fail open kept %s", got)
	}
}

func TestParameterErrors(t *testing.T) {
	for typ, cases := range map[string]map[string]string{
		admission.UtilizationDetectorType: {
			`{"queueDepthThreshold": 0}`:            "queueDepthThreshold",
			`{"kvCacheUtilThreshold": 1.5}`:         "kvCacheUtilThreshold",
			`{"metricsStalenessThreshold": "-1s"}`:  "metricsStalenessThreshold",
			`{"metricsStalenessThreshold": "soon"}`: "metricsStalenessThreshold",
			`{"headroom": -0.5}`:                    "headroom",
		},
		admission.ProbabilisticType: {
			`{"queueDepthThreshold": -1}`: "queueDepthThreshold",
			`{"kvCacheUtilThreshold": 0}`: "kvCacheUtilThreshold",
			`{"power": 0}`:                "power",
			`{"k": -3}`:                   "k",
		},
	} {
		for params, field := range cases {
			_, err := schedulingtest.NewErr(schedulingtest.NewHandle(), typ, "", params)
			var pe *scheduling.ParamError
			if !errors.As(err, &pe) || !strings.Contains(pe.Path, field) {
				t.Errorf("%s %s: error %v, want one naming %s", typ, params, err, field)
			}
		}
	}
	h := schedulingtest.NewHandle()
	schedulingtest.New[*admission.Utilization](t, h, admission.UtilizationDetectorType, "", `{"headroom": 1.5}`)
	if len(h.Warnings) != 1 {
		t.Errorf("headroom above 1: warnings %q, want one", h.Warnings)
	}
}

// The rejection probability is min(1, k s^power): with the defaults 2.3%
// at saturation 0.15, 9.6% at 0.2, and certain from about 0.32.
func TestProbabilisticRejectProbability(t *testing.T) {
	p := schedulingtest.New[*admission.Probabilistic](t, schedulingtest.NewHandle(), admission.ProbabilisticType, "", "")
	for s, want := range map[float64]float64{0: 0, 0.15: 300 * math.Pow(0.15, 5), 0.2: 0.096, 0.32: 1, 2: 1} {
		if got := p.RejectProbability(s); math.Abs(got-want) > 1e-9 {
			t.Errorf("p(%v) = %v, want %v", s, got, want)
		}
	}
}

// Sheddable requests are rejected about as often as the probability says;
// the others never are.
func TestProbabilisticAdmit(t *testing.T) {
	p := schedulingtest.New[*admission.Probabilistic](t, schedulingtest.NewHandle(), admission.ProbabilisticType, "", "")
	// mean load 0.2: loads max(1/5, 0) and max(0, 0.16/0.8)
	eps := pods(time.Time{}, [2]float64{1, 0}, [2]float64{0, 0.16})
	cs := schedulingtest.CycleState(7)
	const n = 20000
	rejected := 0
	for i := range n {
		err := p.Admit(context.Background(), cs, sheddable("s"), eps)
		var se *scheduling.Error
		switch {
		case err == nil:
		case errors.As(err, &se) && se.Kind == scheduling.KindShed:
			rejected++
		default:
			t.Fatalf("request %d: %v", i, err)
		}
		if err := p.Admit(context.Background(), cs, schedulingtest.Completion("c", "m", "hi"), eps); err != nil {
			t.Fatalf("a request of priority 0 was rejected: %v", err)
		}
	}
	if got := float64(rejected) / n; math.Abs(got-0.096) > 0.01 {
		t.Errorf("rejected %.4f of sheddable requests, want about 0.096", got)
	}
}

const detectorConfig = `
plugins:
- type: utilization-detector
- type: queue-scorer
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: queue-scorer
`

// With a utilization-detector declared, a sheddable request whose
// candidates are saturated is shed; others are served; the flowControl
// gate leaves saturation to flow control.
func TestSchedulerShedsSheddableRequestsWhenSaturated(t *testing.T) {
	clock := schedulingtest.NewClock()
	s := schedulingtest.Scheduler(t, detectorConfig, scheduling.WithClock(clock.Now))
	full := pods(clock.Now(), [2]float64{6, 0.9}, [2]float64{5, 0.2})
	_, err := s.Schedule(context.Background(), sheddable("a"), full)
	var se *scheduling.Error
	if !errors.As(err, &se) || se.Kind != scheduling.KindShed || !strings.Contains(se.Msg, "saturated") {
		t.Fatalf("sheddable request on saturated pods: %v, want shed", err)
	}
	if _, err := s.Schedule(context.Background(), schedulingtest.Completion("b", "m", "hi"), full); err != nil {
		t.Fatalf("a request of priority 0: %v", err)
	}
	if _, err := s.Schedule(context.Background(), sheddable("c"), pods(clock.Now(), [2]float64{0, 0.1})); err != nil {
		t.Fatalf("sheddable request with room: %v", err)
	}
	gated := schedulingtest.Scheduler(t, "featureGates: [flowControl]\n"+detectorConfig, scheduling.WithClock(clock.Now))
	if _, err := gated.Schedule(context.Background(), sheddable("d"), full); err != nil {
		t.Fatalf("with flowControl the picker does not shed: %v", err)
	}
}

func TestSaturationDetectorSection(t *testing.T) {
	clock := schedulingtest.NewClock()
	s := schedulingtest.Scheduler(t, `
plugins:
- {type: utilization-detector, name: strict, parameters: {queueDepthThreshold: 1}}
- {type: utilization-detector, name: loose, parameters: {queueDepthThreshold: 100}}
- type: random-picker
saturationDetector:
  pluginRef: strict
`, scheduling.WithClock(clock.Now))
	if _, err := s.Schedule(context.Background(), sheddable("a"), pods(clock.Now(), [2]float64{2, 0})); err == nil {
		t.Fatal("the strict detector the section names did not shed")
	}
	for yaml, want := range map[string]string{
		"plugins: [{type: random-picker}]\nsaturationDetector: {pluginRef: nope}":          `saturationDetector.pluginRef: no plugin named "nope"`,
		"plugins: [{type: random-picker}]\nsaturationDetector: {pluginRef: random-picker}": "is not a saturation detector",
	} {
		cfg, err := scheduling.ParseConfig([]byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := scheduling.New(cfg); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", yaml, err, want)
		}
	}
}

// probabilistic-admitter runs as an admission plugin of the scheduler.
func TestSchedulerRunsAdmitters(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
- type: probabilistic-admitter
- type: random-picker
`)
	_, err := s.Schedule(context.Background(), sheddable("a"), pods(time.Time{}, [2]float64{50, 1}))
	if err == nil || !strings.Contains(err.Error(), "probabilistic-admitter: rejected") {
		t.Fatalf("a sheddable request on a saturated pool: %v, want rejected", err)
	}
	if _, err := s.Schedule(context.Background(), schedulingtest.Completion("b", "m", "hi"), pods(time.Time{}, [2]float64{50, 1})); err != nil {
		t.Fatalf("priority 0: %v", err)
	}
}
