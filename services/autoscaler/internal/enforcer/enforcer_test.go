package enforcer

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hermod/hermod/services/autoscaler/internal/scaling"
)

func vr(name string, cost float64, minR, maxR, current int) *scaling.Variant {
	return &scaling.Variant{Name: name, Cost: cost, MinReplicas: minR, MaxReplicas: maxR, Current: current, Ready: current}
}

// idle is a model watched for a whole retention period with no success.
func idle(vs ...*scaling.Variant) *scaling.Model {
	return &scaling.Model{ID: "m", Variants: vs, RetentionObserved: true}
}

// targets builds optimizer targets from variant=desired pairs.
func targets(m *scaling.Model, desired ...int) []scaling.Target {
	out := make([]scaling.Target, len(desired))
	for i, d := range desired {
		v := m.Variants[i]
		out[i] = scaling.Target{Variant: v.Name, Current: v.Current, Desired: d, Reason: "optimizer"}
	}
	return out
}

func desiredOf(ts []scaling.Target) map[string]int {
	out := map[string]int{}
	for _, t := range ts {
		out[t.Variant] = t.Desired
	}
	return out
}

func TestEnforce(t *testing.T) {
	tests := []struct {
		name        string
		m           *scaling.Model
		desired     []int // the optimizer's, in variant order
		scaleToZero bool
		want        map[string]int
		reasons     map[string]string
	}{
		{
			name:        "scale to zero after the retention period",
			m:           idle(vr("a", 5, 0, 4, 2), vr("b", 15, 0, 4, 1)),
			desired:     []int{2, 1},
			scaleToZero: true,
			want:        map[string]int{"a": 0, "b": 0},
			reasons:     map[string]string{"a": "scale to zero: no successful request in the retention period"},
		},
		{
			name:        "scale to zero skipped with minReplicas > 0",
			m:           idle(vr("a", 5, 0, 4, 2), vr("b", 15, 1, 4, 1)),
			desired:     []int{2, 1},
			scaleToZero: true,
			want:        map[string]int{"a": 2, "b": 1},
		},
		{
			// b's minReplicas 1 also raises the optimizer's 0.
			name:        "minReplicas > 0 clamps instead",
			m:           idle(vr("a", 5, 0, 4, 1), vr("b", 15, 1, 4, 1)),
			desired:     []int{1, 0},
			scaleToZero: true,
			want:        map[string]int{"a": 1, "b": 1},
			reasons:     map[string]string{"b": "optimizer; raised to minReplicas 1"},
		},
		{
			// Not watched for a whole retention period: no zero; every
			// target 0 keeps one replica on the cheapest.
			name: "not observed long enough",
			m: func() *scaling.Model {
				m := idle(vr("a", 5, 0, 4, 1), vr("b", 15, 0, 4, 1))
				m.RetentionObserved = false
				return m
			}(),
			desired:     []int{0, 0},
			scaleToZero: true,
			want:        map[string]int{"a": 1, "b": 0},
			reasons: map[string]string{"a": "keep one replica on the cheapest variant (cost 5): " +
				"scale to zero waits until the model has been watched for a whole retention period"},
		},
		{
			name: "successful requests in the retention period",
			m: func() *scaling.Model {
				m := idle(vr("a", 5, 0, 4, 2))
				m.SuccessInRetention = 3
				return m
			}(),
			desired:     []int{2},
			scaleToZero: true,
			want:        map[string]int{"a": 2},
		},
		{
			name: "requests waiting in the gateway queue",
			m: func() *scaling.Model {
				m := idle(vr("a", 5, 0, 4, 1))
				m.GatewayQueue = 2
				return m
			}(),
			desired:     []int{1},
			scaleToZero: true,
			want:        map[string]int{"a": 1},
		},
		{
			name: "requests running on a replica",
			m: func() *scaling.Model {
				v := vr("a", 5, 0, 4, 1)
				v.Replicas = []scaling.Replica{{Name: "a-0", Variant: "a", Running: 1}}
				return idle(v)
			}(),
			desired:     []int{0},
			scaleToZero: true,
			want:        map[string]int{"a": 1},
			reasons:     map[string]string{"a": "replica a-0 of variant a has requests running or waiting"},
		},
		{
			// Disabled: all targets 0 -> the cheapest to 1 (equal costs:
			// the name decides).
			name:    "keep one on the cheapest",
			m:       idle(vr("c", 15, 0, 4, 1), vr("b", 5, 0, 4, 1), vr("a", 5, 0, 4, 0)),
			desired: []int{0, 0, 0},
			want:    map[string]int{"a": 1, "b": 0, "c": 0},
			reasons: map[string]string{"a": "keep one replica on the cheapest variant (cost 5): scale to zero is disabled"},
		},
		{
			name:    "keep one skips a variant with maxReplicas 0",
			m:       idle(vr("a", 5, 0, 0, 0), vr("b", 15, 0, 4, 1)),
			desired: []int{0, 0},
			want:    map[string]int{"a": 0, "b": 1},
		},
		{
			name:    "clamp to the replica bounds",
			m:       idle(vr("a", 5, 2, 5, 3), vr("b", 15, 0, 3, 3)),
			desired: []int{0, 7},
			want:    map[string]int{"a": 2, "b": 3},
			reasons: map[string]string{"a": "raised to minReplicas 2", "b": "lowered to maxReplicas 3"},
		},
		{
			name:    "a variant with minReplicas 0 may be at zero while others run",
			m:       idle(vr("a", 5, 0, 5, 1), vr("b", 15, 0, 3, 1)),
			desired: []int{2, 0},
			want:    map[string]int{"a": 2, "b": 0},
		},
		{
			// Already at zero with scale to zero enabled: no replica is
			// started (scale from zero reacts to queued requests), even
			// before a whole retention period.
			name: "stays at zero",
			m: func() *scaling.Model {
				m := idle(vr("a", 5, 0, 4, 0), vr("b", 15, 0, 4, 0))
				m.RetentionObserved = false
				return m
			}(),
			desired:     []int{0, 0},
			scaleToZero: true,
			want:        map[string]int{"a": 0, "b": 0},
			reasons:     map[string]string{"a": "stays at zero"},
		},
		{
			name:    "at zero with scale to zero disabled gets one",
			m:       idle(vr("a", 5, 0, 4, 0), vr("b", 15, 0, 4, 0)),
			desired: []int{0, 0},
			want:    map[string]int{"a": 1, "b": 0},
		},
		{
			// The optimizer's targets for b are missing: b keeps Current.
			name:    "missing target keeps current",
			m:       idle(vr("a", 5, 1, 4, 1), vr("b", 15, 1, 4, 2)),
			desired: []int{3},
			want:    map[string]int{"a": 3, "b": 2},
			reasons: map[string]string{"b": "no change"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Enforce(tc.m, targets(tc.m, tc.desired...), tc.scaleToZero)
			if len(got) != len(tc.m.Variants) {
				t.Fatalf("got %d targets, want %d", len(got), len(tc.m.Variants))
			}
			for i, tg := range got {
				if v := tc.m.Variants[i]; tg.Variant != v.Name || tg.Current != v.Current || tg.Reason == "" {
					t.Errorf("target %d = %+v (variant %s, current %d)", i, tg, v.Name, v.Current)
				}
			}
			if d := desiredOf(got); fmt.Sprint(d) != fmt.Sprint(tc.want) {
				t.Errorf("desired = %v, want %v\n%v", d, tc.want, got)
			}
			for v, sub := range tc.reasons {
				var r string
				for _, tg := range got {
					if tg.Variant == v {
						r = tg.Reason
					}
				}
				if !strings.Contains(r, sub) {
					t.Errorf("reason of %s = %q, want it to contain %q", v, r, sub)
				}
			}
		})
	}
}

