package optimizer

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hermod/hermod/services/autoscaler/internal/scaling"
)

// vr builds a variant with Ready == Current and no replicas.
func vr(name string, cost float64, minR, maxR, current int) *scaling.Variant {
	return &scaling.Variant{Name: name, Cost: cost, MinReplicas: minR, MaxReplicas: maxR, Current: current, Ready: current}
}

// pending makes n of v's replicas pending.
func pending(v *scaling.Variant, n int) *scaling.Variant {
	v.Ready = v.Current - n
	return v
}

// withRole gives v one ready replica of role r per ready replica.
func withRole(v *scaling.Variant, r scaling.Role) *scaling.Variant {
	for i := range v.Ready {
		v.Replicas = append(v.Replicas, scaling.Replica{Name: fmt.Sprintf("%s-%d", v.Name, i), Variant: v.Name, Role: r})
	}
	return v
}

func mdl(id string, vs ...*scaling.Variant) *scaling.Model {
	return &scaling.Model{ID: id, Variants: vs}
}

func up(required float64, capacity map[string]float64) scaling.Analysis {
	return scaling.Analysis{ModelID: "m", Analyzer: "test", Required: required, VariantCapacity: capacity, Priority: 1}
}

func down(spare float64, capacity map[string]float64) scaling.Analysis {
	return scaling.Analysis{ModelID: "m", Analyzer: "test", Spare: spare, VariantCapacity: capacity, Priority: 1}
}

func desiredOf(ts []scaling.Target) map[string]int {
	out := map[string]int{}
	for _, t := range ts {
		out[t.Variant] = t.Desired
	}
	return out
}

func reasonOf(ts []scaling.Target, variant string) string {
	for _, t := range ts {
		if t.Variant == variant {
			return t.Reason
		}
	}
	return ""
}

