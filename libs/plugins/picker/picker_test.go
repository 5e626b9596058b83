package picker_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/plugins/picker"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

// trials is the number of picks statistical tests draw; tolerance is the
// allowed absolute deviation of an observed frequency from the expected
// one (more than ten standard deviations at this sample size).
const (
	trials    = 30000
	tolerance = 0.03
)

var allTypes = []string{picker.MaxScoreType, picker.RandomType, picker.WeightedRandomType}

func newPicker(t *testing.T, typ, params string) scheduling.Picker {
	t.Helper()
	return schedulingtest.New[scheduling.Picker](t, schedulingtest.NewHandle(), typ, "", params)
}

func kParams(k int) string { return fmt.Sprintf(`{"maxNumOfEndpoints": %d}`, k) }

// pick runs p once over len(totals) endpoints.
func pick(p scheduling.Picker, cs *scheduling.CycleState, totals []float64) []int {
	eps := schedulingtest.Endpoints(len(totals))
	return p.Pick(context.Background(), cs, nil, eps, totals, nil)
}

// firstFrequencies picks trials times and returns how often each index
// came first, as a fraction of trials.
func firstFrequencies(t *testing.T, p scheduling.Picker, totals []float64, seed uint64) []float64 {
	t.Helper()
	cs := schedulingtest.CycleState(seed)
	eps := schedulingtest.Endpoints(len(totals))
	counts := make([]float64, len(totals))
	var dst []int
	for range trials {
		dst = p.Pick(context.Background(), cs, nil, eps, totals, dst[:0])
		if len(dst) == 0 {
			t.Fatalf("Pick returned nothing for totals %v", totals)
		}
		counts[dst[0]]++
	}
	for i := range counts {
		counts[i] /= trials
	}
	return counts
}

func checkFrequencies(t *testing.T, what string, got, want []float64) {
	t.Helper()
	for i := range want {
		if math.Abs(got[i]-want[i]) > tolerance {
			t.Errorf("%s: index %d chosen with frequency %.4f, want %.4f ± %.2f (all: %.4f)", what, i, got[i], want[i], tolerance, got)
		}
	}
}

func checkDistinct(t *testing.T, got []int, n int) {
	t.Helper()
	seen := map[int]bool{}
	for _, i := range got {
		if i < 0 || i >= n {
			t.Fatalf("index %d out of range [0, %d) in %v", i, n, got)
		}
		if seen[i] {
			t.Fatalf("index %d returned twice in %v", i, got)
		}
		seen[i] = true
	}
}

func TestPickersRegistered(t *testing.T) {
	for _, typ := range allTypes {
		reg, ok := scheduling.DefaultRegistry.Lookup(typ)
		if !ok || reg.New == nil {
			t.Errorf("%s is not registered", typ)
			continue
		}
		p := newPicker(t, typ, "")
		if got := p.TypedName(); got.Type != typ || got.Name != typ {
			t.Errorf("TypedName() = %+v, want type and name %s", got, typ)
		}
	}
}

func TestPickerCustomName(t *testing.T) {
	p := schedulingtest.New[scheduling.Picker](t, schedulingtest.NewHandle(), picker.MaxScoreType, "my-picker", "")
	if got := p.TypedName(); got.Type != picker.MaxScoreType || got.Name != "my-picker" {
		t.Errorf("TypedName() = %+v, want {max-score-picker my-picker}", got)
	}
}

func TestPickerDefaultReturnsOne(t *testing.T) {
	for _, typ := range allTypes {
		t.Run(typ, func(t *testing.T) {
			p := newPicker(t, typ, "")
			got := pick(p, schedulingtest.CycleState(1), []float64{0.3, 0.2, 0.9, 0.4})
			if len(got) != 1 {
				t.Fatalf("default maxNumOfEndpoints: got %d indexes %v, want 1", len(got), got)
			}
			checkDistinct(t, got, 4)
			rep, ok := p.(scheduling.ParameterReporter)
			if !ok {
				t.Fatalf("%T does not report its parameters", p)
			}
			if params, ok := rep.Parameters().(picker.Params); !ok || params.MaxNumOfEndpoints != 1 {
				t.Errorf("Parameters() = %#v, want maxNumOfEndpoints 1", rep.Parameters())
			}
		})
	}
}

func TestPickerInvalidMaxNumOfEndpoints(t *testing.T) {
	for _, typ := range allTypes {
		for _, params := range []string{`{"maxNumOfEndpoints": 0}`, `{"maxNumOfEndpoints": -1}`, `{"maxNumOfEndpoints": "two"}`, `{"maxNumOfEndpoints": 1.5}`} {
			t.Run(typ+" "+params, func(t *testing.T) {
				_, err := schedulingtest.NewErr(schedulingtest.NewHandle(), typ, "", params)
				if err == nil {
					t.Fatalf("%s with %s: no error", typ, params)
				}
				if !strings.Contains(err.Error(), "parameters.maxNumOfEndpoints") {
					t.Errorf("error %q does not name parameters.maxNumOfEndpoints", err)
				}
			})
		}
	}
}

