package workload

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hermod/hermod/tools/loadgen/internal/pyrand"
)

// ReferenceOptions are the knobs of reference/000's workload generator,
// with its names and defaults (DefaultReference).
type ReferenceOptions struct {
	// Workers is the number of pods behind the router; it only appears in
	// the summary.
	Workers int
	// Total is the number of requests, seeds and inline heavies included.
	Total int
	// HeavySeeds are heavy requests sent first to pin pods.
	HeavySeeds int
	// InlineEvery inserts one heavy request after every InlineEvery burst
	// requests (unless InlineHeavyCount is set).
	InlineEvery int
	// InlineHeavyCount, if positive, is the number of inline heavies.
	InlineHeavyCount int
	// SeedInterval is the time between heavy seeds, in seconds.
	SeedInterval float64
	// BurstStart is when the burst begins, in seconds.
	BurstStart float64
	// BurstInterval is the base spacing of burst requests, in seconds.
	BurstInterval float64
	// Jitter is the uniform ± jitter on each burst spacing, in seconds.
	Jitter float64
	// InlineExtraGap is an extra gap after each inline heavy, in seconds.
	InlineExtraGap float64
	// Seed seeds the generator. 42 is the reference's (fixed) seed; since
	// the reference reseeds from each prompt's id, another seed also shifts
	// the prompt seeds by the same amount, so that it changes the whole
	// workload and not only a workload without heavy seeds.
	Seed int64
}

// DefaultReference returns the reference generator's defaults.
func DefaultReference() ReferenceOptions {
	return ReferenceOptions{
		Workers:        4,
		Total:          1000,
		HeavySeeds:     2,
		InlineEvery:    50,
		SeedInterval:   0.05,
		BurstStart:     0.30,
		BurstInterval:  0.010,
		Jitter:         0.003,
		InlineExtraGap: 0.06,
		Seed:           42,
	}
}

// ReferenceCommand returns the options of the command reference/000 runs
// its round-robin versus load-aware comparison with: 800 requests, the
// first 400 heavy seeds sent at once, then a burst with an inline heavy
// after every 24.
func ReferenceCommand() ReferenceOptions {
	o := DefaultReference()
	o.HeavySeeds, o.SeedInterval, o.Total = 400, 0, 800
	o.BurstStart, o.BurstInterval, o.Jitter, o.InlineExtraGap, o.InlineEvery = 5, 0.5, 0.5, 0.5, 24
	return o
}

// Validate checks the options.
func (o ReferenceOptions) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(o.Total >= 0, "--total: must not be negative (got %d)", o.Total)
	check(o.HeavySeeds >= 0, "--heavy-seeds: must not be negative (got %d)", o.HeavySeeds)
	check(o.InlineEvery >= 0, "--inline-every: must not be negative (got %d)", o.InlineEvery)
	check(o.InlineHeavyCount >= 0, "--inline-heavy-count: must not be negative (got %d)", o.InlineHeavyCount)
	check(o.SeedInterval >= 0, "--seed-interval: must not be negative (got %v)", o.SeedInterval)
	check(o.BurstStart >= 0, "--burst-start: must not be negative (got %v)", o.BurstStart)
	check(o.BurstInterval >= 0, "--burst-interval: must not be negative (got %v)", o.BurstInterval)
	check(o.Jitter >= 0, "--jitter: must not be negative (got %v)", o.Jitter)
	check(o.InlineExtraGap >= 0, "--inline-extra-gap: must not be negative (got %v)", o.InlineExtraGap)
	return errors.Join(errs...)
}

// heavySpecs are the reference's heavy (input words, output tokens) pairs,
// used in turn.
var heavySpecs = [...][2]int{{1300, 320}, {1500, 350}, {2700, 780}, {4000, 1050}}

// vocab is the reference's prompt vocabulary (duplicates included: they
// weigh the draws).
var vocab = [...]string{
	"quantum", "neural", "matrix", "optimization", "graph", "tensor",
	"latency", "throughput", "bandwidth", "kernel", "scheduler", "routing",
	"prefill", "decode", "scaling", "gradient", "cache", "expert",
	"activation", "pipeline", "distributed", "dynamic", "cluster", "epoch",
	"inference", "token", "sampling", "prefetch", "adapter", "mixture",
	"routing", "context", "parallelism", "load", "dispatch", "bandwidth",
	"coherence", "gradient", "topology", "fabric", "kernel",
}

const (
	noiseAlphabet  = "abcdefghijklmnopqrstuvwxyz "
	referenceSeed  = 42
	promptSeedBase = 12345
	maxPromptChars = 65000
	maxNoiseChars  = 2000
)

