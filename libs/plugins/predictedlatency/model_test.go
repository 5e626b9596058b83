package predictedlatency

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

// truth is a synthetic pool: coefficients unlike the prior's shape, in a
// clock ten times faster (a simulator at speed 10), and pods of unlike
// speeds.
type truth struct {
	theta  [nTheta]float64
	speeds map[string]float64
}

func newTruth(rng *rand.Rand, speeds map[string]float64) *truth {
	t := &truth{speeds: speeds}
	for i := range t.theta {
		t.theta[i] = 0.1 * prior[i] * (0.5 + 1.5*rng.Float64())
	}
	return t
}

// randomFeatures draws a request's features on a pod under random load.
func randomFeatures(rng *rand.Rand) (features, float64) {
	uncached := 50 + rng.Float64()*3000
	pending := rng.Float64() * 8000
	decoding := float64(rng.IntN(64))
	context := decoding * (200 + rng.Float64()*3000)
	output := float64(16 + rng.IntN(400))
	ahead := (uncached + pending) / 1e3
	var x features
	x.ttft = [nTTFT]float64{1, uncached / 1e3, pending / 1e3, decoding / 100, context / 1e5, ahead * decoding / 100, ahead * context / 1e5, float64(rng.IntN(4)) / 10}
	x.tpot = [nTPOT]float64{1, (decoding + 1) / 100, (context + uncached + output/2) / 1e5, (pending + uncached) / 1e3, rng.Float64() * 0.9}
	return x, output
}

func (t *truth) latencies(pod string, x *features) (ttft, tpot float64) {
	for i, v := range x.ttft {
		ttft += t.theta[i] * v
	}
	for i, v := range x.tpot {
		tpot += t.theta[nTTFT+i] * v
	}
	s := t.speeds[pod]
	return ttft / s, tpot / s
}

// samples draws n finished requests per pod with 5% noise; streamed says
// whether TTFT and TPOT were measured, or only the duration.
func (t *truth) samples(rng *rand.Rand, n int, streamed bool, start time.Time) map[string][]sample {
	out := map[string][]sample{}
	pods := make([]string, 0, len(t.speeds))
	for p := range t.speeds {
		pods = append(pods, p)
	}
	sort.Strings(pods)
	id := uint64(1)
	for _, pod := range pods {
		for range n {
			x, output := randomFeatures(rng)
			ttft, tpot := t.latencies(pod, &x)
			noise := func() float64 { return 1 + 0.05*(2*rng.Float64()-1) }
			s := sample{stamp: scheduling.StampOf(id, start.Add(time.Duration(id)*time.Millisecond)), x: x, output: output}
			if streamed {
				s.ttft, s.tpot = ttft*noise(), tpot*noise()
			} else {
				s.e2e = (ttft + (output-1)*tpot) * noise()
			}
			id++
			out[pod] = append(out[pod], s)
		}
	}
	return out
}

// mape returns the median absolute percentage errors of TTFT, TPOT and
// the whole request over n requests per pod.
func mape(t *testing.T, f *fit, tr *truth, rng *rand.Rand, n int) (ttftErr, tpotErr, e2eErr float64) {
	t.Helper()
	var et, ed, ee []float64
	for pod := range tr.speeds {
		for range n {
			x, output := randomFeatures(rng)
			wt, wd := tr.latencies(pod, &x)
			gt, gd := f.predict(pod, &x)
			et = append(et, math.Abs(gt-wt)/wt)
			ed = append(ed, math.Abs(gd-wd)/wd)
			we, ge := wt+(output-1)*wd, gt+(output-1)*gd
			ee = append(ee, math.Abs(ge-we)/we)
		}
	}
	slices.Sort(et)
	slices.Sort(ed)
	slices.Sort(ee)
	return et[len(et)/2], ed[len(ed)/2], ee[len(ee)/2]
}

func fitMap(byKey map[string][]sample) *fit {
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	ls := make([][]sample, len(keys))
	for i, k := range keys {
		ls[i] = byKey[k]
	}
	return fitSamples(keys, ls)
}