func TestPickerAppendsToDst(t *testing.T) {
	for _, typ := range allTypes {
		for _, k := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s K=%d", typ, k), func(t *testing.T) {
				p := newPicker(t, typ, kParams(k))
				eps := schedulingtest.Endpoints(3)
				dst := []int{42}
				got := p.Pick(context.Background(), schedulingtest.CycleState(3), nil, eps, []float64{0.1, 0.5, 0.9}, dst)
				if len(got) != 1+k || got[0] != 42 {
					t.Fatalf("Pick(dst=[42]) = %v, want 42 followed by %d indexes", got, k)
				}
				checkDistinct(t, got[1:], 3)
			})
		}
	}
}

func TestPickerKExceedsEndpoints(t *testing.T) {
	for _, typ := range allTypes {
		t.Run(typ, func(t *testing.T) {
			p := newPicker(t, typ, kParams(10))
			got := pick(p, schedulingtest.CycleState(5), []float64{0.2, 0.7, 0.4})
			if len(got) != 3 {
				t.Fatalf("K=10 over 3 endpoints: got %v, want all 3", got)
			}
			checkDistinct(t, got, 3)
		})
	}
}

func TestMaxScorePicksHighest(t *testing.T) {
	p := newPicker(t, picker.MaxScoreType, "")
	cases := [][]float64{
		{0.1, 0.9, 0.5},
		{3, 0, 1},
		{0, 0, 0.001},
		{-1, -0.5, -2},
	}
	for _, totals := range cases {
		want := 0
		for i, v := range totals {
			if v > totals[want] {
				want = i
			}
		}
		for seed := range uint64(20) {
			got := pick(p, schedulingtest.CycleState(seed), totals)
			if !slices.Equal(got, []int{want}) {
				t.Fatalf("totals %v (seed %d): got %v, want [%d]", totals, seed, got, want)
			}
		}
	}
}

func TestMaxScoreSingleEndpoint(t *testing.T) {
	p := newPicker(t, picker.MaxScoreType, kParams(3))
	got := pick(p, schedulingtest.CycleState(1), []float64{0})
	if !slices.Equal(got, []int{0}) {
		t.Fatalf("one endpoint: got %v, want [0]", got)
	}
}

func TestMaxScoreTopKDescending(t *testing.T) {
	totals := []float64{0.3, 0.9, 0.1, 0.7, 0.5, 0.05}
	want := map[int][]int{
		1: {1},
		2: {1, 3},
		3: {1, 3, 4},
		6: {1, 3, 4, 0, 2, 5},
	}
	for k, w := range want {
		p := newPicker(t, picker.MaxScoreType, kParams(k))
		for seed := range uint64(10) {
			got := pick(p, schedulingtest.CycleState(seed), totals)
			if !slices.Equal(got, w) {
				t.Errorf("K=%d seed %d: got %v, want %v", k, seed, got, w)
			}
		}
	}
}

func TestMaxScoreTopKWithTiesStaysDescending(t *testing.T) {
	totals := []float64{0.5, 0.9, 0.5, 0.9, 0.1}
	p := newPicker(t, picker.MaxScoreType, kParams(4))
	cs := schedulingtest.CycleState(11)
	for range 200 {
		got := pick(p, cs, totals)
		if len(got) != 4 {
			t.Fatalf("got %v, want 4 indexes", got)
		}
		checkDistinct(t, got, len(totals))
		for j := 1; j < len(got); j++ {
			if totals[got[j]] > totals[got[j-1]] {
				t.Fatalf("got %v: totals %v not in descending order", got, totals)
			}
		}
		if slices.Contains(got, 4) {
			t.Fatalf("got %v: the lowest total was picked although 4 better ones exist", got)
		}
	}
}

func TestMaxScoreTiesUniformK1(t *testing.T) {
	p := newPicker(t, picker.MaxScoreType, "")
	totals := []float64{1, 2, 2, 0.5, 2}
	got := firstFrequencies(t, p, totals, 7)
	checkFrequencies(t, "3 tied maxima", got, []float64{0, 1.0 / 3, 1.0 / 3, 0, 1.0 / 3})
}

func TestMaxScoreTiesUniformAllEqual(t *testing.T) {
	p := newPicker(t, picker.MaxScoreType, "")
	got := firstFrequencies(t, p, []float64{0, 0, 0, 0}, 8)
	checkFrequencies(t, "all zero", got, []float64{0.25, 0.25, 0.25, 0.25})
}

