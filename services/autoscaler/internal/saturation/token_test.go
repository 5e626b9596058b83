package saturation

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/hermod/hermod/services/autoscaler/internal/scaling"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// tokVariant is a steady variant (target = ready) on an accelerator.
func tokVariant(name, acc string, reps ...scaling.Replica) *scaling.Variant {
	v := &scaling.Variant{Name: name, Accelerator: acc, Current: len(reps), Ready: len(reps)}
	for i, r := range reps {
		if r.Name == "" {
			r.Name = fmt.Sprintf("%s-%d", name, i)
		}
		r.Variant = name
		v.Replicas = append(v.Replicas, r)
	}
	return v
}

func tokModel(now time.Time, gatewayQueue float64, vs ...*scaling.Variant) *scaling.Model {
	return &scaling.Model{ID: "m", Namespace: "ns", Variants: vs, GatewayQueue: gatewayQueue, Now: now}
}

// only returns the single analysis of a model without roles.
func only(t *testing.T, as []scaling.Analysis) scaling.Analysis {
	t.Helper()
	if len(as) != 1 || as[0].Role != scaling.RoleBoth {
		t.Fatalf("want one RoleBoth analysis, got %+v", as)
	}
	return as[0]
}

func TestOutputBuckets(t *testing.T) {
	tests := []struct {
		out  float64
		want outputBucket
	}{
		{0, bucketShort}, {99, bucketShort}, {99.9, bucketShort},
		{100, bucketMedium}, {499.9, bucketMedium},
		{500, bucketLong}, {4000, bucketLong},
	}
	for _, tt := range tests {
		if got := bucketOf(tt.out); got != tt.want {
			t.Errorf("bucketOf(%v) = %v, want %v", tt.out, got, tt.want)
		}
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{[]float64{5}, 5},
		{[]float64{60000, 80000, 70000}, 70000},         // odd: middle of 60k 70k 80k
		{[]float64{100000, 40000, 80000, 60000}, 70000}, // even: (60k + 80k) / 2
		{[]float64{1, 1000, 2, 3, 999}, 3},              // robust to outliers
		{[]float64{10, 20}, 15},
	}
	for _, tt := range tests {
		if got := median(append([]float64(nil), tt.in...)); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// TestCapacityChain covers the k1/k2 chain on a single replica, whose
// capacity is the variant's (median of one). Defaults: kv threshold 0.80,
// queue threshold 5.
func TestCapacityChain(t *testing.T) {
	tests := []struct {
		name    string
		variant *scaling.Variant
		want    float64 // 0: absent from VariantCapacity
		source  string
	}{
		{
			// (a) queue 5 >= 5: k2 = tokens in use 60000; k1 = 100000 x
			// 0.80 = 80000; capacity = min = 60000.
			name:    "observed",
			variant: tokVariant("a", "H100", scaling.Replica{KVCapacityTokens: 100000, TokensInUse: 60000, Queue: 5, AvgInputTokens: 1000, AvgOutputTokens: 200}),
			want:    60000,
			source:  "observed 1",
		},
		{
			// (a) observed 95000 above k1 80000: the memory bound wins.
			name:    "observed above k1",
			variant: tokVariant("a", "H100", scaling.Replica{KVCapacityTokens: 100000, TokensInUse: 95000, Queue: 9}),
			want:    80000,
			source:  "observed 1",
		},
		{
			// (c) B 4096, S 512, I 900, O 100: n = min(4096 x 100/1000 =
			// 409.6, 512) = 409.6; k2 = 409.6 x (900 + 100/2) = 389120;
			// k1 = 500000 x 0.80 = 400000; capacity 389120.
			name: "derived",
			variant: func() *scaling.Variant {
				v := tokVariant("a", "H100", scaling.Replica{KVCapacityTokens: 500000, TokensInUse: 1000, Queue: 1, AvgInputTokens: 900, AvgOutputTokens: 100})
				v.MaxNumBatchedTokens, v.MaxNumSeqs = 4096, 512
				return v
			}(),
			want:   389120,
			source: "derived 1",
		},
		{
			// (c) with the defaults B 8192, S 256, I 1000, O 200: n =
			// min(8192 x 200/1200 = 1365.3, 256) = 256; k2 = 256 x 1100 =
			// 281600 < k1 400000.
			name:    "derived with default batching limits",
			variant: tokVariant("a", "H100", scaling.Replica{KVCapacityTokens: 500000, AvgInputTokens: 1000, AvgOutputTokens: 200}),
			want:    281600,
			source:  "derived 1",
		},
		{
			// (c) 281600 but k1 = 100000 x 0.80 = 80000: memory bound.
			name:    "k1 below derived",
			variant: tokVariant("a", "H100", scaling.Replica{KVCapacityTokens: 100000, AvgInputTokens: 1000, AvgOutputTokens: 200}),
			want:    80000,
			source:  "derived 1",
		},
		{
			// (d) no saturated queue, no history, output tokens unknown:
			// k2 = k1 = 100000 x 0.80 = 80000.
			name:    "fallback k1",
			variant: tokVariant("a", "H100", scaling.Replica{KVCapacityTokens: 100000, TokensInUse: 30000, Queue: 2, AvgInputTokens: 1000}),
			want:    80000,
			source:  "k1 1",
		},
		{
			// saturated queue but 0 tokens in use: not an observation;
			// falls through to (d) k1 = 80000.
			name:    "zero tokens in use is no observation",
			variant: tokVariant("a", "H100", scaling.Replica{KVCapacityTokens: 100000, Queue: 7}),
			want:    80000,
			source:  "k1 1",
		},
		{
			// KV capacity unknown: capacity = k2 (c) = 281600 alone.
			name:    "k1 unknown uses k2",
			variant: tokVariant("a", "H100", scaling.Replica{AvgInputTokens: 1000, AvgOutputTokens: 200}),
			want:    281600,
			source:  "derived 1",
		},
		{
			// nothing known: no capacity, the variant is absent.
			name:    "nothing known",
			variant: tokVariant("a", "H100", scaling.Replica{Queue: 1}),
			want:    0,
			source:  "unknown 1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := only(t, NewTokenAnalyzer().Analyze(tokModel(t0, 0, tt.variant), DefaultTokenConfig()))
			got, ok := a.VariantCapacity["a"]
			if tt.want == 0 {
				if ok {
					t.Errorf("VariantCapacity[a] = %v, want absent", got)
				}
			} else {
				approx(t, "capacity", got, tt.want)
			}
			if joined := strings.Join(a.Reasons, "; "); !strings.Contains(joined, tt.source) {
				t.Errorf("reasons %q lack %q", joined, tt.source)
			}
		})
	}
}

// TestHistory covers (b): observations pushed by saturated replicas serve,
// as a rolling average of 10 per model|accelerator|output bucket, the
// replicas that are not saturated.
func TestHistory(t *testing.T) {
	// A saturated H100 replica with long outputs (600 >= 500).
	saturatedLong := func(inUse float64) scaling.Replica {
		return scaling.Replica{Name: "sat", KVCapacityTokens: 200000, TokensInUse: inUse, Queue: 6, AvgInputTokens: 1000, AvgOutputTokens: 600}
	}
	// A quiet replica: k1 = 200000 x 0.80 = 160000; derived (c) with I
	// 1000 and O = out: 256 x (1000 + out/2) >= 268800 > k1, so without
	// history its capacity is k1.
	quiet := func(out float64) scaling.Replica {
		return scaling.Replica{Name: "quiet", KVCapacityTokens: 200000, Queue: 1, AvgInputTokens: 1000, AvgOutputTokens: out}
	}
	cfg := DefaultTokenConfig()

	t.Run("rolling average", func(t *testing.T) {
		ta := NewTokenAnalyzer()
		// Two snapshots observe 50000 then 70000 in H100|long.
		ta.Analyze(tokModel(t0, 0, tokVariant("sat", "H100", saturatedLong(50000))), cfg)
		ta.Analyze(tokModel(t0.Add(time.Second), 0, tokVariant("sat", "H100", saturatedLong(70000))), cfg)
		// A quiet long-output replica on H100: k2 = (50000 + 70000)/2 =
		// 60000 < k1 160000.
		a := only(t, ta.Analyze(tokModel(t0.Add(2*time.Second), 0, tokVariant("q", "H100", quiet(700))), cfg))
		approx(t, "history capacity", a.VariantCapacity["q"], 60000)
		// Another bucket (short: 50 < 100) has no history: k1 160000
		// (derived 256 x 1025 = 262400 > k1).
		a = only(t, ta.Analyze(tokModel(t0.Add(3*time.Second), 0, tokVariant("q", "H100", quiet(50))), cfg))
		approx(t, "other bucket", a.VariantCapacity["q"], 160000)
		// Another accelerator has no history either.
		a = only(t, ta.Analyze(tokModel(t0.Add(4*time.Second), 0, tokVariant("q", "A100", quiet(700))), cfg))
		approx(t, "other accelerator", a.VariantCapacity["q"], 160000)
	})

	t.Run("same snapshot pushed once", func(t *testing.T) {
		ta := NewTokenAnalyzer()
		m1 := tokModel(t0, 0, tokVariant("sat", "H100", saturatedLong(40000)))
		ta.Analyze(m1, cfg)
		ta.Analyze(m1, cfg) // same Now: not pushed again
		ta.Analyze(tokModel(t0.Add(time.Second), 0, tokVariant("sat", "H100", saturatedLong(80000))), cfg)
		// (40000 + 80000)/2 = 60000; pushing m1 twice would give 53333.
		a := only(t, ta.Analyze(tokModel(t0.Add(2*time.Second), 0, tokVariant("q", "H100", quiet(700))), cfg))
		approx(t, "deduplicated history", a.VariantCapacity["q"], 60000)
	})

	t.Run("replicas without names all count", func(t *testing.T) {
		ta := NewTokenAnalyzer()
		a, b := saturatedLong(40000), saturatedLong(80000)
		a.Name, b.Name = "", ""
		v := &scaling.Variant{Name: "sat", Accelerator: "H100", Current: 2, Ready: 2, Replicas: []scaling.Replica{a, b}}
		ta.Analyze(tokModel(t0, 0, v), cfg)
		// (40000 + 80000)/2 = 60000.
		got := only(t, ta.Analyze(tokModel(t0.Add(time.Second), 0, tokVariant("q", "H100", quiet(700))), cfg))
		approx(t, "history", got.VariantCapacity["q"], 60000)
	})

	t.Run("window of ten", func(t *testing.T) {
		ta := NewTokenAnalyzer()
		// 11 observations 1000, 2000, ..., 11000: the window keeps
		// 2000..11000, average 6500.
		for i := 1; i <= 11; i++ {
			ta.Analyze(tokModel(t0.Add(time.Duration(i)*time.Second), 0,
				tokVariant("sat", "H100", saturatedLong(float64(i)*1000))), cfg)
		}
		a := only(t, ta.Analyze(tokModel(t0.Add(time.Minute), 0, tokVariant("q", "H100", quiet(700))), cfg))
		approx(t, "window average", a.VariantCapacity["q"], 6500)
	})

	t.Run("observations of one snapshot serve its other replicas", func(t *testing.T) {
		ta := NewTokenAnalyzer()
		// One saturated replica (observed 90000) and one quiet one in the
		// same variant: capacities 90000 and 90000 (history) -> median
		// 90000. The saturated replica is listed second on purpose.
		a := only(t, ta.Analyze(tokModel(t0, 0, tokVariant("v", "H100", quiet(700), saturatedLong(90000))), cfg))
		approx(t, "capacity", a.VariantCapacity["v"], 90000)
		if j := strings.Join(a.Reasons, "; "); !strings.Contains(j, "observed 1, history 1") {
			t.Errorf("reasons %q", j)
		}
	})

	t.Run("forget", func(t *testing.T) {
		ta := NewTokenAnalyzer()
		ta.Analyze(tokModel(t0, 0, tokVariant("sat", "H100", saturatedLong(50000))), cfg)
		ta.Forget("m")
		a := only(t, ta.Analyze(tokModel(t0.Add(time.Second), 0, tokVariant("q", "H100", quiet(700))), cfg))
		approx(t, "after forget", a.VariantCapacity["q"], 160000)
	})
}

func TestMedianAcrossReplicas(t *testing.T) {
	// Capacities via (d) k1 = KV tokens x 0.80.
	k1Replica := func(kvTokens float64) scaling.Replica {
		return scaling.Replica{KVCapacityTokens: kvTokens}
	}
	tests := []struct {
		name string
		kv   []float64
		want float64
	}{
		// 75000, 100000, 87500 x 0.80 = 60000, 80000, 70000 -> 70000.
		{"odd", []float64{75000, 100000, 87500}, 70000},
		// 50000..125000 x 0.80 = 40000, 60000, 80000, 100000 ->
		// (60000 + 80000)/2 = 70000.
		{"even", []float64{125000, 50000, 100000, 75000}, 70000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var reps []scaling.Replica
			for _, kv := range tt.kv {
				reps = append(reps, k1Replica(kv))
			}
			a := only(t, NewTokenAnalyzer().Analyze(tokModel(t0, 0, tokVariant("a", "H100", reps...)), DefaultTokenConfig()))
			approx(t, "median", a.VariantCapacity["a"], tt.want)
			// supply = replicas x median
			approx(t, "supply", a.Supply, float64(len(tt.kv))*tt.want)
		})
	}
}

