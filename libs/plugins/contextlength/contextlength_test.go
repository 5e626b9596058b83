package contextlength_test

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hermod/hermod/libs/plugins/contextlength"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

const tol = 1e-9

func approx(a, b, eps float64) bool { return math.Abs(a-b) <= eps }

// inRange is the spec §5 formula for min <= L <= max.
func inRange(mn, mx, l float64) float64 {
	return 0.7*1/(1+(mx-mn)/10000) + 0.3*(mx-l)/(mx-mn)
}

// overflow is the spec §5 formula for L > max.
func overflow(mx, l float64) float64 { return 0.25 + 0.25*mx/l }

// ep builds an endpoint with the default context-length label set to rng,
// or no label when rng is "-".
func ep(name, rng string) *scheduling.Endpoint {
	if rng == "-" {
		return schedulingtest.Endpoint(name, map[string]string{"other": "x"}, &scheduling.Metrics{})
	}
	return schedulingtest.Endpoint(name, map[string]string{contextlength.DefaultLabel: rng}, &scheduling.Metrics{})
}

// prompt is a completions request of n characters.
func prompt(n int) *scheduling.Request {
	return schedulingtest.Completion("r", "m", strings.Repeat("a", n))
}

func newPlugin(t *testing.T, params string) scheduling.Scorer {
	t.Helper()
	return schedulingtest.New[scheduling.Scorer](t, schedulingtest.NewHandle(), contextlength.Type, "", params)
}

func score(t *testing.T, s scheduling.Scorer, r *scheduling.Request, eps ...*scheduling.Endpoint) []float64 {
	t.Helper()
	got := schedulingtest.Score(s, schedulingtest.CycleState(1), r, eps)
	for i, v := range got {
		if v < 0 || v > 1 || math.IsNaN(v) {
			t.Errorf("score[%d] = %v is outside [0, 1]", i, v)
		}
	}
	return got
}

// Reference/003 scenario 1: a 500-token request (2000 characters x 0.25).
func TestReferenceScenario1ShortContext(t *testing.T) {
	s := newPlugin(t, "")
	got := score(t, s, prompt(2000), ep("pod-a", "0-2048"), ep("pod-b", "2048-8192"), ep("pod-c", "-"))

	exactA := 0.7*(1/(1+2048.0/10000)) + 0.3*((2048.0-500)/2048)
	if !approx(got[0], exactA, 1e-3) {
		t.Errorf("Pod A (0-2048) = %v, want %v (within 1e-3)", got[0], exactA)
	}
	if !approx(got[0], 0.8078, 1e-3) {
		t.Errorf("Pod A (0-2048) = %v, want ~0.8078", got[0])
	}
	if r := math.Round(got[0]*100) / 100; r != 0.81 {
		t.Errorf("Pod A (0-2048) = %v rounds to %v, want 0.81", got[0], r)
	}
	if !approx(got[1], 0.0, tol) {
		t.Errorf("Pod B (2048-8192) = %v, want 0.0 (500 < 2048)", got[1])
	}
	if !approx(got[2], 0.2, tol) {
		t.Errorf("Pod C (no label) = %v, want 0.2", got[2])
	}
	if !(got[0] > got[2] && got[2] > got[1]) {
		t.Errorf("scores %v: want Pod A selected (A > C > B)", got)
	}
}