func TestMaxScoreTiesUniformK2(t *testing.T) {
	p := newPicker(t, picker.MaxScoreType, kParams(2))
	// four tied maxima and one lower endpoint (index 2)
	totals := []float64{1.5, 1.5, 0.2, 1.5, 1.5}
	tied := []int{0, 1, 3, 4}
	cs := schedulingtest.CycleState(9)
	eps := schedulingtest.Endpoints(len(totals))
	first := make([]float64, len(totals))
	member := make([]float64, len(totals))
	pairs := map[[2]int]float64{}
	var dst []int
	for range trials {
		dst = p.Pick(context.Background(), cs, nil, eps, totals, dst[:0])
		if len(dst) != 2 {
			t.Fatalf("K=2: got %v", dst)
		}
		checkDistinct(t, dst, len(totals))
		if slices.Contains(dst, 2) {
			t.Fatalf("K=2 among 4 tied maxima picked the lower endpoint: %v", dst)
		}
		first[dst[0]]++
		member[dst[0]]++
		member[dst[1]]++
		pairs[[2]int{min(dst[0], dst[1]), max(dst[0], dst[1])}]++
	}
	for _, i := range tied {
		if f := first[i] / trials; math.Abs(f-0.25) > tolerance {
			t.Errorf("index %d first with frequency %.4f, want 0.25 ± %.2f", i, f, tolerance)
		}
		if f := member[i] / trials; math.Abs(f-0.5) > tolerance {
			t.Errorf("index %d picked with frequency %.4f, want 0.5 ± %.2f", i, f, tolerance)
		}
	}
	if len(pairs) != 6 {
		t.Errorf("saw %d distinct pairs, want all 6: %v", len(pairs), pairs)
	}
	for pair, n := range pairs {
		if f := n / trials; math.Abs(f-1.0/6) > tolerance {
			t.Errorf("pair %v picked with frequency %.4f, want 1/6 ± %.2f", pair, f, tolerance)
		}
	}
}

func TestMaxScoreTieForSecondPlaceUniform(t *testing.T) {
	p := newPicker(t, picker.MaxScoreType, kParams(2))
	totals := []float64{0.4, 0.9, 0.4, 0.4}
	cs := schedulingtest.CycleState(10)
	eps := schedulingtest.Endpoints(len(totals))
	second := make([]float64, len(totals))
	var dst []int
	for range trials {
		dst = p.Pick(context.Background(), cs, nil, eps, totals, dst[:0])
		if len(dst) != 2 || dst[0] != 1 {
			t.Fatalf("got %v, want the maximum (1) first", dst)
		}
		second[dst[1]]++
	}
	for i := range second {
		second[i] /= trials
	}
	checkFrequencies(t, "tie for second place", second, []float64{1.0 / 3, 0, 1.0 / 3, 1.0 / 3})
}

func TestMaxScoreDeterministicForSeed(t *testing.T) {
	p := newPicker(t, picker.MaxScoreType, kParams(2))
	totals := []float64{1, 1, 1, 1, 1, 1}
	a := pick(p, schedulingtest.CycleState(42), totals)
	b := pick(p, schedulingtest.CycleState(42), totals)
	if !slices.Equal(a, b) {
		t.Errorf("same seed gave %v and %v", a, b)
	}
}

func TestRandomUniformIgnoresScores(t *testing.T) {
	p := newPicker(t, picker.RandomType, "")
	got := firstFrequencies(t, p, []float64{10, 0, 0.5, -3}, 21)
	checkFrequencies(t, "random-picker K=1", got, []float64{0.25, 0.25, 0.25, 0.25})
}

func TestRandomDistinctForK(t *testing.T) {
	p := newPicker(t, picker.RandomType, kParams(2))
	totals := []float64{5, 0, 0, 1}
	cs := schedulingtest.CycleState(22)
	eps := schedulingtest.Endpoints(len(totals))
	first := make([]float64, len(totals))
	member := make([]float64, len(totals))
	var dst []int
	for range trials {
		dst = p.Pick(context.Background(), cs, nil, eps, totals, dst[:0])
		if len(dst) != 2 {
			t.Fatalf("K=2: got %v", dst)
		}
		checkDistinct(t, dst, len(totals))
		first[dst[0]]++
		member[dst[0]]++
		member[dst[1]]++
	}
	for i := range totals {
		if f := first[i] / trials; math.Abs(f-0.25) > tolerance {
			t.Errorf("index %d first with frequency %.4f, want 0.25 ± %.2f", i, f, tolerance)
		}
		if f := member[i] / trials; math.Abs(f-0.5) > tolerance {
			t.Errorf("index %d picked with frequency %.4f, want 0.5 ± %.2f", i, f, tolerance)
		}
	}
}