// TestTokenSignals checks demand, supply, required and spare with numbers.
// Config defaults: scale up 0.85, scale down 0.70.
func TestTokenSignals(t *testing.T) {
	// k1 = 50000 x 0.80 = 40000; (c) with I 500, O 100 = min(8192 x
	// 100/600, 256) x (500 + 50) = 140800 > k1: capacity 40000.
	r40k := func(inUse, queue float64) scaling.Replica {
		return scaling.Replica{KVCapacityTokens: 50000, TokensInUse: inUse, Queue: queue, AvgInputTokens: 500, AvgOutputTokens: 100}
	}
	tests := []struct {
		name     string
		model    *scaling.Model
		demand   float64
		supply   float64
		required float64
		spare    float64
		reasons  []string
	}{
		{
			// per replica 38000 + 2 x (500 + 100) = 39200, x2 = 78400.
			// supply 2 x 40000 = 80000. required = 78400/0.85 - 80000 =
			// 92235.29 - 80000 = 12235.29; spare = max(0, 80000 -
			// 78400/0.70 = 80000 - 112000) = 0.
			name:     "required",
			model:    tokModel(t0, 0, tokVariant("a", "H100", r40k(38000, 2), r40k(38000, 2))),
			demand:   78400,
			supply:   80000,
			required: 78400/0.85 - 80000,
			reasons:  []string{"required = max(0, 78400/0.85 - 80000) = 12235"},
		},
		{
			// same, with a pending replica (target 3, ready 2):
			// anticipated = 80000 + 40000 = 120000 > 92235.29 -> required 0.
			name: "pending replicas in anticipated supply",
			model: func() *scaling.Model {
				v := tokVariant("a", "H100", r40k(38000, 2), r40k(38000, 2))
				v.Current = 3
				return tokModel(t0, 0, v)
			}(),
			demand:  78400,
			supply:  80000,
			reasons: []string{"anticipated 120000 (+1 pending)"},
		},
		{
			// 4 replicas x 10000 in use, no queue: demand 40000; supply
			// 4 x 40000 = 160000. required = max(0, 47058.8 - 160000) = 0;
			// spare = 160000 - 40000/0.70 = 160000 - 57142.86 = 102857.14.
			name:    "spare",
			model:   tokModel(t0, 0, tokVariant("a", "H100", r40k(10000, 0), r40k(10000, 0), r40k(10000, 0), r40k(10000, 0))),
			demand:  40000,
			supply:  160000,
			spare:   160000 - 40000/0.70,
			reasons: []string{"spare = max(0, 160000 - 40000/0.7) = 102857"},
		},
		{
			// replica: 20000 + 2 x (1000 + 200) = 22400. gateway 10 queued,
			// I 1000, hit 0.5, O 200: 10 x 1000 x (1 - 0.5) + 10 x 200 =
			// 5000 + 2000 = 7000. demand 29400. capacity: k1 100000 x 0.80
			// = 80000 < (c) 281600. spare = 80000 - 29400/0.70 = 80000 -
			// 42000 = 38000.
			name: "gateway queue with prefix hit rate",
			model: tokModel(t0, 10, tokVariant("a", "H100", scaling.Replica{
				KVCapacityTokens: 100000, TokensInUse: 20000, Queue: 2, AvgInputTokens: 1000, AvgOutputTokens: 200, PrefixHitRate: 0.5,
			})),
			demand:  29400,
			supply:  80000,
			spare:   38000,
			reasons: []string{"gateway queue 10 x (1000 in x (1 - hit 0.50) + 200 out) = 7000", "(1 replicas 22400 + gateway 7000)"},
		},
		{
			// a replica that reports no token averages uses the model's
			// for its queue: replica b: 0 + 3 x (1000 + 200) = 3600;
			// replica a: 1000 + 0 = 1000. demand 4600. capacities 80000
			// (k1 < 281600 derived) and 80000 (k1): supply 160000.
			name: "queue of a replica without averages uses the model's",
			model: tokModel(t0, 0, tokVariant("a", "H100",
				scaling.Replica{KVCapacityTokens: 100000, TokensInUse: 1000, AvgInputTokens: 1000, AvgOutputTokens: 200},
				scaling.Replica{KVCapacityTokens: 100000, Queue: 3},
			)),
			demand: 4600,
			supply: 160000,
			spare:  160000 - 4600/0.70,
		},
		{
			// gateway queue while token averages are unknown: not counted.
			name:    "gateway queue with unknown averages",
			model:   tokModel(t0, 4, tokVariant("a", "H100", scaling.Replica{KVCapacityTokens: 100000})),
			supply:  80000,
			spare:   80000,
			reasons: []string{"gateway queue 4: token averages unknown, not counted"},
		},
		{
			// no replicas anywhere: zero everything, no NaN.
			name:  "empty model",
			model: tokModel(t0, 3, &scaling.Variant{Name: "a"}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := only(t, NewTokenAnalyzer().Analyze(tt.model, DefaultTokenConfig()))
			if a.Analyzer != TokenAnalyzerName || a.ModelID != "m" || a.SkipPending || a.Hold || a.Priority != 1 {
				t.Errorf("unexpected header %+v", a)
			}
			approx(t, "demand", a.Demand, tt.demand)
			approx(t, "supply", a.Supply, tt.supply)
			approx(t, "required", a.Required, tt.required)
			approx(t, "spare", a.Spare, tt.spare)
			joined := strings.Join(a.Reasons, "; ")
			for _, r := range tt.reasons {
				if !strings.Contains(joined, r) {
					t.Errorf("reasons %q lack %q", joined, r)
				}
			}
		})
	}
}