// Reference builds reference/000's JSQ-favourable workload: heavy seeds
// first, then a shuffled burst of short and medium requests with heavy
// requests inlined at even spacing. It reproduces the reference generator
// exactly: the same requests, kinds, order, lengths, prompts and launch
// times for the same options, including its one shared random stream
// (each prompt reseeds it, and what follows draws from that state).
func Reference(o ReferenceOptions) (*Workload, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	rng := pyrand.New(o.Seed)
	w := &Workload{Name: "reference"}
	add := func(id, kind string, isl, osl int) {
		w.Requests = append(w.Requests, Request{ID: id, Kind: kind, ISLWords: isl, MaxTokens: osl, Prompt: prompt(rng, o.Seed-referenceSeed, isl, id)})
	}
	for i := range o.HeavySeeds {
		s := heavySpecs[i%len(heavySpecs)]
		add(fmt.Sprintf("S%03d_HEAVY", i+1), KindHeavy, s[0], s[1])
	}
	remaining := max(0, o.Total-o.HeavySeeds)
	inline := max(0, remaining/(o.InlineEvery+1))
	if o.InlineHeavyCount > 0 {
		inline = min(o.InlineHeavyCount, remaining)
	}
	nonHeavy := max(0, remaining-inline)
	shorts := nonHeavy / 2
	mediums := nonHeavy - shorts

	type item struct {
		kind     string
		isl, osl int
	}
	pool := make([]item, 0, nonHeavy)
	for range shorts {
		isl := rng.RandInt(10, 20)
		pool = append(pool, item{KindShort, isl, rng.RandInt(25, 40)})
	}
	for range mediums {
		isl := rng.RandInt(120, 180)
		pool = append(pool, item{KindMedium, isl, rng.RandInt(60, 90)})
	}
	rng.Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })

	var positions []int
	if inline > 0 && len(pool) > 0 {
		step := max(1, len(pool)/inline)
		for k := range inline {
			positions = append(positions, min(len(pool), (k+1)*step))
		}
	}
	built := make([]item, 0, len(pool)+len(positions))
	used := 0
	for idx, it := range pool {
		built = append(built, it)
		if used < len(positions) && idx+1 == positions[used] {
			s := heavySpecs[used%len(heavySpecs)]
			built = append(built, item{KindInlineHeavy, s[0], s[1]})
			used++
		}
	}
	var nShort, nMed, nInline int
	for _, it := range built {
		switch it.kind {
		case KindShort:
			nShort++
			add(fmt.Sprintf("B%04d_SHORT", nShort), it.kind, it.isl, it.osl)
		case KindMedium:
			nMed++
			add(fmt.Sprintf("M%04d_MED", nMed), it.kind, it.isl, it.osl)
		default:
			nInline++
			add(fmt.Sprintf("I%03d_HEAVY", nInline), it.kind, it.isl, it.osl)
		}
	}
	w.Summary = append(w.Summary, fmt.Sprintf("[Workload] workers=%d total=%d | seed_heavy=%d, inline_heavy=%d, nonheavy=%d (short=%d, med=%d)",
		o.Workers, len(w.Requests), o.HeavySeeds, inline, nonHeavy, shorts, mediums))
	schedule(w, o, rng)
	return w, nil
}

// Request kinds of the reference workload.
const (
	KindHeavy       = "HEAVY"
	KindInlineHeavy = "HEAVY_INLINE"
	KindShort       = "SHORT"
	KindMedium      = "MED"
)

// schedule sets launch times: seeds every SeedInterval from 0; the rest
// from BurstStart, BurstInterval ± Jitter apart, with InlineExtraGap more
// after an inline heavy. Times accumulate in float64 seconds as the
// reference does, so they agree to the last bit.
func schedule(w *Workload, o ReferenceOptions, rng *pyrand.Rand) {
	seeds := min(o.HeavySeeds, len(w.Requests))
	for i := range seeds {
		w.Requests[i].At = seconds(float64(i) * o.SeedInterval)
	}
	t := o.BurstStart
	for i := seeds; i < len(w.Requests); i++ {
		r := &w.Requests[i]
		r.At = seconds(t)
		dt := o.BurstInterval
		if o.Jitter > 0 {
			dt += rng.Uniform(-o.Jitter, o.Jitter)
		}
		if r.Kind == KindInlineHeavy {
			dt += o.InlineExtraGap
		}
		t += max(0, dt)
	}
	w.Summary = append(w.Summary, fmt.Sprintf("[Timing] seed_interval=%.3fs burst_start=%.3fs burst_interval=%.3fs jitter=±%.3fs inline_extra_gap=%.3fs",
		o.SeedInterval, o.BurstStart, o.BurstInterval, o.Jitter, o.InlineExtraGap))
}

// prompt is the reference's deterministic prompt of about words words for
// the request id (shift moves the seeds away from the reference's): the generator is reseeded from the id (so the same id
// always gets the same text), draws the words, then up to 2000 characters
// of letter-and-space noise; the text is cut at 65000 characters.
func prompt(rng *pyrand.Rand, shift int64, words int, id string) string {
	seed := promptSeedBase + shift
	for _, c := range id {
		seed += int64(c)
	}
	rng.Seed(seed)
	var b strings.Builder
	noise := min(words*5, maxNoiseChars)
	b.Grow(len(id) + 3 + words*9 + noise)
	b.WriteString("[")
	b.WriteString(id)
	b.WriteString("] ")
	for i := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(vocab[rng.Choice(len(vocab))])
	}
	b.WriteByte(' ')
	for range noise {
		b.WriteByte(noiseAlphabet[rng.ChoicesIndex(len(noiseAlphabet))])
	}
	s := b.String()
	if len(s) > maxPromptChars {
		s = s[:maxPromptChars]
	}
	return s
}
