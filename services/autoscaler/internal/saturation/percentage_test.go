package saturation

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/hermod/hermod/services/autoscaler/internal/scaling"
)

// kvq is one replica's kv usage and queue.
type kvq struct{ kv, queue float64 }

// steadyVariant is a variant whose target equals its ready replicas.
func steadyVariant(name string, loads ...kvq) *scaling.Variant {
	v := &scaling.Variant{Name: name, Current: len(loads), Ready: len(loads)}
	for i, l := range loads {
		v.Replicas = append(v.Replicas, scaling.Replica{
			Name: name + "-" + string(rune('a'+i)), Variant: name, KVUsage: l.kv, Queue: l.queue,
		})
	}
	return v
}

func TestSaturatedAtThresholds(t *testing.T) {
	c := DefaultPercentageConfig() // kv 0.80, queue 5
	tests := []struct {
		name      string
		kv, queue float64
		want      bool
	}{
		{"below both", 0.79, 4.99, false},
		{"kv at threshold (>=)", 0.80, 0, true},
		{"kv above threshold", 0.95, 0, true},
		{"queue at threshold (>=)", 0, 5, true},
		{"queue above threshold", 0, 12, true},
		{"just below kv threshold", math.Nextafter(0.80, 0), 0, false},
		{"just below queue threshold", 0, math.Nextafter(5, 0), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := saturated(tt.kv, tt.queue, c); got != tt.want {
				t.Errorf("saturated(%v, %v) = %v, want %v", tt.kv, tt.queue, got, tt.want)
			}
		})
	}
}