// TestRoles: prefill and decode are analyzed separately; the gateway
// queue's input part goes to prefill, its output part to decode.
func TestRoles(t *testing.T) {
	// prefill replicas: k1 = 50000 x 0.80 = 40000; output tokens unknown
	// so no (c): capacity 40000. demand = 10000 + 1 x 2000 (queue x I
	// only) = 12000 each.
	p := func() scaling.Replica {
		return scaling.Replica{Role: scaling.RolePrefill, KVCapacityTokens: 50000, TokensInUse: 10000, Queue: 1, AvgInputTokens: 2000, PrefixHitRate: 0.25}
	}
	// decode replicas: k1 = 100000 x 0.80 = 80000 < (c) 256 x (2000 +
	// 200) = 563200. demand = 30000 + 1 x (2000 + 400) = 32400 each.
	d := func() scaling.Replica {
		return scaling.Replica{Role: scaling.RoleDecode, KVCapacityTokens: 100000, TokensInUse: 30000, Queue: 1, AvgInputTokens: 2000, AvgOutputTokens: 400}
	}
	// gateway 4 queued; model averages I 2000, O 400 (decode only), hit
	// 0.25 (over the prefill replicas): input part 4 x 2000 x 0.75 = 6000
	// -> prefill; output part 4 x 400 = 1600 -> decode.
	m := tokModel(t0, 4, tokVariant("P", "H100", p(), p()), tokVariant("D", "H100", d(), d()))
	as := NewTokenAnalyzer().Analyze(m, DefaultTokenConfig())
	if len(as) != 2 || as[0].Role != scaling.RolePrefill || as[1].Role != scaling.RoleDecode {
		t.Fatalf("want prefill and decode analyses, got %+v", as)
	}
	pre, dec := as[0], as[1]

	// prefill: demand 24000 + 6000 = 30000; supply 80000; spare = 80000 -
	// 30000/0.70 = 80000 - 42857.14 = 37142.86.
	approx(t, "prefill demand", pre.Demand, 30000)
	approx(t, "prefill supply", pre.Supply, 80000)
	approx(t, "prefill required", pre.Required, 0)
	approx(t, "prefill spare", pre.Spare, 80000-30000/0.70)
	if len(pre.VariantCapacity) != 1 || pre.VariantCapacity["P"] != 40000 {
		t.Errorf("prefill VariantCapacity %v", pre.VariantCapacity)
	}
	// decode: demand 64800 + 1600 = 66400; supply 160000; spare = 160000 -
	// 66400/0.70 = 160000 - 94857.14 = 65142.86.
	approx(t, "decode demand", dec.Demand, 66400)
	approx(t, "decode supply", dec.Supply, 160000)
	approx(t, "decode required", dec.Required, 0)
	approx(t, "decode spare", dec.Spare, 160000-66400/0.70)
	if len(dec.VariantCapacity) != 1 || dec.VariantCapacity["D"] != 80000 {
		t.Errorf("decode VariantCapacity %v", dec.VariantCapacity)
	}

	// Heavier decode load: 4 decode replicas x (78000 + 3 x 2400) = 4 x
	// 85200 = 340800 on supply 4 x 80000 = 320000: required = 340800/0.85
	// - 320000 = 400941.18 - 320000 = 80941.18; prefill is unaffected
	// (no gateway queue now: demand 24000, spare 80000 - 34285.71).
	heavy := func() scaling.Replica {
		r := d()
		r.TokensInUse, r.Queue = 78000, 3
		return r
	}
	m = tokModel(t0, 0, tokVariant("P", "H100", p(), p()), tokVariant("D", "H100", heavy(), heavy(), heavy(), heavy()))
	as = NewTokenAnalyzer().Analyze(m, DefaultTokenConfig())
	approx(t, "prefill spare", as[0].Spare, 80000-24000/0.70)
	approx(t, "decode required", as[1].Required, 340800/0.85-320000)
	approx(t, "decode spare", as[1].Spare, 0)
}

