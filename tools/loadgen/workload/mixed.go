package workload

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/hermod/hermod/libs/tokenizer"
)

// SizeClass is one class of a mixed workload's requests: its weight in
// the mix and the ranges (inclusive) its prompt and output lengths are
// drawn from, uniformly, in tokens.
type SizeClass struct {
	// Kind is the class's requests' kind (SHORT, MED, LONG).
	Kind string
	// Share is the class's weight; the weights need not add up to 1.
	Share                float64
	MinPrompt, MaxPrompt int
	MinOutput, MaxOutput int
}

// KindLong is the kind of the mixed workload's long requests (its short
// and medium ones are KindShort and KindMedium).
const KindLong = "LONG"

// DefaultMixedClasses is the mix of requests on a shared chat and batch
// endpoint: 60% short (50-300 prompt tokens, 20-100 output), 30% medium
// (500-2000, 100-300) and 10% long (3000-6000, 300-800).
func DefaultMixedClasses() []SizeClass {
	return []SizeClass{
		{Kind: KindShort, Share: 0.6, MinPrompt: 50, MaxPrompt: 300, MinOutput: 20, MaxOutput: 100},
		{Kind: KindMedium, Share: 0.3, MinPrompt: 500, MaxPrompt: 2000, MinOutput: 100, MaxOutput: 300},
		{Kind: KindLong, Share: 0.1, MinPrompt: 3000, MaxPrompt: 6000, MinOutput: 300, MaxOutput: 800},
	}
}

// MixedOptions shape an open-loop stream of requests of mixed sizes
// arriving as a Poisson process: the traffic that tells routers apart on
// a fleet of unequal pods, where how long a request holds a pod depends
// on both the request and the pod.
type MixedOptions struct {
	// Requests is how many requests are sent.
	Requests int
	// Rate is the mean arrivals per second (simulated).
	Rate float64
	// Classes are the sizes mixed (default: DefaultMixedClasses).
	Classes []SizeClass
	// Seed draws the requests: their classes (in exact proportions),
	// lengths and prompts. The same seed gives the same requests.
	Seed int64
	// ArrivalSeed draws the arrivals: the order the requests come in and
	// the Poisson process's gaps. Workloads of one Seed and several
	// ArrivalSeeds send the same requests in different orders at
	// different times.
	ArrivalSeed int64
}

// Validate checks the options.
func (o MixedOptions) Validate() error {
	var errs []error
	if o.Requests <= 0 {
		errs = append(errs, fmt.Errorf("requests: must be positive (got %d)", o.Requests))
	}
	if !(o.Rate > 0) || math.IsInf(o.Rate, 0) {
		errs = append(errs, fmt.Errorf("rate: must be positive (got %v)", o.Rate))
	}
	if len(o.Classes) == 0 {
		errs = append(errs, errors.New("classes: at least one size class required"))
	}
	for i, c := range o.Classes {
		switch {
		case c.Kind == "":
			errs = append(errs, fmt.Errorf("class %d: kind required", i))
		case !(c.Share > 0) || math.IsInf(c.Share, 0):
			errs = append(errs, fmt.Errorf("class %s: share must be positive (got %v)", c.Kind, c.Share))
		case c.MinPrompt < 1 || c.MaxPrompt < c.MinPrompt:
			errs = append(errs, fmt.Errorf("class %s: prompt tokens %d-%d: need 1 <= min <= max", c.Kind, c.MinPrompt, c.MaxPrompt))
		case c.MinOutput < 1 || c.MaxOutput < c.MinOutput:
			errs = append(errs, fmt.Errorf("class %s: output tokens %d-%d: need 1 <= min <= max", c.Kind, c.MinOutput, c.MaxOutput))
		}
	}
	return errors.Join(errs...)
}

// Mixed builds the workload, deterministically from the seeds. Each class
// gets its share of the requests (largest remainders round), every
// request a prompt of its own (no prefix to share) and uniform lengths in
// its class's ranges (prompts counted by the simulator's tokenizer);
// requests are listed in arrival order, their ids
// (R00001_SHORT, ...) fixed by Seed alone.
func Mixed(o MixedOptions) (*Workload, error) {
	if len(o.Classes) == 0 {
		o.Classes = DefaultMixedClasses()
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	counts := apportion(o.Requests, o.Classes)
	kinds := make([]int, 0, o.Requests)
	for c, n := range counts {
		for range n {
			kinds = append(kinds, c)
		}
	}
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0x313ed))
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	reqs := make([]Request, len(kinds))
	for i, c := range kinds {
		cl := o.Classes[c]
		id := fmt.Sprintf("R%05d_%s", i+1, cl.Kind)
		prompt := tokenText(rng, "["+id+"]", between(rng, cl.MinPrompt, cl.MaxPrompt))
		reqs[i] = Request{ID: id, Kind: cl.Kind, ISLWords: strings.Count(prompt, " ") + 1, MaxTokens: between(rng, cl.MinOutput, cl.MaxOutput), Prompt: prompt}
	}
	arrivals := rand.New(rand.NewPCG(uint64(o.ArrivalSeed), 0xa441e))
	w := &Workload{Name: "mixed", Requests: make([]Request, 0, len(reqs))}
	at := 0.0
	for _, i := range arrivals.Perm(len(reqs)) {
		at += arrivals.ExpFloat64() / o.Rate
		r := reqs[i]
		r.At = seconds(at)
		w.Requests = append(w.Requests, r)
	}
	parts := make([]string, len(o.Classes))
	for c, cl := range o.Classes {
		parts[c] = fmt.Sprintf("%s %d (prompt %d-%d, output %d-%d)", cl.Kind, counts[c], cl.MinPrompt, cl.MaxPrompt, cl.MinOutput, cl.MaxOutput)
	}
	w.Summary = append(w.Summary,
		fmt.Sprintf("[Workload] mixed: %d requests, Poisson at %.2f/s (seed %d, arrival seed %d): %s", o.Requests, o.Rate, o.Seed, o.ArrivalSeed, strings.Join(parts, ", ")))
	return w, nil
}

// apportion splits n among the classes in proportion to their shares,
// rounding by largest remainders (ties to the earlier class), so the
// counts add up to n.
func apportion(n int, classes []SizeClass) []int {
	var total float64
	for _, c := range classes {
		total += c.Share
	}
	counts := make([]int, len(classes))
	rest := make([]float64, len(classes))
	left := n
	for i, c := range classes {
		exact := float64(n) * c.Share / total
		counts[i] = int(exact)
		rest[i] = exact - float64(counts[i])
		left -= counts[i]
	}
	order := make([]int, len(classes))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case rest[a] > rest[b]:
			return -1
		case rest[a] < rest[b]:
			return 1
		}
		return 0
	})
	for i := 0; left > 0; i, left = i+1, left-1 {
		counts[order[i%len(order)]]++
	}
	return counts
}

// tokenText is a header followed by random words, as many as make the
// text at least tokens tokens long (at most a word more) by the
// simulator's tokenizer.
func tokenText(rng *rand.Rand, header string, tokens int) string {
	var tok tokenizer.Builtin
	var buf []uint32
	var b strings.Builder
	b.WriteString(header)
	n := len(tok.Encode(buf, header))
	for n < tokens {
		w := " " + words[rng.IntN(len(words))]
		buf = tok.Encode(buf[:0], w)
		n += len(buf)
		b.WriteString(w)
	}
	return b.String()
}

// between draws an integer in [lo, hi].
func between(rng *rand.Rand, lo, hi int) int { return lo + rng.IntN(hi-lo+1) }