func TestAnalyzePercentage(t *testing.T) {
	tests := []struct {
		name     string
		config   PercentageConfig // zero value: defaults 0.80 / 5 / 0.10 / 3
		variants []*scaling.Variant
		required float64
		spare    float64
		hold     bool
		demand   float64 // checked when >= 0
		supply   float64
		reasons  []string // substrings of the joined reasons
	}{
		{
			// kv 0.80 >= 0.80 and queue 5 >= 5: both saturated, none left
			// to average -> scale up by 1.
			name:     "at both thresholds all saturated",
			variants: []*scaling.Variant{steadyVariant("a", kvq{0.80, 0}, kvq{0.10, 5})},
			required: 1,
			// demand = max(0.80/0.80, 0/5) + max(0.10/0.80, 5/5) = 1 + 1 = 2
			demand:  2,
			supply:  2,
			reasons: []string{"all 2 ready replicas saturated"},
		},
		{
			// kv 0.79 < 0.80, queue 4 < 5: not saturated; spare kv
			// 0.80 - 0.79 = 0.01 < 0.10 -> scale up; spare queue 1 < 3 too.
			name:     "just below thresholds not saturated",
			variants: []*scaling.Variant{steadyVariant("a", kvq{0.79, 4})},
			required: 1,
			demand:   -1,
			supply:   1,
			reasons:  []string{"1 ready replicas, 0 saturated", "avg spare kv 0.010 < 0.1", "avg spare queue 1.00 < 3"},
		},
		{
			// 0.90 saturated; non-saturated 0.75 and 0.71: avg kv 0.73,
			// spare kv 0.80 - 0.73 = 0.07 < 0.10 -> scale up. Queue spare 5.
			name:     "scale up by kv",
			variants: []*scaling.Variant{steadyVariant("a", kvq{0.75, 0}, kvq{0.71, 0}), steadyVariant("b", kvq{0.90, 0})},
			required: 1,
			demand:   -1,
			supply:   3,
			reasons:  []string{"3 ready replicas, 1 saturated", "avg spare kv 0.070 < 0.1"},
		},
		{
			// queues 3 and 2: avg 2.5, spare 5 - 2.5 = 2.5 < 3 -> scale up.
			// kv 0.20: spare 0.60, fine.
			name:     "scale up by queue",
			variants: []*scaling.Variant{steadyVariant("a", kvq{0.20, 3}, kvq{0.20, 2})},
			required: 1,
			demand:   -1,
			supply:   2,
			reasons:  []string{"avg spare queue 2.50 < 3"},
		},
		{
			// kv 0.30 x3, queues 0, 1, 2: avg kv 0.30 (spare 0.50), avg
			// queue 1 (spare 4): no scale-up. N = 3, load x 3/2: kv 0.45 ->
			// spare 0.35 >= 0.10; queue 1.5 -> spare 3.5 >= 3: scale down.
			// demand = 0.375 + max(0.375, 0.2) + max(0.375, 0.4) = 1.15
			name:     "scale down allowed",
			variants: []*scaling.Variant{steadyVariant("a", kvq{0.30, 0}, kvq{0.30, 1}), steadyVariant("b", kvq{0.30, 2})},
			spare:    1,
			demand:   1.15,
			supply:   3,
			reasons:  []string{"with load x 3/2: spare kv 0.350, spare queue 3.50", "scale down by 1 replica"},
		},
		{
			// kv 0.40 x2: spare 0.40, no scale-up. N = 2, load x 2/1: kv
			// 0.80 -> spare 0.00 < 0.10: refused.
			name:     "scale down refused by kv",
			variants: []*scaling.Variant{steadyVariant("a", kvq{0.40, 0}, kvq{0.40, 0})},
			demand:   -1,
			supply:   2,
			reasons:  []string{"with load x 2/1: spare kv 0.000", "scale-down refused (spare kv 0.000 < 0.1)"},
		},
		{
			// queue 1.8 x4: spare 3.2 >= 3, no scale-up. N = 4, load x 4/3:
			// queue 2.4 -> spare 2.6 < 3: refused (kv 0.10 -> 0.133, spare
			// 0.667, fine).
			name:     "scale down refused by queue",
			variants: []*scaling.Variant{steadyVariant("a", kvq{0.10, 1.8}, kvq{0.10, 1.8}, kvq{0.10, 1.8}, kvq{0.10, 1.8})},
			demand:   -1,
			supply:   4,
			reasons:  []string{"scale-down refused (spare queue 2.60 < 3)"},
		},
		{
			// one non-saturated replica (kv 0.10, spare 0.70) beside a
			// saturated one: no scale-up, and scale-down needs >= 2.
			name:     "fewer than two non-saturated",
			variants: []*scaling.Variant{steadyVariant("a", kvq{0.10, 0}, kvq{0.90, 0})},
			demand:   -1,
			supply:   2,
			reasons:  []string{"scale-down needs >= 2"},
		},
		{
			// would scale up (spare kv 0.01), but variant a has a pending
			// replica (target 3, ready 2): hold.
			name: "transition hold (pending)",
			variants: []*scaling.Variant{func() *scaling.Variant {
				v := steadyVariant("a", kvq{0.79, 0}, kvq{0.79, 0})
				v.Current = 3
				return v
			}()},
			hold:    true,
			demand:  -1,
			supply:  2,
			reasons: []string{"variant a in transition: target 3, ready 2", "hold"},
		},
		{
			// would scale down, but variant b is above its target.
			name: "transition hold (scaling down)",
			variants: []*scaling.Variant{steadyVariant("a", kvq{0.1, 0}, kvq{0.1, 0}), func() *scaling.Variant {
				v := steadyVariant("b", kvq{0.1, 0})
				v.Current = 0
				return v
			}()},
			hold:    true,
			demand:  -1,
			supply:  3,
			reasons: []string{"variant b in transition: target 0, ready 1"},
		},
		{
			name:     "zero ready replicas: no signal",
			variants: []*scaling.Variant{{Name: "a"}, {Name: "b"}},
			demand:   0,
			supply:   0,
			reasons:  []string{"no ready replicas: no signal"},
		},
		{
			name:     "no variants",
			demand:   0,
			supply:   0,
			reasons:  []string{"no ready replicas"},
			variants: []*scaling.Variant{nil},
		},
		{
			// NaN and negative inputs count as 0: kv 0 x2 -> scale down.
			name:     "garbage inputs count as zero",
			variants: []*scaling.Variant{steadyVariant("a", kvq{math.NaN(), -3}, kvq{math.Inf(1), math.NaN()})},
			spare:    1,
			demand:   0,
			supply:   2,
		},
		{
			// custom thresholds: kv 0.5, queue 10, triggers 0.2 / 4. kv 0.35
			// and 0.45 are not saturated: avg 0.40, spare 0.10 < 0.20 -> up.
			name:     "custom thresholds",
			config:   PercentageConfig{KVCacheThreshold: 0.5, QueueLengthThreshold: 10, KVSpareTrigger: 0.2, QueueSpareTrigger: 4},
			variants: []*scaling.Variant{steadyVariant("a", kvq{0.35, 0}, kvq{0.45, 0})},
			required: 1,
			demand:   -1,
			supply:   2,
			reasons:  []string{"avg spare kv 0.100 < 0.2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &scaling.Model{ID: "m", Variants: tt.variants}
			a := AnalyzePercentage(m, tt.config)
			if a.Analyzer != PercentageAnalyzerName || a.ModelID != "m" || a.Priority != 1 {
				t.Errorf("analyzer %q model %q priority %v", a.Analyzer, a.ModelID, a.Priority)
			}
			if !a.SkipPending || a.ScaleDownMinCurrent != 1 {
				t.Errorf("SkipPending %v ScaleDownMinCurrent %d, want true 1", a.SkipPending, a.ScaleDownMinCurrent)
			}
			if a.Required != tt.required || a.Spare != tt.spare || a.Hold != tt.hold {
				t.Errorf("required %v spare %v hold %v, want %v %v %v (reasons %q)",
					a.Required, a.Spare, a.Hold, tt.required, tt.spare, tt.hold, a.Reasons)
			}
			if tt.demand >= 0 {
				approx(t, "demand", a.Demand, tt.demand)
			}
			approx(t, "supply", a.Supply, tt.supply)
			for _, v := range tt.variants {
				if v != nil && a.VariantCapacity[v.Name] != 1 {
					t.Errorf("VariantCapacity[%s] = %v, want 1", v.Name, a.VariantCapacity[v.Name])
				}
			}
			joined := strings.Join(a.Reasons, "; ")
			for _, r := range tt.reasons {
				if !strings.Contains(joined, r) {
					t.Errorf("reasons %q lack %q", joined, r)
				}
			}
		})
	}
}