// TestCachedCapacity: "capacity knowledge is cached for zero-replica
// variants".
func TestCachedCapacity(t *testing.T) {
	cfg := DefaultTokenConfig()
	ta := NewTokenAnalyzer()
	k1 := func(kvTokens, inUse float64) scaling.Replica {
		return scaling.Replica{KVCapacityTokens: kvTokens, TokensInUse: inUse}
	}
	// Snapshot 1: a = 2 x 80000, b = 1 x 40000.
	ta.Analyze(tokModel(t0, 0, tokVariant("a", "H100", k1(100000, 0), k1(100000, 0)), tokVariant("b", "L4", k1(50000, 0))), cfg)

	// Snapshot 2: b scaled to zero keeps capacity 40000 but adds no
	// supply: supply = 2 x 80000 = 160000. demand 20000 x 2 = 40000.
	b := &scaling.Variant{Name: "b", Accelerator: "L4"}
	a := only(t, ta.Analyze(tokModel(t0.Add(time.Second), 0, tokVariant("a", "H100", k1(100000, 20000), k1(100000, 20000)), b), cfg))
	approx(t, "cached capacity", a.VariantCapacity["b"], 40000)
	approx(t, "supply", a.Supply, 160000)
	if j := strings.Join(a.Reasons, "; "); !strings.Contains(j, "variant b: 0 ready, 0 pending, 40000 tokens/replica (cached)") {
		t.Errorf("reasons %q", j)
	}

	// Snapshot 3: b's target is back to 1, not ready yet: anticipated
	// supply = 160000 + 1 x 40000 = 200000. With demand 2 x 79000 =
	// 158000: required = 158000/0.85 - 200000 = 185882.35 - 200000 < 0
	// -> 0 (it would be 25882.35 without the pending replica).
	b.Current = 1
	a = only(t, ta.Analyze(tokModel(t0.Add(2*time.Second), 0, tokVariant("a", "H100", k1(100000, 79000), k1(100000, 79000)), b), cfg))
	approx(t, "required", a.Required, 0)
	if j := strings.Join(a.Reasons, "; "); !strings.Contains(j, "anticipated 200000 (+1 pending)") {
		t.Errorf("reasons %q", j)
	}

	// A never-seen variant c without replicas: estimated from (c) with the
	// model's averages I 900, O 100 and its limits B 4096, S 512: 389120.
	// A never-seen variant without replicas while averages are unknown is
	// absent (snapshot 5).
	c := &scaling.Variant{Name: "c", MaxNumBatchedTokens: 4096, MaxNumSeqs: 512}
	a = only(t, ta.Analyze(tokModel(t0.Add(3*time.Second), 0, tokVariant("a", "H100",
		scaling.Replica{KVCapacityTokens: 100000, AvgInputTokens: 900, AvgOutputTokens: 100}), c), cfg))
	approx(t, "estimated capacity", a.VariantCapacity["c"], 389120)
	a = only(t, ta.Analyze(tokModel(t0.Add(4*time.Second), 0, tokVariant("a", "H100", k1(100000, 0)), c), cfg))
	if v, ok := a.VariantCapacity["c"]; ok {
		t.Errorf("VariantCapacity[c] = %v, want absent", v)
	}

	// Disaggregated: a decode variant scaled to zero stays in the decode
	// analysis with its cached capacity.
	ta = NewTokenAnalyzer()
	dec := scaling.Replica{Role: scaling.RoleDecode, KVCapacityTokens: 100000}
	pre := scaling.Replica{Role: scaling.RolePrefill, KVCapacityTokens: 50000}
	ta.Analyze(tokModel(t0, 0, tokVariant("P", "H100", pre), tokVariant("D", "H100", dec)), cfg)
	as := ta.Analyze(tokModel(t0.Add(time.Second), 0, tokVariant("P", "H100", pre), &scaling.Variant{Name: "D"}), cfg)
	if len(as) != 2 || as[1].Role != scaling.RoleDecode {
		t.Fatalf("want prefill and decode analyses, got %+v", as)
	}
	approx(t, "cached decode capacity", as[1].VariantCapacity["D"], 80000)
	if _, ok := as[0].VariantCapacity["D"]; ok {
		t.Errorf("decode variant in the prefill analysis: %v", as[0].VariantCapacity)
	}
}

