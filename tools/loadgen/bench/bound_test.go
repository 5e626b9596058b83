package bench

import (
	"math"
	"testing"
	"time"

	"github.com/hermod/hermod/libs/tokenizer"
	"github.com/hermod/hermod/tools/loadgen/workload"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

var toyCost = CostModel{
	StepOverhead: 10 * time.Millisecond, PrefillPerToken: time.Millisecond, DecodePerSeq: 2 * time.Millisecond,
	AttentionPerKVToken: 100 * time.Microsecond, MaxNumSeqs: 2, MaxNumBatchedTokens: 4, NumGPUBlocks: 100, BlockSize: 16,
}

func TestSoloLatencyAndWork(t *testing.T) {
	// prompt 6 in chunks of 4 and 2: (10 + 4 + 0.4) + (10 + 2 + 0.6) ms;
	// two decode steps with contexts 7 and 8: (10 + 2 + 0.7) + (10 + 2 + 0.8)
	if got, want := soloLatency(toyCost, 6, 3), (14.4+12.6+12.7+12.8)/1000; !near(got, want) {
		t.Fatalf("solo latency %v, want %v", got, want)
	}
	// work: prefill 6 x (1 + 0.1) ms, decode 2 x 2 ms + attention 0.7 + 0.8
	if got, want := requestWork(toyCost, 6, 3), (6.6+4+1.5)/1000; !near(got, want) {
		t.Fatalf("work %v, want %v", got, want)
	}
}

func TestIdealBound(t *testing.T) {
	w := &workload.Workload{Name: "toy", Requests: []workload.Request{
		{ID: "a", At: 0, MaxTokens: 3, Prompt: "one two three four five six"},
		{ID: "b", At: 2 * time.Second, MaxTokens: 1, Prompt: "seven"},
	}}
	f := Fleet{Model: "m", Pods: 2, SlowPods: 1, SlowSpeed: 0.5, Speed: 10, Cost: toyCost}
	b := IdealBound(w, f)
	var tok tokenizer.Builtin
	pa, pb := len(tok.Encode(nil, w.Requests[0].Prompt)), len(tok.Encode(nil, w.Requests[1].Prompt))
	tokens := float64(pa + pb + 3 + 1)
	steps := math.Max(4.0/2, tokens/4)
	work := requestWork(toyCost, pa, 3) + requestWork(toyCost, pb, 1) + steps*0.010
	if !near(b.Work, work) || b.Capacity != 1.5 || !near(b.FleetLimit, work/1.5) {
		t.Fatalf("bound %+v, want work %v on capacity 1.5", b, work)
	}
	// b arrives last: its launch time plus its latency alone on the fast pod
	if b.RequestLimitID != "b" || !near(b.RequestLimit, 2+soloLatency(toyCost, pb, 1)) || b.Total != max(b.FleetLimit, b.RequestLimit) {
		t.Fatalf("bound %+v", b)
	}
}

// The reference command on the routing fleet: a bound no policy beats,
// below the total time any single pod would need.
func TestRoutingBoundIsBelowOnePod(t *testing.T) {
	w, err := workload.Reference(workload.ReferenceCommand())
	if err != nil {
		t.Fatal(err)
	}
	f := RoutingFleet()
	b := IdealBound(w, f)
	one := f
	one.Pods = 1
	if b1 := IdealBound(w, one); !near(b1.Work, b.Work) || !near(b1.FleetLimit, 4*b.FleetLimit) {
		t.Fatalf("one pod: %+v, four: %+v", b1, b)
	}
	if b.Total < w.Duration().Seconds() {
		t.Fatalf("bound %.1fs ends before the last request is sent (%.1fs)", b.Total, w.Duration().Seconds())
	}
}