func TestCostAware(t *testing.T) {
	caps := map[string]float64{"a": 1000, "b": 2000}
	ones := map[string]float64{"a": 1, "b": 1}
	tests := []struct {
		name string
		m    *scaling.Model
		as   []scaling.Analysis
		want map[string]int
		// reasons holds substrings expected in a variant's reason.
		reasons map[string]string
	}{
		{
			// a: 10/1000 = 0.01 per unit, b: 15/2000 = 0.0075: b first
			// although its replica costs more; ceil(3000/2000) = 2.
			name:    "cheapest per capacity first",
			m:       mdl("m", vr("a", 10, 0, 10, 1), vr("b", 15, 0, 10, 1)),
			as:      []scaling.Analysis{up(3000, caps)},
			want:    map[string]int{"a": 1, "b": 3},
			reasons: map[string]string{"a": "no change", "b": "scale up +2: required 3000 at 2000 per replica, ceil(1.5) = 2"},
		},
		{
			name: "ceil of required over capacity",
			m:    mdl("m", vr("a", 5, 0, 10, 1)),
			as:   []scaling.Analysis{up(2500, map[string]float64{"a": 1000})},
			want: map[string]int{"a": 4},
		},
		{
			// 0.1 + 0.2 = 0.30000000000000004; / 0.1 is 3.0000000000000004,
			// which is 3 replicas, not 4.
			name: "ceil ignores floating-point noise",
			m:    mdl("m", vr("a", 5, 0, 10, 1)),
			as:   []scaling.Analysis{up(0.1+0.2, map[string]float64{"a": 0.1})},
			want: map[string]int{"a": 4},
		},
		{
			// b (cheaper per capacity) can add 1 of ceil(5000/2000) = 3;
			// 5000 - 2000 = 3000 spills to a: ceil(3000/1000) = 3.
			name: "maxReplicas cap and spill",
			m:    mdl("m", vr("a", 10, 0, 10, 1), vr("b", 15, 0, 2, 1)),
			as:   []scaling.Analysis{up(5000, caps)},
			want: map[string]int{"a": 4, "b": 2},
			reasons: map[string]string{
				"b": "scale up +1: required 5000 at 2000 per replica, ceil(2.5) = 3, capped by maxReplicas 2; 3000 spills to the next variant",
				"a": "scale up +3: required 3000 at 1000 per replica, ceil(3) = 3",
			},
		},
		{
			// b +1 (2000), a +1 (1000): 7000 of 10000 left.
			name:    "required beyond every maxReplicas",
			m:       mdl("m", vr("a", 10, 0, 2, 1), vr("b", 15, 0, 2, 1)),
			as:      []scaling.Analysis{up(10000, caps)},
			want:    map[string]int{"a": 2, "b": 2},
			reasons: map[string]string{"b": "7000 of required 10000 not met"},
		},
		{
			name: "variant at maxReplicas spills",
			m:    mdl("m", vr("a", 10, 0, 10, 1), vr("b", 15, 0, 3, 3)),
			as:   []scaling.Analysis{up(1500, caps)},
			want: map[string]int{"a": 3, "b": 3},
			reasons: map[string]string{
				"b": "not scaled up: at maxReplicas 3",
			},
		},
		{
			// b is cheaper per capacity but has a pending replica.
			name: "skip pending",
			m:    mdl("m", vr("a", 10, 0, 10, 1), pending(vr("b", 15, 0, 10, 2), 1)),
			as: []scaling.Analysis{func() scaling.Analysis {
				a := up(1000, caps)
				a.SkipPending = true
				return a
			}()},
			want:    map[string]int{"a": 2, "b": 2},
			reasons: map[string]string{"b": "not scaled up: 1 replicas pending"},
		},
		{
			name: "pending not skipped without SkipPending",
			m:    mdl("m", vr("a", 10, 0, 10, 1), pending(vr("b", 15, 0, 10, 2), 1)),
			as:   []scaling.Analysis{up(1000, caps)},
			want: map[string]int{"a": 1, "b": 3},
		},
		{
			// b costs less but has no capacity entry: its replica count
			// for 1000 is unknown.
			name: "variant without capacity is not scaled",
			m:    mdl("m", vr("a", 10, 0, 10, 1), vr("b", 1, 0, 10, 1)),
			as:   []scaling.Analysis{up(1000, map[string]float64{"a": 1000})},
			want: map[string]int{"a": 2, "b": 1},
		},
		{
			// Most expensive first: b floor(7500/3000) = 2 -> 0 (a runs);
			// 7500 - 6000 = 1500 spills to a: floor(1.5) = 1 -> 3.
			name: "scale down most expensive first with floor and spill",
			m:    mdl("m", vr("a", 5, 0, 10, 4), vr("b", 15, 0, 10, 2)),
			as:   []scaling.Analysis{down(7500, map[string]float64{"a": 1000, "b": 3000})},
			want: map[string]int{"a": 3, "b": 0},
			reasons: map[string]string{
				"b": "scale down -2: spare 7500 at 3000 per replica, floor(2.5) = 2; 1500 spare left for cheaper variants",
				"a": "scale down -1: spare 1500 at 1000 per replica, floor(1.5) = 1",
			},
		},
		{
			// floor(2500/3000) = 0 on b: all 2500 spills to a, floor 2.5 = 2.
			name:    "spare below one replica spills whole",
			m:       mdl("m", vr("a", 5, 0, 10, 4), vr("b", 15, 0, 10, 2)),
			as:      []scaling.Analysis{down(2500, map[string]float64{"a": 1000, "b": 3000})},
			want:    map[string]int{"a": 2, "b": 2},
			reasons: map[string]string{"b": "not scaled down: spare 2500 is less than one replica (3000)"},
		},
		{
			// b floor(9000/3000) = 3 but keeps minReplicas 1: -1, 6000
			// spills to a: floor 6 but the cheapest keeps 1 while b runs: -3.
			name: "minReplicas floor",
			m:    mdl("m", vr("a", 5, 0, 10, 4), vr("b", 15, 1, 10, 2)),
			as:   []scaling.Analysis{down(9000, map[string]float64{"a": 1000, "b": 3000})},
			want: map[string]int{"a": 1, "b": 1},
			reasons: map[string]string{
				"b": "scale down -1: spare 9000 at 3000 per replica, floor(3) = 3, keeps 1 (minReplicas 1)",
				"a": "keeps 1 (the cheapest variant keeps one replica while other variants run)",
			},
		},
		{
			name:    "minReplicas of the most expensive blocks it",
			m:       mdl("m", vr("a", 5, 0, 10, 2), vr("b", 15, 2, 10, 2)),
			as:      []scaling.Analysis{down(1, ones)},
			want:    map[string]int{"a": 1, "b": 2},
			reasons: map[string]string{"b": "not scaled down: 2 replicas, keeps 2 (minReplicas 2)"},
		},
		{
			// b (min 1) 3 -> 1; a, the cheapest, keeps 1 while b runs.
			name:    "cheapest kept at one while others run",
			m:       mdl("m", vr("a", 5, 0, 10, 2), vr("b", 15, 1, 10, 3)),
			as:      []scaling.Analysis{down(100, ones)},
			want:    map[string]int{"a": 1, "b": 1},
			reasons: map[string]string{"a": "the cheapest variant keeps one replica while other variants run"},
		},
		{
			// a (cheapest) has no replica: b keeps the model's last one.
			name:    "last running replica stays",
			m:       mdl("m", vr("a", 5, 0, 10, 0), vr("b", 15, 0, 10, 2)),
			as:      []scaling.Analysis{down(100, ones)},
			want:    map[string]int{"a": 0, "b": 1},
			reasons: map[string]string{"b": "keeps 1 (the last running replica: only scale to zero removes it)"},
		},
		{
			// The dearer b may go to 0 while a runs; a then keeps 1.
			name: "dearer variant may go to zero while the cheapest runs",
			m:    mdl("m", vr("a", 5, 0, 10, 2), vr("b", 15, 0, 10, 3)),
			as:   []scaling.Analysis{down(100, ones)},
			want: map[string]int{"a": 1, "b": 0},
		},
		{
			// The percentage analyzer: spare 1 replica, only a variant with
			// more than 1 replica loses one. b (dearer) has 1, so a loses 1.
			name: "ScaleDownMinCurrent",
			m:    mdl("m", vr("a", 5, 0, 10, 2), vr("b", 15, 0, 10, 1)),
			as: []scaling.Analysis{func() scaling.Analysis {
				a := down(1, ones)
				a.ScaleDownMinCurrent = 1
				return a
			}()},
			want: map[string]int{"a": 1, "b": 1},
			reasons: map[string]string{
				"b": "not scaled down: 1 replicas, keeps 1 (a scale-down only takes from a variant with more than 1 replicas)",
				"a": "scale down -1",
			},
		},
		{
			name: "hold",
			m:    mdl("m", vr("a", 5, 0, 10, 2), vr("b", 15, 0, 10, 1)),
			as: []scaling.Analysis{func() scaling.Analysis {
				a := up(3, ones)
				a.Hold = true
				return a
			}()},
			want:    map[string]int{"a": 2, "b": 1},
			reasons: map[string]string{"a": "hold", "b": "hold"},
		},
		{
			name: "two costs: the cheaper scales up first",
			m:    mdl("m", vr("a", 5, 0, 10, 2), vr("b", 15, 0, 10, 2)),
			as:   []scaling.Analysis{up(1, ones)},
			want: map[string]int{"a": 3, "b": 2},
		},
		{
			name: "two costs: the dearer shrinks first",
			m:    mdl("m", vr("a", 5, 0, 10, 2), vr("b", 15, 0, 10, 2)),
			as:   []scaling.Analysis{down(1, ones)},
			want: map[string]int{"a": 2, "b": 1},
		},
		{
			name: "equal costs: name decides",
			m:    mdl("m", vr("b", 5, 0, 10, 2), vr("a", 5, 0, 10, 2)),
			as:   []scaling.Analysis{up(1, ones), down(1, ones)},
			// up: a first (name ascending); down: b first (descending),
			// a is raised and b is not.
			want: map[string]int{"a": 3, "b": 1},
		},
		{
			// The decode analysis lists both variants, but p's replicas
			// serve prefill: d scales although p is cheaper.
			name: "role maps to the variants whose replicas serve it",
			m: mdl("m", withRole(vr("p", 5, 0, 10, 1), scaling.RolePrefill),
				withRole(vr("d", 10, 0, 10, 1), scaling.RoleDecode)),
			as: []scaling.Analysis{func() scaling.Analysis {
				a := up(1, map[string]float64{"p": 1, "d": 1})
				a.Role = scaling.RoleDecode
				return a
			}()},
			want:    map[string]int{"p": 1, "d": 2},
			reasons: map[string]string{"p": "do not serve the decode role", "d": "test (decode): scale up +1"},
		},
		{
			// Prefill and decode analyses: each scales its own variants; the
			// decode scale-down keeps d's last replica (p does not count).
			name: "prefill and decode analyses",
			m: mdl("m", withRole(vr("p", 5, 0, 10, 1), scaling.RolePrefill),
				withRole(vr("d", 10, 0, 10, 2), scaling.RoleDecode)),
			as: []scaling.Analysis{
				func() scaling.Analysis {
					a := down(5000, map[string]float64{"d": 1000})
					a.Role = scaling.RoleDecode
					return a
				}(),
				func() scaling.Analysis {
					a := up(1500, map[string]float64{"p": 1000})
					a.Role = scaling.RolePrefill
					return a
				}(),
			},
			want: map[string]int{"p": 3, "d": 1},
		},
		{
			// One analysis asks for a, another would shrink both: a is
			// raised, so the spare is taken from b only.
			name: "a variant does not grow and shrink at once",
			m:    mdl("m", vr("a", 5, 0, 10, 2), vr("b", 15, 0, 10, 3)),
			as: []scaling.Analysis{
				down(10, ones),
				up(1, map[string]float64{"a": 1}),
			},
			want:    map[string]int{"a": 3, "b": 0},
			reasons: map[string]string{"a": "not scaled down: a scale-up raised it in this decision"},
		},
		{
			name: "another model's analysis is ignored",
			m:    mdl("m", vr("a", 5, 0, 10, 2)),
			as: []scaling.Analysis{func() scaling.Analysis {
				a := up(1, ones)
				a.ModelID = "other"
				return a
			}()},
			want:    map[string]int{"a": 2},
			reasons: map[string]string{"a": "no change"},
		},
		{
			name:    "non-finite signal is ignored",
			m:       mdl("m", vr("a", 5, 0, 10, 2)),
			as:      []scaling.Analysis{up(posInf(), ones)},
			want:    map[string]int{"a": 2},
			reasons: map[string]string{"a": "signal ignored"},
		},
		{
			name: "no signal: no change",
			m:    mdl("m", vr("a", 5, 0, 10, 2), vr("b", 15, 0, 10, 1)),
			as:   []scaling.Analysis{up(0, ones)},
			want: map[string]int{"a": 2, "b": 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := CostAware(tc.m, tc.as)
			if len(got) != len(tc.m.Variants) {
				t.Fatalf("got %d targets, want one per variant (%d)", len(got), len(tc.m.Variants))
			}
			for i, tg := range got {
				v := tc.m.Variants[i]
				if tg.Variant != v.Name || tg.Current != v.Current {
					t.Errorf("target %d = %+v, want variant %s current %d", i, tg, v.Name, v.Current)
				}
				if tg.Reason == "" {
					t.Errorf("target %s has no reason", tg.Variant)
				}
			}
			if d := desiredOf(got); fmt.Sprint(d) != fmt.Sprint(tc.want) {
				t.Errorf("desired = %v, want %v\n%v", d, tc.want, got)
			}
			for v, sub := range tc.reasons {
				if r := reasonOf(got, v); !strings.Contains(r, sub) {
					t.Errorf("reason of %s = %q, want it to contain %q", v, r, sub)
				}
			}
		})
	}
}