// The fit learns a pool whose coefficients and clock differ from the
// prior's, and each pod's speed, from streamed and from unstreamed
// requests.
func TestFitLearnsThePoolAndEachPodsSpeed(t *testing.T) {
	for _, streamed := range []bool{true, false} {
		t.Run(fmt.Sprintf("streamed=%v", streamed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			tr := newTruth(rng, map[string]float64{"pod-0": 1, "pod-1": 1, "pod-2": 0.5, "pod-3": 2})
			f := fitMap(tr.samples(rng, 300, streamed, time.Unix(1e9, 0)))
			ttft, tpot, e2e := mape(t, f, tr, rng, 500)
			t.Logf("median absolute error: TTFT %.1f%%, TPOT %.1f%%, request %.1f%%; scales %v", 100*ttft, 100*tpot, 100*e2e, f.scales)
			if streamed && (ttft > 0.08 || tpot > 0.08) {
				t.Errorf("median absolute percentage error TTFT %.3f, TPOT %.3f; want <= 0.08", ttft, tpot)
			}
			// unstreamed, only the request's duration is observed: that is
			// what must be right
			if e2e > 0.08 {
				t.Errorf("median absolute percentage error of the request's duration %.3f; want <= 0.08", e2e)
			}
			g0, h0 := f.scale("pod-0")
			g2, h2 := f.scale("pod-2")
			g3, h3 := f.scale("pod-3")
			if r := g2 / g0; r < 1.8 || r > 2.2 {
				t.Errorf("the half-speed pod's TTFT factor is %.2fx pod-0's, want 2", r)
			}
			if r := h2 / h0; r < 1.8 || r > 2.2 {
				t.Errorf("the half-speed pod's TPOT factor is %.2fx pod-0's, want 2", r)
			}
			if r := g3 / g0; r < 0.45 || r > 0.55 {
				t.Errorf("the double-speed pod's TTFT factor is %.2fx pod-0's, want 0.5", r)
			}
			if r := h3 / h0; r < 0.45 || r > 0.55 {
				t.Errorf("the double-speed pod's TPOT factor is %.2fx pod-0's, want 0.5", r)
			}
		})
	}
}

// Before any request finished the prior ranks loads sensibly; with a few
// samples per pod the fit already knows a slow pod.
func TestFitFromFewSamples(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	tr := newTruth(rng, map[string]float64{"pod-0": 1, "pod-1": 0.5})
	f := fitMap(tr.samples(rng, 8, true, time.Unix(1e9, 0)))
	g0, _ := f.scale("pod-0")
	g1, _ := f.scale("pod-1")
	if r := g1 / g0; r < 1.5 {
		t.Errorf("after 8 samples a pod at half speed is %.2fx slower, want about 2", r)
	}
	empty := fitSamples(nil, nil)
	var light, heavy features
	light.ttft[tOne], light.tpot[dOne] = 1, 1
	heavy = light
	heavy.ttft[tPrefill], heavy.ttft[tDecoding], heavy.ttft[tContext] = 4, 0.3, 2
	heavy.tpot[dBatch], heavy.tpot[dContext] = 0.3, 2
	lt, ld := empty.predict("x", &light)
	ht, hd := empty.predict("x", &heavy)
	if ht <= lt || hd <= ld {
		t.Errorf("the prior predicts a loaded pod (%v, %v) no slower than an idle one (%v, %v)", ht, hd, lt, ld)
	}
}

// Every replica holds the same model: the same samples in any order, with
// redeliveries, fit to the same coefficients bit for bit; the oldest
// samples beyond the per-key limit or the window are dropped alike.
func TestModelIsOrderIndependent(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	tr := newTruth(rng, map[string]float64{"pod-0": 1, "pod-1": 0.7, "pod-2": 1.3})
	start := time.Unix(1e9, 0)
	all := tr.samples(rng, 120, true, start)
	now := func() time.Time { return start.Add(time.Hour) }
	type kv struct {
		key string
		s   sample
	}
	var flat []kv
	for k, l := range all {
		for _, s := range l {
			flat = append(flat, kv{k, s})
		}
	}
	var fits []*fit
	for order := range 3 {
		m := newModel(2*time.Hour, 100, now, newMetrics(schedulingtest.NewHandle()))
		r := rand.New(rand.NewPCG(uint64(order), 9))
		perm := slices.Clone(flat)
		r.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		for i, e := range perm {
			m.add(e.key, e.s)
			if i%7 == 0 {
				m.add(e.key, e.s) // redelivered
			}
		}
		m.refit()
		fits = append(fits, m.current.Load())
		if got := m.samples(); got != 300 {
			t.Fatalf("order %d holds %d samples, want 100 per pod", order, got)
		}
	}
	for i := 1; i < len(fits); i++ {
		if fits[i].theta != fits[0].theta || fmt.Sprint(fits[i].scales) != fmt.Sprint(fits[0].scales) {
			t.Fatalf("order %d fit differs:\n%v %v\n%v %v", i, fits[i].theta, fits[i].scales, fits[0].theta, fits[0].scales)
		}
	}
	// a window that starts after some samples drops them before the fit
	m := newModel(time.Hour-100*time.Millisecond, 1000, now, newMetrics(schedulingtest.NewHandle()))
	for _, e := range flat {
		m.add(e.key, e.s)
	}
	m.refit()
	if got := m.current.Load().samples; got >= 360 || got == 0 {
		t.Fatalf("fit over %d samples; the window should have dropped the oldest", got)
	}
}

