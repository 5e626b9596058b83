package optimizer

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hermod/hermod/services/autoscaler/internal/scaling"
)

// gv builds a variant on accelerator acc with gpus GPUs per replica.
func gv(name string, cost float64, maxR, current int, acc string, gpus int) *scaling.Variant {
	v := vr(name, cost, 0, maxR, current)
	v.Accelerator, v.GPUsPerReplica = acc, gpus
	return v
}

// demand is a model with one variant "v" (1 unit per replica) asking for
// required units at priority prio.
func demand(id string, prio, required float64, v *scaling.Variant) ModelInput {
	return ModelInput{
		Model: mdl(id, v),
		Analyses: []scaling.Analysis{{
			ModelID: id, Analyzer: "test", Required: required, Priority: prio,
			VariantCapacity: map[string]float64{v.Name: 1},
		}},
	}
}

func TestGreedyByScore(t *testing.T) {
	tests := []struct {
		name    string
		models  []ModelInput
		budgets map[string]int
		// want is model ID -> variant -> desired.
		want    map[string]map[string]int
		reasons map[string]string // "model/variant" -> substring
	}{
		{
			// Weights 2x6 = 12 and 1x6 = 6 of 9 GPUs: shares 6 and 3.
			name: "budget split by priority x required",
			models: []ModelInput{
				demand("m1", 2, 6, gv("v", 1, 100, 0, "a100", 1)),
				demand("m2", 1, 6, gv("v", 1, 100, 0, "a100", 1)),
			},
			budgets: map[string]int{"a100": 9},
			want:    map[string]map[string]int{"m1": {"v": 6}, "m2": {"v": 3}},
			reasons: map[string]string{"m2/v": "3 of required 6 not met: not within the GPU budget"},
		},
		{
			// 12 GPUs, weights m1 4x1 = 4, m2 1x8 = 8, m3 1x12 = 12 (W 24).
			// Round 1 shares 2, 4, 6: m1 needs 1 and returns 1, m2 +4, m3
			// +6. Round 2: 1 GPU, weights 4 and 6: shares 0.4 and 0.6, no
			// whole replica, so the higher weight (m3) gets it.
			name: "excess returned to the pool",
			models: []ModelInput{
				demand("m3", 1, 12, gv("v", 1, 100, 0, "a100", 1)),
				demand("m1", 4, 1, gv("v", 1, 100, 0, "a100", 1)),
				demand("m2", 1, 8, gv("v", 1, 100, 0, "a100", 1)),
			},
			budgets: map[string]int{"a100": 12},
			want:    map[string]map[string]int{"m1": {"v": 1}, "m2": {"v": 4}, "m3": {"v": 7}},
		},
		{
			// 4 GPUs a replica, 10 GPUs: 2 replicas, 2 GPUs stay free.
			name:    "whole replicas",
			models:  []ModelInput{demand("m", 1, 3, gv("v", 1, 100, 0, "a100", 4))},
			budgets: map[string]int{"a100": 10},
			want:    map[string]map[string]int{"m": {"v": 2}},
			reasons: map[string]string{"m/v": "GPU budget for accelerator \"a100\" used up (2 of 10 GPUs free, a replica needs 4)"},
		},
		{
			// 2 running replicas x 2 GPUs use 4 of 8: room for 2 more.
			name:    "current usage counts against the budget",
			models:  []ModelInput{demand("m", 1, 5, gv("v", 1, 100, 2, "a100", 2))},
			budgets: map[string]int{"a100": 8},
			want:    map[string]map[string]int{"m": {"v": 4}},
		},
		{
			// m1 uses the whole budget: no scale-up for m2; m3's
			// scale-down is not limited.
			name: "budget exhausted",
			models: []ModelInput{
				demand("m1", 1, 0, gv("v", 1, 100, 4, "a100", 1)),
				demand("m2", 1, 2, gv("v", 1, 100, 0, "a100", 1)),
				{
					Model: mdl("m3", gv("v", 1, 100, 3, "a100", 1)),
					Analyses: []scaling.Analysis{{ModelID: "m3", Spare: 1,
						VariantCapacity: map[string]float64{"v": 1}}},
				},
			},
			budgets: map[string]int{"a100": 6},
			want:    map[string]map[string]int{"m1": {"v": 4}, "m2": {"v": 0}, "m3": {"v": 2}},
			reasons: map[string]string{"m2/v": "(0 of 6 GPUs free, a replica needs 1)"},
		},
		{
			// cheap sits on an accelerator without a budget: the required
			// capacity spills to dear.
			name: "unknown accelerator",
			models: []ModelInput{
				{
					Model: mdl("m", gv("cheap", 1, 100, 1, "h100", 1), gv("dear", 5, 100, 1, "a100", 1)),
					Analyses: []scaling.Analysis{{ModelID: "m", Required: 2,
						VariantCapacity: map[string]float64{"cheap": 1, "dear": 1}}},
				},
				demand("solo", 1, 2, gv("v", 1, 100, 1, "tpu", 1)),
			},
			budgets: map[string]int{"a100": 8},
			want:    map[string]map[string]int{"m": {"cheap": 1, "dear": 3}, "solo": {"v": 1}},
			reasons: map[string]string{
				"m/cheap": "no GPU budget for accelerator \"h100\"",
				"solo/v":  "2 of required 2 not met",
			},
		},
		{
			// a has 1 replica of headroom; 3 - 1 spill to b on another
			// accelerator with its own budget.
			name: "maxReplicas spill across accelerators",
			models: []ModelInput{{
				Model: mdl("m", gv("a", 1, 2, 1, "a100", 1), gv("b", 2, 10, 0, "l4", 1)),
				Analyses: []scaling.Analysis{{ModelID: "m", Required: 3,
					VariantCapacity: map[string]float64{"a": 1, "b": 1}}},
			}},
			budgets: map[string]int{"a100": 8, "l4": 8},
			want:    map[string]map[string]int{"m": {"a": 2, "b": 2}},
		},
		{
			// Priority 0 counts as 1: an even split of 4.
			name: "priority defaults to one",
			models: []ModelInput{
				demand("m1", 0, 4, gv("v", 1, 100, 0, "a100", 1)),
				demand("m2", 1, 4, gv("v", 1, 100, 0, "a100", 1)),
			},
			budgets: map[string]int{"a100": 4},
			want:    map[string]map[string]int{"m1": {"v": 2}, "m2": {"v": 2}},
		},
		{
			name: "hold",
			models: []ModelInput{{
				Model: mdl("m", gv("v", 1, 100, 1, "a100", 1)),
				Analyses: []scaling.Analysis{{ModelID: "m", Required: 2, Hold: true,
					VariantCapacity: map[string]float64{"v": 1}}},
			}},
			budgets: map[string]int{"a100": 8},
			want:    map[string]map[string]int{"m": {"v": 1}},
			reasons: map[string]string{"m/v": "hold"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := GreedyByScore(tc.models, tc.budgets)
			if len(got) != len(tc.models) {
				t.Fatalf("got %d results for %d models", len(got), len(tc.models))
			}
			for i, mi := range tc.models {
				id := mi.Model.ID
				if d := desiredOf(got[i]); fmt.Sprint(d) != fmt.Sprint(tc.want[id]) {
					t.Errorf("%s: desired = %v, want %v\n%v", id, d, tc.want[id], got[i])
				}
				for key, sub := range tc.reasons {
					model, variant, _ := strings.Cut(key, "/")
					if model != id {
						continue
					}
					if r := reasonOf(got[i], variant); !strings.Contains(r, sub) {
						t.Errorf("reason of %s = %q, want it to contain %q", key, r, sub)
					}
				}
			}
		})
	}
}