func TestEnforceDropsUnknownTargets(t *testing.T) {
	m := idle(vr("a", 5, 0, 4, 1))
	got := Enforce(m, []scaling.Target{{Variant: "zz", Desired: 3}, {Variant: "a", Desired: 2}}, false)
	if len(got) != 1 || got[0].Variant != "a" || got[0].Desired != 2 {
		t.Fatalf("got %v", got)
	}
	if Enforce(nil, nil, true) != nil {
		t.Fatal("Enforce(nil) is not nil")
	}
}

func TestFromZero(t *testing.T) {
	tests := []struct {
		name    string
		m       *scaling.Model
		queued  float64
		want    string // variant scaled to 1, "" for none
		wantMsg string
	}{
		{
			name:    "queued requests at zero: the cheapest to 1",
			m:       idle(vr("b", 15, 0, 4, 0), vr("a", 5, 0, 4, 0)),
			queued:  3,
			want:    "a",
			wantMsg: "scale from zero: 3 requests waiting in the gateway queue, the cheapest variant (cost 5) to 1",
		},
		{
			name:   "equal costs: the name decides",
			m:      idle(vr("b", 5, 0, 4, 0), vr("a", 5, 0, 4, 0)),
			queued: 1,
			want:   "a",
		},
		{
			name:   "the cheapest may not have a replica",
			m:      idle(vr("a", 5, 0, 0, 0), vr("b", 15, 0, 4, 0)),
			queued: 1,
			want:   "b",
		},
		{name: "nothing queued", m: idle(vr("a", 5, 0, 4, 0)), queued: 0},
		{name: "a variant runs", m: idle(vr("a", 5, 0, 4, 0), vr("b", 15, 0, 4, 1)), queued: 5},
		{name: "no variant may run", m: idle(vr("a", 5, 0, 0, 0)), queued: 5},
		{name: "no variants", m: idle(), queued: 5},
		{name: "nil model", queued: 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := FromZero(tc.m, tc.queued)
			if ok != (tc.want != "") {
				t.Fatalf("FromZero = %+v, %v; want trigger %v", got, ok, tc.want != "")
			}
			if !ok {
				return
			}
			if got.Variant != tc.want || got.Current != 0 || got.Desired != 1 {
				t.Errorf("FromZero = %+v, want %s 0 -> 1", got, tc.want)
			}
			if tc.wantMsg != "" && got.Reason != tc.wantMsg {
				t.Errorf("reason = %q, want %q", got.Reason, tc.wantMsg)
			}
		})
	}
}

func BenchmarkEnforce(b *testing.B) {
	const n, k = 100, 4
	models := make([]*scaling.Model, n)
	in := make([][]scaling.Target, n)
	for i := range n {
		m := &scaling.Model{ID: fmt.Sprintf("model-%03d", i), RetentionObserved: true, SuccessInRetention: float64(i % 3)}
		for j := range k {
			m.Variants = append(m.Variants, vr(fmt.Sprintf("v%d", j), float64(5+j), j%2, 6, 1+j%3))
		}
		models[i] = m
		in[i] = targets(m, 0, 7, 2, 0)
	}
	b.ReportAllocs()
	for b.Loop() {
		for i, m := range models {
			Enforce(m, in[i], i%2 == 0)
			FromZero(m, 1)
		}
	}
}
