package workload

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/tokenizer"
)

func TestMixed(t *testing.T) {
	o := MixedOptions{Requests: 2000, Rate: 8, Seed: 7, ArrivalSeed: 1}
	w, err := Mixed(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	if c := w.Counts(); c[KindShort] != 1200 || c[KindMedium] != 600 || c[KindLong] != 200 {
		t.Fatalf("counts %v, want 1200/600/200", c)
	}
	var tok tokenizer.Builtin
	classes := map[string]SizeClass{}
	for _, c := range DefaultMixedClasses() {
		classes[c.Kind] = c
	}
	var last float64
	for i, r := range w.Requests {
		c := classes[r.Kind]
		if r.MaxTokens < c.MinOutput || r.MaxTokens > c.MaxOutput {
			t.Fatalf("%s: max_tokens %d outside %d-%d", r.ID, r.MaxTokens, c.MinOutput, c.MaxOutput)
		}
		// the simulator's tokenizer counts the prompt in the class's
		// range (a word more at most)
		if n := len(tok.Encode(nil, r.Prompt)); n < c.MinPrompt || n > c.MaxPrompt+4 {
			t.Fatalf("%s: %d prompt tokens, class range %d-%d", r.ID, n, c.MinPrompt, c.MaxPrompt)
		}
		if !strings.HasPrefix(r.Prompt, "["+r.ID+"] ") || !strings.HasSuffix(r.ID, "_"+r.Kind) {
			t.Fatalf("request %d: id %s, prompt %.20q", i, r.ID, r.Prompt)
		}
		if at := r.At.Seconds(); at < last {
			t.Fatalf("%s arrives at %.3fs, before the request listed before it (%.3fs)", r.ID, at, last)
		}
		last = r.At.Seconds()
	}
	// Poisson: the mean gap is 1/rate, the gaps' coefficient of variation 1
	gaps := make([]float64, len(w.Requests))
	prev := 0.0
	for i, r := range w.Requests {
		gaps[i], prev = r.At.Seconds()-prev, r.At.Seconds()
	}
	mean, sd := meanSD(gaps)
	if math.Abs(mean*o.Rate-1) > 0.1 || math.Abs(sd/mean-1) > 0.1 {
		t.Fatalf("gaps: mean %.4fs (want %.4fs), coefficient of variation %.2f (want 1)", mean, 1/o.Rate, sd/mean)
	}
}

func meanSD(xs []float64) (float64, float64) {
	var sum, sq float64
	for _, x := range xs {
		sum += x
	}
	mean := sum / float64(len(xs))
	for _, x := range xs {
		sq += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(sq / float64(len(xs)))
}

// Seeds: Seed fixes the requests, ArrivalSeed when and in which order they
// come.
func TestMixedSeeds(t *testing.T) {
	build := func(seed, arrival int64) *Workload {
		w, err := Mixed(MixedOptions{Requests: 200, Rate: 5, Seed: seed, ArrivalSeed: arrival})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	sorted := func(w *Workload) []string {
		k := keys(w)
		slices.Sort(k)
		return k
	}
	a, again, otherArrivals, otherRequests := build(1, 1), build(1, 1), build(1, 2), build(2, 1)
	if !slices.Equal(keys(a), keys(again)) || a.Requests[199].At != again.Requests[199].At {
		t.Fatal("the same seeds gave two workloads")
	}
	if !slices.Equal(sorted(a), sorted(otherArrivals)) {
		t.Fatal("another arrival seed changed the requests")
	}
	if slices.Equal(ids(a), ids(otherArrivals)) || a.Requests[199].At == otherArrivals.Requests[199].At {
		t.Fatal("another arrival seed kept the arrivals")
	}
	if slices.Equal(sorted(a), sorted(otherRequests)) {
		t.Fatal("another seed kept the requests")
	}
}

func TestMixedValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    MixedOptions
		want string
	}{
		{"no requests", MixedOptions{Rate: 1}, "requests: must be positive"},
		{"no rate", MixedOptions{Requests: 1}, "rate: must be positive"},
		{"infinite rate", MixedOptions{Requests: 1, Rate: math.Inf(1)}, "rate: must be positive"},
		{"zero share", MixedOptions{Requests: 1, Rate: 1, Classes: []SizeClass{{Kind: "X", MinPrompt: 1, MaxPrompt: 1, MinOutput: 1, MaxOutput: 1}}}, "class X: share must be positive"},
		{"bad prompt range", MixedOptions{Requests: 1, Rate: 1, Classes: []SizeClass{{Kind: "X", Share: 1, MinPrompt: 5, MaxPrompt: 4, MinOutput: 1, MaxOutput: 1}}}, "class X: prompt tokens 5-4"},
		{"bad output range", MixedOptions{Requests: 1, Rate: 1, Classes: []SizeClass{{Kind: "X", Share: 1, MinPrompt: 1, MaxPrompt: 1}}}, "class X: output tokens 0-0"},
		{"no kind", MixedOptions{Requests: 1, Rate: 1, Classes: []SizeClass{{Share: 1}}}, "class 0: kind required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Mixed(tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestApportion(t *testing.T) {
	for _, tc := range []struct {
		n      int
		shares []float64
		want   []int
	}{
		{10, []float64{0.6, 0.3, 0.1}, []int{6, 3, 1}},
		{7, []float64{0.6, 0.3, 0.1}, []int{4, 2, 1}},
		{1, []float64{1, 1}, []int{1, 0}},
		{5, []float64{2, 2, 1}, []int{2, 2, 1}},
	} {
		classes := make([]SizeClass, len(tc.shares))
		for i, s := range tc.shares {
			classes[i].Share = s
		}
		if got := apportion(tc.n, classes); !slices.Equal(got, tc.want) {
			t.Errorf("apportion(%d, %v) = %v, want %v", tc.n, tc.shares, got, tc.want)
		}
	}
}