// Reference/003 scenario 2: a 50,000-token request that overflows every
// range.
func TestReferenceScenario2Overflow(t *testing.T) {
	s := newPlugin(t, "")
	got := score(t, s, prompt(200000), ep("pod-a", "0-8192"), ep("pod-b", "0-32768"))
	tests := []struct {
		name  string
		got   float64
		exact float64
		want  float64
		round float64
	}{
		{"Pod A 0-8192", got[0], 0.25 + 0.25*(8192.0/50000), 0.29096, 0.29},
		{"Pod B 0-32768", got[1], 0.25 + 0.25*(32768.0/50000), 0.41384, 0.41},
	}
	for _, tc := range tests {
		if !approx(tc.got, tc.exact, 1e-9) || !approx(tc.got, tc.want, 1e-5) {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
		if r := math.Round(tc.got*100) / 100; r != tc.round {
			t.Errorf("%s = %v rounds to %v, want %v", tc.name, tc.got, r, tc.round)
		}
	}
	if got[1] <= got[0] {
		t.Errorf("scores %v: want Pod B (larger max) selected", got)
	}
}

func TestScoreTable(t *testing.T) {
	tests := []struct {
		name   string
		label  string // "-" = no label
		tokens int    // L, via TokenIDs
		want   float64
	}{
		// No label and unparsable labels.
		{"no label", "-", 500, 0.2},
		{"no label, huge request", "-", 1 << 20, 0.2},
		{"unparsable word", "abc", 500, 0.0},
		{"unparsable empty", "", 500, 0.0},
		{"unparsable single number", "2048", 500, 0.0},
		{"unparsable max < min", "2048-0", 500, 0.0},
		{"unparsable negative", "-5-10", 5, 0.0},
		{"unparsable float", "0-2048.5", 500, 0.0},
		{"unparsable one bad part of several", "0-2048,x", 500, 0.0},
		{"unparsable trailing comma", "0-2048,", 500, 0.0},
		// In range: 0.7 x 1/(1 + width/10000) + 0.3 x (max - L)/width.
		{"in range 0-2048 L=500", "0-2048", 500, inRange(0, 2048, 500)},
		{"in range at min", "1000-2000", 1000, 0.7/1.1 + 0.3},
		{"in range at max", "1000-2000", 2000, 0.7 / 1.1},
		{"in range middle", "0-10000", 5000, 0.35 + 0.15},
		{"in range 2048-32768 L=4096", "2048-32768", 4096, inRange(2048, 32768, 4096)},
		{"in range narrowest at min", "1-2", 1, 0.7/(1+1.0/10000) + 0.3},
		// Above max: 0.25 + 0.25 x max/L.
		{"overflow just above", "0-1000", 1001, 0.25 + 0.25*1000.0/1001},
		{"overflow 2x", "0-1000", 2000, 0.375},
		{"overflow 4x", "0-1000", 4000, 0.3125},
		{"overflow max 0", "0-0", 10, 0.25},
		// Below min: 0.
		{"below min", "2048-8192", 500, 0.0},
		{"just below min", "2048-8192", 2047, 0.0},
		// Several ranges: the best.
		{"several, first matches", "0-2048,8192-16384", 500, inRange(0, 2048, 500)},
		{"several, second matches beats overflow of first", "0-2048,8192-16384", 10000, inRange(8192, 16384, 10000)},
		{"several, gap: overflow of first beats below second", "0-2048,8192-16384", 5000, overflow(2048, 5000)},
		{"several, above all: larger max", "0-2048,8192-16384", 20000, overflow(16384, 20000)},
		{"several, overlapping: narrower wins", "0-32768,0-2048", 500, inRange(0, 2048, 500)},
		{"several, order independent", "8192-16384,0-2048", 500, inRange(0, 2048, 500)},
	}
	s := newPlugin(t, "")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := prompt(3) // ignored: TokenIDs set
			r.TokenIDs = make([]uint32, tc.tokens)
			got := score(t, s, r, ep("pod", tc.label))
			if !approx(got[0], tc.want, tol) {
				t.Errorf("label %q, L=%d: score %v, want %v", tc.label, tc.tokens, got[0], tc.want)
			}
		})
	}
}