func TestCostAwareNilModel(t *testing.T) {
	if got := CostAware(nil, []scaling.Analysis{up(1, nil)}); got != nil {
		t.Fatalf("CostAware(nil) = %v, want nil", got)
	}
}

func posInf() float64 {
	var zero float64
	return 1 / zero
}

func BenchmarkCostAware(b *testing.B) {
	models, analyses := benchModels(100, 4)
	b.ReportAllocs()
	for b.Loop() {
		for i, m := range models {
			CostAware(m, analyses[i])
		}
	}
}

// benchModels builds n models of k variants with a scale-up or a
// scale-down each.
func benchModels(n, k int) ([]*scaling.Model, [][]scaling.Analysis) {
	models := make([]*scaling.Model, n)
	analyses := make([][]scaling.Analysis, n)
	for i := range n {
		m := &scaling.Model{ID: fmt.Sprintf("model-%03d", i)}
		caps := map[string]float64{}
		for j := range k {
			v := &scaling.Variant{
				Name: fmt.Sprintf("model-%03d-v%d", i, j), Cost: float64(5 + 3*j), MinReplicas: 1,
				MaxReplicas: 8, Current: 1 + (i+j)%4, Ready: 1 + (i+j)%4,
				Accelerator: fmt.Sprintf("acc-%d", j%2), GPUsPerReplica: 1 + j%2,
			}
			m.Variants = append(m.Variants, v)
			caps[v.Name] = float64(1000 * (1 + j))
		}
		a := scaling.Analysis{ModelID: m.ID, Analyzer: "bench", VariantCapacity: caps, Priority: float64(1 + i%3)}
		if i%2 == 0 {
			a.Required = float64(1500 * (1 + i%5))
		} else {
			a.Spare = float64(1200 * (1 + i%5))
		}
		models[i] = m
		analyses[i] = []scaling.Analysis{a}
	}
	return models, analyses
}