func TestAnalyzePercentageNilModel(t *testing.T) {
	a := AnalyzePercentage(nil, DefaultPercentageConfig())
	if a.Required != 0 || a.Spare != 0 || len(a.Reasons) == 0 {
		t.Errorf("nil model: %+v", a)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		field string
	}{
		{"percentage defaults", DefaultPercentageConfig().Validate(), ""},
		{"token defaults", DefaultTokenConfig().Validate(), ""},
		{"kv threshold 0", PercentageConfig{0, 5, 0.1, 3}.Validate(), "kvCacheThreshold"},
		{"kv threshold above 1", PercentageConfig{1.2, 5, 0.1, 3}.Validate(), "kvCacheThreshold"},
		{"queue threshold NaN", PercentageConfig{0.8, math.NaN(), 0.1, 3}.Validate(), "queueLengthThreshold"},
		{"kv trigger at threshold", PercentageConfig{0.8, 5, 0.8, 3}.Validate(), "kvSpareTrigger"},
		{"queue trigger 0", PercentageConfig{0.8, 5, 0.1, 0}.Validate(), "queueSpareTrigger"},
		{"token queue threshold Inf", TokenConfig{0.8, math.Inf(1), 0.85, 0.7}.Validate(), "queueLengthThreshold"},
		{"scale up above 1", TokenConfig{0.8, 5, 1.1, 0.7}.Validate(), "scaleUpThreshold"},
		{"down not below up", TokenConfig{0.8, 5, 0.85, 0.85}.Validate(), "scaleDownBoundary"},
		{"down 0", TokenConfig{0.8, 5, 0.85, 0}.Validate(), "scaleDownBoundary"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.field == "" {
				if tt.err != nil {
					t.Fatalf("unexpected error %v", tt.err)
				}
				return
			}
			if !errors.Is(tt.err, ErrInvalidConfig) || !strings.Contains(tt.err.Error(), tt.field) {
				t.Fatalf("error %v, want ErrInvalidConfig naming %s", tt.err, tt.field)
			}
		})
	}
}

// approx fails unless got is within 1e-9 (relative) of want.
func approx(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9*max(1, math.Abs(want)) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}