func TestSpotValues(t *testing.T) {
	// Hand-computed numbers for the formulas above.
	tests := []struct {
		label  string
		tokens int
		want   float64
	}{
		{"0-2048,8192-16384", 10000, 0.6185744}, // 0.7/1.8192 + 0.3*6384/8192
		{"0-2048,8192-16384", 5000, 0.3524},     // 0.25 + 0.25*2048/5000
		{"200-400", 300, 0.8362745},             // 0.7/1.02 + 0.3*0.5
	}
	s := newPlugin(t, "")
	for _, tc := range tests {
		r := prompt(0)
		r.TokenIDs = make([]uint32, tc.tokens)
		if got := score(t, s, r, ep("pod", tc.label)); !approx(got[0], tc.want, 1e-6) {
			t.Errorf("label %q, L=%d: score %v, want %v", tc.label, tc.tokens, got[0], tc.want)
		}
	}
}

func TestTokenEstimate(t *testing.T) {
	tests := []struct {
		name   string
		params string
		req    *scheduling.Request
		wantL  float64
	}{
		{"completions default 0.25", "", prompt(2000), 500},
		{"completions multiplier 1", `{"charToTokenMultiplier": 1}`, prompt(400), 400},
		{"completions multiplier 0.5", `{"charToTokenMultiplier": 0.5}`, prompt(400), 200},
		{"completions multibyte counts characters", `{"charToTokenMultiplier": 1}`,
			schedulingtest.Completion("r", "m", strings.Repeat("é", 100)), 100},
		{"chat sums message contents", `{"charToTokenMultiplier": 0.5}`,
			schedulingtest.Chat("r", "m", strings.Repeat("a", 300), strings.Repeat("b", 100)), 200},
		{"chat default multiplier", "",
			schedulingtest.Chat("r", "m", strings.Repeat("a", 1000), strings.Repeat("b", 600), strings.Repeat("c", 400)), 500},
		{"token ids win over characters", `{"charToTokenMultiplier": 0.25}`,
			func() *scheduling.Request {
				r := prompt(4)
				r.TokenIDs = make([]uint32, 300)
				return r
			}(), 300},
		{"token ids not scaled by multiplier", `{"charToTokenMultiplier": 2}`,
			func() *scheduling.Request {
				r := schedulingtest.Chat("r", "m", strings.Repeat("a", 5000))
				r.TokenIDs = make([]uint32, 300)
				return r
			}(), 300},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newPlugin(t, tc.params)
			// The in-range score of 0-20000 and the overflow score of 0-50
			// are both strictly decreasing in L, so they pin L down.
			const mn, mx = 0.0, 20000.0
			got := score(t, s, tc.req, ep("pod", "0-20000"), ep("low", "0-50"))
			if want := inRange(mn, mx, tc.wantL); !approx(got[0], want, tol) {
				t.Errorf("in-range score %v, want %v (L=%v)", got[0], want, tc.wantL)
			}
			if want := overflow(50, tc.wantL); !approx(got[1], want, tol) {
				t.Errorf("overflow score %v, want %v (L=%v)", got[1], want, tc.wantL)
			}
		})
	}
}

// The multiplier decides which pod a chat request matches.
func TestCharToTokenMultiplierChangesMatch(t *testing.T) {
	r := schedulingtest.Chat("r", "m", strings.Repeat("a", 300), strings.Repeat("b", 100)) // 400 chars
	eps := []*scheduling.Endpoint{ep("small", "0-150"), ep("mid", "150-250")}

	got := score(t, newPlugin(t, `{"charToTokenMultiplier": 0.5}`), r, eps...) // L = 200
	want := []float64{0.4375, 0.7/1.01 + 0.15}
	for i := range want {
		if !approx(got[i], want[i], 1e-9) {
			t.Errorf("multiplier 0.5: scores %v, want %v", got, want)
			break
		}
	}
	got = score(t, newPlugin(t, `{"charToTokenMultiplier": 0.25}`), r, eps...) // L = 100
	want = []float64{inRange(0, 150, 100), 0}
	for i := range want {
		if !approx(got[i], want[i], 1e-9) {
			t.Errorf("multiplier 0.25: scores %v, want %v", got, want)
			break
		}
	}
}