func BenchmarkFit(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	speeds := map[string]float64{}
	for i := range 20 {
		speeds[fmt.Sprintf("pod-%02d", i)] = 0.5 + rng.Float64()
	}
	tr := newTruth(rng, speeds)
	all := tr.samples(rng, 512, true, time.Unix(1e9, 0))
	b.ResetTimer()
	for range b.N {
		fitMap(all)
	}
}

// The delay a request adds to those in flight grows with the steps it
// shares with them, its context and the endpoint's slowness, and with its
// prefill for the ones decoding.
func TestDelayAdded(t *testing.T) {
	f := fitSamples(nil, nil)
	f.scales = map[string][2]float64{"slow": {2, 2}}
	base := f.delayAdded("x", 1000, 1000, 100, 0, 0)
	if base != 0 {
		t.Fatalf("alone: %v", base)
	}
	one := f.delayAdded("x", 1000, 0, 100, 100, 0)
	// a decode step costs dBatch/100 per sequence plus dContext/1e5 per
	// context token (prompt + half its output)
	want := 100 * (prior[nTTFT+dBatch]/100 + prior[nTTFT+dContext]/1e5*1050)
	if math.Abs(one-want) > 1e-12 {
		t.Fatalf("delay over 100 shared steps %v, want %v", one, want)
	}
	if two := f.delayAdded("x", 1000, 0, 100, 200, 0); math.Abs(two-2*one) > 1e-12 {
		t.Fatalf("twice the overlap: %v, want %v", two, 2*one)
	}
	if slow := f.delayAdded("slow", 1000, 0, 100, 100, 0); math.Abs(slow-2*one) > 1e-12 {
		t.Fatalf("on a pod twice as slow: %v, want %v", slow, 2*one)
	}
	prefill := f.delayAdded("x", 1000, 500, 100, 0, 4)
	if want := 4 * 500 * prior[tUncached] / 1e3; math.Abs(prefill-want) > 1e-12 {
		t.Fatalf("prefill delay %v, want %v", prefill, want)
	}
}

// Each pod's factor is pulled towards the pool's by how sure its own
// estimate is against how much the pods differ: identical pods with few,
// noisy samples come out alike; a slower pod keeps its factor from two
// samples.
func TestScalesShrinkByEvidence(t *testing.T) {
	noisy := func(tr *truth, rng *rand.Rand, n map[string]int, noise float64) map[string][]sample {
		out := map[string][]sample{}
		id := uint64(1)
		pods := make([]string, 0, len(n))
		for pod := range n {
			pods = append(pods, pod)
		}
		sort.Strings(pods)
		for _, pod := range pods {
			for range n[pod] {
				x, output := randomFeatures(rng)
				ttft, tpot := tr.latencies(pod, &x)
				e := func() float64 { return 1 + noise*(2*rng.Float64()-1) }
				out[pod] = append(out[pod], sample{stamp: scheduling.StampOf(id, time.Unix(1e9, int64(id))), x: x, output: output, e2e: (ttft + (output-1)*tpot) * e()})
				id++
			}
		}
		return out
	}
	for seed := range uint64(5) {
		rng := rand.New(rand.NewPCG(seed, 11))
		same := newTruth(rng, map[string]float64{"a": 1, "b": 1, "c": 1, "d": 1})
		f := fitMap(noisy(same, rng, map[string]int{"a": 8, "b": 8, "c": 8, "d": 8}, 0.2))
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, k := range []string{"a", "b", "c", "d"} {
			g, _ := f.scale(k)
			lo, hi = min(lo, g), max(hi, g)
		}
		if hi/lo > 1.05 {
			t.Errorf("seed %d: identical pods' factors %.3f..%.3f with 8 samples of 20%% noise each", seed, lo, hi)
		}
		slow := newTruth(rng, map[string]float64{"a": 1, "b": 1, "c": 1, "d": 0.5})
		f = fitMap(noisy(slow, rng, map[string]int{"a": 10, "b": 10, "c": 10, "d": 2}, 0.05))
		ga, _ := f.scale("a")
		gd, _ := f.scale("d")
		// (two samples: the shared fit's departures from the truth's
		// shape move the estimate a little)
		if r := gd / ga; r < 1.7 || r > 2.3 {
			t.Errorf("seed %d: a pod at half speed with two samples is %.2fx slower, want 2", seed, r)
		}
	}
}