func TestRandomKEqualsNIsPermutation(t *testing.T) {
	p := newPicker(t, picker.RandomType, kParams(5))
	cs := schedulingtest.CycleState(23)
	orders := map[string]bool{}
	for range 200 {
		got := pick(p, cs, make([]float64, 5))
		if len(got) != 5 {
			t.Fatalf("K=5 of 5: got %v", got)
		}
		checkDistinct(t, got, 5)
		orders[fmt.Sprint(got)] = true
	}
	if len(orders) < 2 {
		t.Errorf("200 picks of K=5 always returned the same order %v; want random order", orders)
	}
}

func TestWeightedRandomProportionalK1(t *testing.T) {
	p := newPicker(t, picker.WeightedRandomType, "")
	got := firstFrequencies(t, p, []float64{1, 2, 3}, 31)
	checkFrequencies(t, "scores 1,2,3", got, []float64{1.0 / 6, 2.0 / 6, 3.0 / 6})
}

func TestWeightedRandomProportionalSmallScores(t *testing.T) {
	// proportionality depends on ratios, not on magnitude
	p := newPicker(t, picker.WeightedRandomType, "")
	got := firstFrequencies(t, p, []float64{0.001, 0.003}, 32)
	checkFrequencies(t, "scores 0.001,0.003", got, []float64{0.25, 0.75})
}

func TestWeightedRandomNonPositiveNeverFirst(t *testing.T) {
	p := newPicker(t, picker.WeightedRandomType, "")
	totals := []float64{0, 1, -1, 2, 0}
	got := firstFrequencies(t, p, totals, 33)
	for _, i := range []int{0, 2, 4} {
		if got[i] != 0 {
			t.Errorf("index %d with score %v chosen first with frequency %.4f; want never while a positive score exists", i, totals[i], got[i])
		}
	}
	checkFrequencies(t, "scores 0,1,-1,2,0", got, []float64{0, 1.0 / 3, 0, 2.0 / 3, 0})
}

func TestWeightedRandomFillsWithNonPositive(t *testing.T) {
	p := newPicker(t, picker.WeightedRandomType, kParams(4))
	totals := []float64{0, 1, -1, 2}
	cs := schedulingtest.CycleState(34)
	for range 500 {
		got := pick(p, cs, totals)
		if len(got) != 4 {
			t.Fatalf("K=4 of 4 with 2 positive scores: got %v, want 4 indexes", got)
		}
		checkDistinct(t, got, len(totals))
		head := []int{got[0], got[1]}
		slices.Sort(head)
		if !slices.Equal(head, []int{1, 3}) {
			t.Fatalf("got %v: the positive scores (1, 3) must come before the others", got)
		}
	}
}

func TestWeightedRandomKLessThanPositives(t *testing.T) {
	p := newPicker(t, picker.WeightedRandomType, kParams(2))
	totals := []float64{1, 0, 1, 0, 1}
	cs := schedulingtest.CycleState(35)
	for range 500 {
		got := pick(p, cs, totals)
		if len(got) != 2 {
			t.Fatalf("K=2: got %v", got)
		}
		checkDistinct(t, got, len(totals))
		for _, i := range got {
			if totals[i] <= 0 {
				t.Fatalf("got %v: picked a zero score although 3 positive ones exist", got)
			}
		}
	}
}

func TestWeightedRandomAllZeroUniform(t *testing.T) {
	p := newPicker(t, picker.WeightedRandomType, "")
	got := firstFrequencies(t, p, []float64{0, 0, 0}, 36)
	checkFrequencies(t, "all zero", got, []float64{1.0 / 3, 1.0 / 3, 1.0 / 3})
}

func TestWeightedRandomAllZeroDistinctK(t *testing.T) {
	p := newPicker(t, picker.WeightedRandomType, kParams(3))
	cs := schedulingtest.CycleState(37)
	for range 200 {
		got := pick(p, cs, []float64{0, 0, 0, 0})
		if len(got) != 3 {
			t.Fatalf("K=3 all zero: got %v", got)
		}
		checkDistinct(t, got, 4)
	}
}

func TestWeightedRandomSecondPlaceWithoutReplacement(t *testing.T) {
	// A-Res without replacement: with scores 1 and 3, K=2 always returns
	// both; the heavier one is first with probability 3/4.
	p := newPicker(t, picker.WeightedRandomType, kParams(2))
	totals := []float64{1, 3}
	cs := schedulingtest.CycleState(38)
	eps := schedulingtest.Endpoints(2)
	first := 0.0
	var dst []int
	for range trials {
		dst = p.Pick(context.Background(), cs, nil, eps, totals, dst[:0])
		if len(dst) != 2 {
			t.Fatalf("K=2 of 2: got %v", dst)
		}
		checkDistinct(t, dst, 2)
		if dst[0] == 1 {
			first++
		}
	}
	if f := first / trials; math.Abs(f-0.75) > tolerance {
		t.Errorf("score 3 first with frequency %.4f, want 0.75 ± %.2f", f, tolerance)
	}
}