func TestCustomLabel(t *testing.T) {
	s := newPlugin(t, `{"label": "example.com/ctx"}`)
	eps := []*scheduling.Endpoint{
		schedulingtest.Endpoint("custom", map[string]string{"example.com/ctx": "0-2048"}, nil),
		ep("default-label-only", "0-2048"), // no "example.com/ctx" -> no label
		schedulingtest.Endpoint("custom-bad", map[string]string{"example.com/ctx": "junk"}, nil),
	}
	got := score(t, s, prompt(2000), eps...)
	want := []float64{inRange(0, 2048, 500), 0.2, 0.0}
	for i := range want {
		if !approx(got[i], want[i], tol) {
			t.Errorf("scores %v, want %v", got, want)
			break
		}
	}
}

func TestFilterMode(t *testing.T) {
	p := schedulingtest.New[scheduling.Plugin](t, schedulingtest.NewHandle(), contextlength.Type, "", `{"enableFiltering": true}`)
	f, ok := p.(scheduling.Filter)
	if !ok {
		t.Fatalf("enableFiltering: true: %T is not a scheduling.Filter", p)
	}
	if _, ok := p.(scheduling.Scorer); !ok {
		t.Fatalf("enableFiltering: true: %T is not a scheduling.Scorer", p)
	}

	// L = 500.
	in := []*scheduling.Endpoint{
		ep("no-label", "-"),                 // keep
		ep("covers", "0-1000"),              // keep
		ep("below-min", "600-1000"),         // drop
		ep("overflow", "0-400"),             // drop
		ep("unparsable", "abc"),             // drop
		ep("second-range", "0-100,400-600"), // keep
		ep("exact-point", "500-500"),        // keep (inclusive)
		ep("at-min", "500-900"),             // keep
		ep("at-max", "100-500"),             // keep
		ep("empty-value", ""),               // drop (unparsable)
	}
	orig := slices.Clone(in)
	dst := make([]*scheduling.Endpoint, 0, len(in))
	out := f.Filter(t.Context(), schedulingtest.CycleState(1), prompt(2000), in, dst)
	want := []string{"no-label", "covers", "second-range", "exact-point", "at-min", "at-max"}
	if got := schedulingtest.Names(out); !slices.Equal(got, want) {
		t.Errorf("kept %v, want %v", got, want)
	}
	if !slices.Equal(in, orig) {
		t.Errorf("Filter modified its input")
	}

	t.Run("appends to dst", func(t *testing.T) {
		pre := ep("already", "-")
		dst := append(make([]*scheduling.Endpoint, 0, 4), pre)
		out := f.Filter(t.Context(), schedulingtest.CycleState(1), prompt(2000), []*scheduling.Endpoint{ep("a", "0-100"), ep("b", "0-1000")}, dst)
		if got := schedulingtest.Names(out); !slices.Equal(got, []string{"already", "b"}) {
			t.Errorf("out = %v, want [already b]", got)
		}
	})
	t.Run("overflow request keeps only no-label pods", func(t *testing.T) {
		in := []*scheduling.Endpoint{ep("a", "0-8192"), ep("b", "0-32768"), ep("c", "-")}
		out := f.Filter(t.Context(), schedulingtest.CycleState(1), prompt(200000), in, make([]*scheduling.Endpoint, 0, len(in)))
		if got := schedulingtest.Names(out); !slices.Equal(got, []string{"c"}) {
			t.Errorf("kept %v, want [c]", got)
		}
	})
	t.Run("filter mode scores like score mode", func(t *testing.T) {
		s := p.(scheduling.Scorer)
		got := score(t, s, prompt(2000), ep("pod-a", "0-2048"), ep("pod-b", "2048-8192"), ep("pod-c", "-"))
		want := []float64{inRange(0, 2048, 500), 0, 0.2}
		for i := range want {
			if !approx(got[i], want[i], tol) {
				t.Errorf("scores %v, want %v", got, want)
				break
			}
		}
	})
	t.Run("custom label", func(t *testing.T) {
		p := schedulingtest.New[scheduling.Filter](t, schedulingtest.NewHandle(), contextlength.Type, "", `{"enableFiltering": true, "label": "ctx"}`)
		in := []*scheduling.Endpoint{
			schedulingtest.Endpoint("match", map[string]string{"ctx": "0-1000"}, nil),
			schedulingtest.Endpoint("nomatch", map[string]string{"ctx": "0-10"}, nil),
			ep("default-label-only", "0-10"), // no "ctx" label -> kept
		}
		out := p.Filter(t.Context(), schedulingtest.CycleState(1), prompt(2000), in, make([]*scheduling.Endpoint, 0, len(in)))
		if got := schedulingtest.Names(out); !slices.Equal(got, []string{"match", "default-label-only"}) {
			t.Errorf("kept %v, want [match default-label-only]", got)
		}
	})
}