func TestTokenNilAndZeroConfig(t *testing.T) {
	if as := NewTokenAnalyzer().Analyze(nil, DefaultTokenConfig()); as != nil {
		t.Errorf("nil model: %+v", as)
	}
	// The zero TokenConfig means the defaults; the zero TokenAnalyzer works.
	var ta TokenAnalyzer
	m := tokModel(t0, 0, tokVariant("a", "H100", scaling.Replica{KVCapacityTokens: 100000, TokensInUse: 10000}))
	a := only(t, ta.Analyze(m, TokenConfig{}))
	approx(t, "capacity", a.VariantCapacity["a"], 80000)
	approx(t, "spare", a.Spare, 80000-10000/0.70)
}

func TestTokenGarbageInputs(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	m := tokModel(t0, nan, tokVariant("a", "H100",
		scaling.Replica{KVCapacityTokens: nan, TokensInUse: inf, Queue: -inf, AvgInputTokens: nan, AvgOutputTokens: -1, PrefixHitRate: 7},
		scaling.Replica{KVCapacityTokens: 1e300, TokensInUse: 1e300, Queue: 1e300, AvgInputTokens: 1e300, AvgOutputTokens: 1e300, PrefixHitRate: nan},
	))
	for _, a := range NewTokenAnalyzer().Analyze(m, TokenConfig{ScaleUpThreshold: nan, ScaleDownBoundary: -1}) {
		checkFinite(t, a)
	}
}

// checkFinite fails on a NaN, infinite or negative output.
func checkFinite(t *testing.T, a scaling.Analysis) {
	t.Helper()
	bad := func(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) || x < 0 }
	if bad(a.Required) || bad(a.Spare) || bad(a.Demand) || bad(a.Supply) {
		t.Fatalf("bad outputs: required %v spare %v demand %v supply %v", a.Required, a.Spare, a.Demand, a.Supply)
	}
	if a.Required > 0 && a.Spare > 0 {
		t.Fatalf("required %v and spare %v both positive", a.Required, a.Spare)
	}
	for v, c := range a.VariantCapacity {
		if bad(c) || c == 0 {
			t.Fatalf("bad VariantCapacity[%s] = %v", v, c)
		}
	}
}
