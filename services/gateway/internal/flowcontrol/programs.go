package flowcontrol

import (
	"math"
	"time"

	"github.com/hermod/hermod/libs/plugins/flowpolicy"
)

// maxPrograms bounds the programs remembered: fairness ids are the
// clients' to choose. Programs with requests queued or in flight are
// always kept; past the bound, idle ones are forgotten early.
const maxPrograms = 10000

// Weights of a program's attained service: output costs twice input.
const (
	weightPromptToken     = 1
	weightCompletionToken = 2
)

// programs is program-aware fairness's state: each flow's (program's)
// attained service. Guarded by Controller.mu.
type programs struct {
	p         flowpolicy.ProgramAware
	m         map[string]*program
	picks     uint64 // dispatches decided, for the per-dispatch decay
	lastSweep time.Time
	lastIndex time.Time // of the fairness index
	metrics   *Metrics
}

// program is one flow's account.
type program struct {
	service          float64
	queued, inFlight int
	// while idle (nothing queued or in flight) the service decays from
	// anchor (wall clock) or anchorPick (dispatches)
	anchor     time.Time
	anchorPick uint64
	lastDone   time.Time
	// dispatched requests and their summed wait in the queue
	dispatched int64
	waited     time.Duration
}

func newPrograms(p flowpolicy.ProgramAware, m *Metrics) *programs {
	return &programs{p: p, m: map[string]*program{}, metrics: m}
}

func (pr *program) idle() bool { return pr.queued == 0 && pr.inFlight == 0 }

func (ps *programs) get(flow string) *program {
	pr := ps.m[flow]
	if pr == nil {
		pr = &program{}
		ps.m[flow] = pr
	}
	return pr
}

// settle applies the decay of an idle program up to now, as it becomes
// active.
func (ps *programs) settle(pr *program, now time.Time) {
	if !pr.idle() {
		return
	}
	switch {
	case pr.anchor.IsZero():
	case ps.p.LASHalfLifeSeconds > 0:
		if elapsed := now.Sub(pr.anchor).Seconds(); elapsed > 0 {
			pr.service *= math.Pow(0.5, elapsed/ps.p.LASHalfLifeSeconds)
		}
	default:
		pr.service *= math.Pow(ps.p.LASDecayFactor, float64(ps.picks-pr.anchorPick))
	}
	pr.anchor, pr.anchorPick = now, ps.picks
}

// rest marks the moment a program became idle: its decay starts.
func (ps *programs) rest(pr *program, now time.Time) {
	if pr.idle() {
		pr.anchor, pr.anchorPick = now, ps.picks
	}
}

// queue counts a request of flow into the queue.
func (ps *programs) queue(flow string, now time.Time) {
	pr := ps.get(flow)
	ps.settle(pr, now)
	pr.queued++
}

// unqueue counts a request of flow that arrived at out of the queue:
// dispatched (then in flight) or gone (TTL, client).
func (ps *programs) unqueue(flow string, dispatched bool, arrived, now time.Time) {
	pr := ps.m[flow]
	if pr == nil {
		return
	}
	pr.queued--
	if dispatched {
		ps.dispatch(flow, pr, now.Sub(arrived))
	}
	ps.rest(pr, now)
}

// admitted counts a request of flow admitted without queueing.
func (ps *programs) admitted(flow string, now time.Time) {
	pr := ps.get(flow)
	ps.settle(pr, now)
	ps.dispatch(flow, pr, 0)
}

// dispatch counts a request of pr in flight after waiting wait.
func (ps *programs) dispatch(flow string, pr *program, wait time.Duration) {
	pr.inFlight++
	pr.dispatched++
	pr.waited += wait
	ps.metrics.programWait(flow, float64(pr.waited.Milliseconds())/float64(pr.dispatched))
}

// finished credits a request of flow that ended with the tokens it used.
func (ps *programs) finished(flow string, prompt, completion int64, now time.Time) {
	pr := ps.m[flow]
	if pr == nil || pr.inFlight == 0 {
		return
	}
	pr.inFlight--
	pr.service += float64(weightPromptToken*max(prompt, 0) + weightCompletionToken*max(completion, 0))
	pr.lastDone = now
	ps.metrics.programService(flow, pr.service)
	ps.rest(pr, now)
	ps.sweep(now)
	if now.Sub(ps.lastIndex) >= time.Second {
		ps.lastIndex = now
		ps.metrics.programFairness(ps.fairnessIndex())
	}
}

// fairnessIndex is Jain's fairness index over the programs' mean waits in
// the queue: 1 when they are equal, down to 1/n when one program waits
// alone.
func (ps *programs) fairnessIndex() float64 {
	var sum, squares float64
	n := 0
	for _, pr := range ps.m {
		if pr.dispatched == 0 {
			continue
		}
		w := float64(pr.waited.Milliseconds()) / float64(pr.dispatched)
		sum, squares, n = sum+w, squares+w*w, n+1
	}
	if squares == 0 {
		return 1
	}
	return sum * sum / (float64(n) * squares)
}

// forget drops a program and its series.
func (ps *programs) forget(flow string) {
	delete(ps.m, flow)
	ps.metrics.programGone(flow)
}

// pick returns the index in keys (flows with requests waiting, with the
// time their oldest request arrived) of the one to dispatch from: the
// highest LAS score, the first of equals.
func (ps *programs) pick(keys []string, head func(string) time.Time, now time.Time) int {
	ps.picks++
	if len(keys) == 1 {
		return 0
	}
	var minS, maxS, minW, maxW float64
	services := make([]float64, len(keys))
	waits := make([]float64, len(keys))
	for i, k := range keys {
		s, w := 0.0, float64(now.Sub(head(k)).Milliseconds())
		if pr := ps.m[k]; pr != nil {
			s = pr.service
		}
		services[i], waits[i] = s, w
		if i == 0 {
			minS, maxS, minW, maxW = s, s, w, w
			continue
		}
		minS, maxS, minW, maxW = min(minS, s), max(maxS, s), min(minW, w), max(maxW, w)
	}
	best, bestScore := 0, math.Inf(-1)
	for i := range keys {
		score := ps.p.LASWeightService*(1-normalize(services[i], minS, maxS)) + ps.p.LASWeightHeadWait*normalize(waits[i], minW, maxW)
		if score > bestScore {
			best, bestScore = i, score
		}
	}
	return best
}

// normalize maps v into [0, 1] over [lo, hi] (0.5 when they are equal).
func normalize(v, lo, hi float64) float64 {
	if hi == lo {
		return 0.5
	}
	return (v - lo) / (hi - lo)
}

// sweep forgets programs idle past the eviction TTL, at most every sweep
// interval, and idle ones beyond maxPrograms.
func (ps *programs) sweep(now time.Time) {
	interval := time.Duration(ps.p.EvictionSweepSeconds * float64(time.Second))
	if now.Sub(ps.lastSweep) < interval && len(ps.m) <= maxPrograms {
		return
	}
	ps.lastSweep = now
	ttl := time.Duration(ps.p.EvictionTTLSeconds * float64(time.Second))
	for flow, pr := range ps.m {
		if pr.idle() && ttl > 0 && now.Sub(pr.lastDone) > ttl && now.Sub(pr.anchor) > ttl {
			ps.forget(flow)
		}
	}
	for flow, pr := range ps.m {
		if len(ps.m) <= maxPrograms {
			break
		}
		if pr.idle() {
			ps.forget(flow)
		}
	}
}