func TestScoreModeIsNotAFilter(t *testing.T) {
	for _, params := range []string{"", `{}`, `{"enableFiltering": false}`, `{"enableFiltering": null}`} {
		t.Run(params, func(t *testing.T) {
			p := schedulingtest.New[scheduling.Plugin](t, schedulingtest.NewHandle(), contextlength.Type, "", params)
			if _, ok := p.(scheduling.Filter); ok {
				t.Errorf("params %q: %T is a scheduling.Filter, want scorer only", params, p)
			}
			if _, ok := p.(scheduling.Scorer); !ok {
				t.Errorf("params %q: %T is not a scheduling.Scorer", params, p)
			}
		})
	}
}

func TestParameters(t *testing.T) {
	tests := []struct {
		params string
		want   contextlength.Params
	}{
		{"", contextlength.Params{Label: contextlength.DefaultLabel, CharToTokenMultiplier: 0.25}},
		{`{"charToTokenMultiplier": null}`, contextlength.Params{Label: "mif.moreh.io/context-length-range", CharToTokenMultiplier: 0.25}},
		{`{"label": "x", "enableFiltering": true, "charToTokenMultiplier": 0.5}`, contextlength.Params{Label: "x", EnableFiltering: true, CharToTokenMultiplier: 0.5}},
	}
	for _, tc := range tests {
		p := schedulingtest.New[scheduling.Plugin](t, schedulingtest.NewHandle(), contextlength.Type, "", tc.params)
		pr, ok := p.(interface{ Parameters() any })
		if !ok {
			t.Fatalf("%T has no Parameters()", p)
		}
		if got := pr.Parameters(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("params %q: Parameters() = %+v, want %+v", tc.params, got, tc.want)
		}
		if got := p.TypedName(); got.Type != contextlength.Type || got.Name != contextlength.Type {
			t.Errorf("TypedName() = %+v", got)
		}
	}
}

func TestInvalidParameters(t *testing.T) {
	tests := []struct {
		params string
		field  string
	}{
		{`{"charToTokenMultiplier": 0}`, "parameters.charToTokenMultiplier"},
		{`{"charToTokenMultiplier": -0.25}`, "parameters.charToTokenMultiplier"},
		{`{"charToTokenMultiplier": -1}`, "parameters.charToTokenMultiplier"},
		{`{"charToTokenMultiplier": "0.25"}`, "parameters.charToTokenMultiplier"},
		{`{"charToTokenMultiplier": true}`, "parameters.charToTokenMultiplier"},
		{`{"enableFiltering": "yes"}`, "parameters.enableFiltering"},
		{`{"enableFiltering": 1}`, "parameters.enableFiltering"},
		{`{"label": 5}`, "parameters.label"},
		{`{"label": ["a"]}`, "parameters.label"},
		{`{"label": ""}`, "parameters.label"},
	}
	for _, tc := range tests {
		t.Run(tc.params, func(t *testing.T) {
			_, err := schedulingtest.NewErr(schedulingtest.NewHandle(), contextlength.Type, "", tc.params)
			if err == nil {
				t.Fatal("expected an error")
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not name %s", err, tc.field)
			}
			var pe *scheduling.ParamError
			if !errors.As(err, &pe) || pe.Path != tc.field {
				t.Errorf("error %v is not a ParamError at %s", err, tc.field)
			}
		})
	}
}