// With budgets that never bind, GreedyByScore plans what CostAware plans.
func TestGreedyByScoreUnlimitedMatchesCostAware(t *testing.T) {
	models, analyses := benchModels(40, 4)
	in := make([]ModelInput, len(models))
	for i := range models {
		in[i] = ModelInput{Model: models[i], Analyses: analyses[i]}
	}
	got := GreedyByScore(in, map[string]int{"acc-0": 1 << 30, "acc-1": 1 << 30})
	for i, m := range models {
		want := desiredOf(CostAware(m, analyses[i]))
		if d := desiredOf(got[i]); fmt.Sprint(d) != fmt.Sprint(want) {
			t.Errorf("%s: greedy %v, cost-aware %v", m.ID, d, want)
		}
	}
}

// The result does not depend on the input order (models are taken by ID).
func TestGreedyByScoreDeterministic(t *testing.T) {
	models, analyses := benchModels(30, 4)
	in := make([]ModelInput, len(models))
	for i := range models {
		in[i] = ModelInput{Model: models[i], Analyses: analyses[i]}
	}
	budgets := map[string]int{"acc-0": 70, "acc-1": 90}
	first := GreedyByScore(in, budgets)
	byID := map[string][]scaling.Target{}
	for i, mi := range in {
		byID[mi.Model.ID] = first[i]
	}
	rev := slices.Clone(in)
	slices.Reverse(rev)
	for range 3 {
		again := GreedyByScore(rev, budgets)
		for i, mi := range rev {
			if fmt.Sprint(again[i]) != fmt.Sprint(byID[mi.Model.ID]) {
				t.Fatalf("%s: %v, earlier %v", mi.Model.ID, again[i], byID[mi.Model.ID])
			}
		}
	}
	// The budget holds: the GPUs of the planned replicas do not exceed it
	// where the plan grew.
	used := map[string]int{}
	for i, mi := range in {
		for j, v := range mi.Model.Variants {
			used[v.Accelerator] += max(first[i][j].Desired, v.Current) * max(1, v.GPUsPerReplica)
		}
	}
	var current = map[string]int{}
	for _, mi := range in {
		for _, v := range mi.Model.Variants {
			current[v.Accelerator] += v.Current * max(1, v.GPUsPerReplica)
		}
	}
	for acc, b := range budgets {
		if used[acc] > max(b, current[acc]) {
			t.Errorf("accelerator %s: %d GPUs planned, budget %d (current %d)", acc, used[acc], b, current[acc])
		}
	}
}

func TestGreedyByScoreNilModel(t *testing.T) {
	got := GreedyByScore([]ModelInput{{}, demand("m", 1, 1, gv("v", 1, 10, 0, "a", 1))}, map[string]int{"a": 1})
	if got[0] != nil || desiredOf(got[1])["v"] != 1 {
		t.Fatalf("got %v", got)
	}
}

func BenchmarkGreedyByScore(b *testing.B) {
	models, analyses := benchModels(100, 4)
	in := make([]ModelInput, len(models))
	for i := range models {
		in[i] = ModelInput{Model: models[i], Analyses: analyses[i]}
	}
	budgets := map[string]int{"acc-0": 400, "acc-1": 600}
	b.ReportAllocs()
	for b.Loop() {
		GreedyByScore(in, budgets)
	}
}
