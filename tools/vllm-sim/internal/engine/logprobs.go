package engine

import "math"

// Candidate is a token the simulated model weighed at an output position.
type Candidate struct {
	ID      uint32
	Text    string
	Logprob float64
}

// Logprobs is the simulated model's distribution at output position i of
// a sequence seeded with seed: it returns the logprob of the token it
// sampled there, whose text is sampled, and appends to dst the k most
// likely other tokens, most likely first. The sampled token is the most
// likely (0.4 to 0.99 of the mass, drawn from seed and i); each next one
// has roughly half the mass of the one before it, and together they leave
// some mass to the rest of the vocabulary. The other tokens are output
// words (after a space but at the first position), none whose text is
// sampled's. Everything is a function of seed, i and sampled.
func Logprobs(dst []Candidate, seed uint64, i int, sampled string, k int) (float64, []Candidate) {
	h := splitmix64(seed ^ 0x6a09e667f3bcc909 + uint64(i)*0x9e3779b97f4a7c15)
	p := 0.4 + 0.59*unit(h)
	rest := 1 - p
	lead := 0
	if i > 0 {
		lead = 1
	}
	w := int(h % uint64(len(outputWords)))
	mass := rest
	for j := 0; j < k && j < len(outputWords)-1; j++ {
		h = splitmix64(h)
		mass *= 0.5
		for outputTexts[lead][w] == sampled {
			w = (w + 1) % len(outputWords)
		}
		dst = append(dst, Candidate{ID: outputIDs[lead][w], Text: outputTexts[lead][w], Logprob: math.Log(mass * (0.6 + 0.4*unit(h)))})
		w = (w + 1) % len(outputWords)
	}
	return math.Log(p), dst
}

// unit maps a hash to [0, 1).
func unit(h uint64) float64 { return float64(h>>11) / (1 << 53) }