func TestParseRanges(t *testing.T) {
	ok := []struct {
		in   string
		want []contextlength.Range
	}{
		{"0-2048", []contextlength.Range{{Min: 0, Max: 2048}}},
		{"2048-8192", []contextlength.Range{{Min: 2048, Max: 8192}}},
		{"0-2048,8192-16384", []contextlength.Range{{Min: 0, Max: 2048}, {Min: 8192, Max: 16384}}},
		{"5-5", []contextlength.Range{{Min: 5, Max: 5}}},
		{"0-0", []contextlength.Range{{Min: 0, Max: 0}}},
		{"0-10, 20-30", []contextlength.Range{{Min: 0, Max: 10}, {Min: 20, Max: 30}}},
	}
	for _, tc := range ok {
		got, err := contextlength.ParseRanges(tc.in)
		if err != nil {
			t.Errorf("ParseRanges(%q): unexpected error %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseRanges(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
	for _, in := range []string{
		"", "abc", "2048", "-", "0-", "-10", "10-5", "a-b", "0-x", "-1-5", "1.5-3", "0-2048,",
		",0-10", "0-10-20", "0-2048;8192-16384", "0–2048", "0x10-0x20",
	} {
		if got, err := contextlength.ParseRanges(in); err == nil {
			t.Errorf("ParseRanges(%q) = %v, want an error", in, got)
		}
	}
}

func TestScoreRange(t *testing.T) {
	tests := []struct {
		r    contextlength.Range
		l    float64
		want float64
	}{
		{contextlength.Range{Min: 0, Max: 2048}, 500, 0.7/1.2048 + 0.3*1548.0/2048},
		{contextlength.Range{Min: 2048, Max: 8192}, 500, 0},
		{contextlength.Range{Min: 0, Max: 8192}, 50000, 0.29096},
		{contextlength.Range{Min: 0, Max: 32768}, 50000, 0.41384},
		{contextlength.Range{Min: 0, Max: 10000}, 0, 0.35 + 0.3},
		{contextlength.Range{Min: 0, Max: 10000}, 10000, 0.35},
	}
	for _, tc := range tests {
		if got := contextlength.ScoreRange(tc.r, tc.l); !approx(got, tc.want, 1e-9) {
			t.Errorf("ScoreRange(%v, %v) = %v, want %v", tc.r, tc.l, got, tc.want)
		}
	}
	// Every score is in [0, 1]; overflow scores are in [0.25, 0.5].
	for _, r := range []contextlength.Range{{0, 0}, {0, 1}, {0, 2048}, {100, 100}, {2048, 8192}, {0, 1 << 20}} {
		for _, l := range []float64{0, 1, 50, 100, 500, 2048, 4096, 8192, 10000, 1 << 21} {
			v := contextlength.ScoreRange(r, l)
			if v < 0 || v > 1 || math.IsNaN(v) {
				t.Errorf("ScoreRange(%v, %v) = %v outside [0, 1]", r, l, v)
			}
			if l > r.Max && (v < 0.25 || v > 0.5) {
				t.Errorf("overflow ScoreRange(%v, %v) = %v outside [0.25, 0.5]", r, l, v)
			}
		}
	}
}

// Scoring from many goroutines at once (run with -race) with labels that
// share and do not share parsed values.
func TestConcurrentScoring(t *testing.T) {
	s := newPlugin(t, "")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				eps := []*scheduling.Endpoint{
					ep("a", "0-2048"),
					ep("b", fmt.Sprintf("0-%d", 1000+(g*200+i)%50)),
					ep("c", "junk"),
				}
				got := schedulingtest.Score(s, schedulingtest.CycleState(uint64(i)), prompt(2000), eps)
				if !approx(got[0], inRange(0, 2048, 500), tol) || got[2] != 0 {
					t.Errorf("scores %v", got)
					return
				}
			}
		})
	}
	wg.Wait()
}
