package predictedlatency

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermod/hermod/libs/scheduling"
)

// Features. A request's TTFT on an endpoint is predicted from what must be
// prefilled before its first token (its own uncached prompt, and the
// prompts still being prefilled there) and from how much every step costs
// while that happens (the sequences decoding, their context); its TPOT from
// the batch it will decode in: the requests in flight (under steady
// traffic, new arrivals take the places of those that finish), their
// context over its lifetime, and the prefill work they interleave. The
// units keep every feature near 1 for a loaded 8B-class pod.
const (
	tOne       = iota // intercept
	tUncached         // own uncached prompt tokens / 1e3
	tPrefill          // prompt tokens still to prefill ahead / 1e3
	tDecoding         // sequences decoding / 100
	tContext          // their context tokens / 1e5
	tPrefillXD        // (own + ahead)/1e3 x decoding/100: prefill steps slowed by decoding
	tPrefillXK        // (own + ahead)/1e3 x context/1e5
	tWaiting          // the engine's waiting queue (metrics) / 10
	nTTFT
)

const (
	dOne     = iota // intercept
	dBatch          // co-running sequences over the request's life / 100
	dContext        // their context plus its own / 1e5
	dPrefill        // prompt tokens still to prefill / 1e3
	dKV             // KV-cache utilisation, 0..1 (metrics)
	nTPOT
)

const nTheta = nTTFT + nTPOT

// features are what a prediction for one request on one endpoint is made
// from; decisions carry them, so that every replica learns from the same.
type features struct {
	ttft [nTTFT]float64
	tpot [nTPOT]float64
}

// prior is the model before any request finished, derived from the step
// cost of continuous batching with chunked prefill,
//
//	step = c0 + prefilled tokens x cp + decoding sequences x cd + context tokens x ca,
//
// with at most B tokens a step, for an 8B-class model on one H100
// (c0 10 ms, cp 35 µs, cd 200 µs, ca 100 ns, B 8192). A request's first
// token waits half a step, then the (ahead + own)/B steps that prefill
// what is ahead of it and its own prompt, each slowed by the decoding
// batch: TTFT = 1.5 c0 + (ahead + own)(cp + c0/B) + 1.5 (D cd + K ca) +
// (ahead + own)/B (D cd + K ca). Its TPOT is a decoding step with the
// batch it shares (the prompts ahead of it are prefilled before its first
// token, so they barely count). Only the prior's shape matters once
// requests finish: the first fit scales it to what they show (another
// model, accelerator, or clock), then learns its departures from it.
var prior = [nTheta]float64{
	tOne: 0.015, tUncached: 0.0362, tPrefill: 0.0362, tDecoding: 0.03, tContext: 0.015,
	tPrefillXD: 0.00244, tPrefillXK: 0.00122, tWaiting: 0.1,
	nTTFT + dOne: 0.010, nTTFT + dBatch: 0.02, nTTFT + dContext: 0.01, nTTFT + dPrefill: 1e-5, nTTFT + dKV: 0.001,
}

// sample is one finished request: the features its decision recorded and
// what was observed (seconds; 0 when not measured).
type sample struct {
	stamp  scheduling.Stamp // the completion's time and the decision id
	x      features
	ttft   float64 // streamed: time to the first token
	tpot   float64 // streamed: mean time per output token after it
	e2e    float64 // not streamed: the whole request
	output float64 // output tokens
}

// rows appends the regression rows of s, with the key's scales applied:
// TTFT and TPOT rows for a streamed request, one end-to-end row
// (TTFT + (output-1) x TPOT) otherwise.
func (s *sample) rows(dst []row, g, h float64) []row {
	if s.ttft > 0 {
		var r row
		for i, v := range s.x.ttft {
			r.x[i] = g * v
		}
		r.y = s.ttft
		dst = append(dst, r)
	}
	if s.tpot > 0 {
		var r row
		for i, v := range s.x.tpot {
			r.x[nTTFT+i] = h * v
		}
		r.y = s.tpot
		dst = append(dst, r)
	}
	if s.e2e > 0 && s.ttft == 0 {
		var r row
		n := max(s.output-1, 0)
		for i, v := range s.x.ttft {
			r.x[i] = g * v
		}
		for i, v := range s.x.tpot {
			r.x[nTTFT+i] = n * h * v
		}
		r.y = s.e2e
		dst = append(dst, r)
	}
	return dst
}

type row struct {
	x [nTheta]float64
	y float64
}

// fit is a fitted model: immutable, read without locks.
type fit struct {
	theta [nTheta]float64
	// scales are the per-key factors of the TTFT and TPOT predictions: a
	// pod (or variant) twice as slow as the pool's shape has 2 in both.
	scales map[string][2]float64
	// meanOutput is the mean output of the finished requests, the expected
	// output of a request that sets no max_tokens.
	meanOutput float64
	samples    int
}

// scale returns the key's factors (1 for a key without samples).
func (f *fit) scale(key string) (g, h float64) {
	if s, ok := f.scales[key]; ok {
		return s[0], s[1]
	}
	return 1, 1
}

// predict returns the predicted TTFT and TPOT, in seconds.
func (f *fit) predict(key string, x *features) (ttft, tpot float64) {
	g, h := f.scale(key)
	for i, v := range x.ttft {
		ttft += f.theta[i] * v
	}
	for i, v := range x.tpot {
		tpot += f.theta[nTTFT+i] * v
	}
	return bounded(g * ttft), bounded(h * tpot)
}

// bounded keeps a prediction in [minPrediction, maxPrediction]: a fit may
// extrapolate below 0, and far-off features above any measurement (NaN,
// which max would let through, counts as too high).
func bounded(seconds float64) float64 {
	if math.IsNaN(seconds) {
		return maxPrediction
	}
	return min(max(seconds, minPrediction), maxPrediction)
}

// delayAdded predicts how much later the requests in flight to an
// endpoint finish, together, when a new request joins them: each decoding
// step they share with it (overlap) is longer by its cost (a sequence, and
// attention over its context), and each request decoding now waits once
// for its uncached prompt's prefill. From the model's coefficients (a
// decode step costs dBatch/100 per sequence and dContext/1e5 per context
// token; a prompt token tUncached/1e3), at the endpoint's speed.
func (f *fit) delayAdded(key string, prompt, uncached, output, overlap, decoding float64) float64 {
	g, h := f.scale(key)
	perSeq := max(f.theta[nTTFT+dBatch], 0) / 100
	perToken := max(f.theta[nTTFT+dContext], 0) / 1e5
	perPrompt := max(f.theta[tUncached], 0) / 1e3
	step := perSeq + perToken*(prompt+output/2)
	return h*step*overlap + g*perPrompt*uncached*decoding
}

// Bounds of a prediction, in seconds: positive, and no longer than any
// measurement may be (maxDuration).
const (
	minPrediction = 1e-5
	maxPrediction = float64(maxDuration / time.Second)
)

// Fit tuning.
const (
	priorRows  = 8 // the prior weighs like this many rows per coefficient
	fitRounds  = 4 // alternations of the shared fit and the keys' scales
	minObserve = 1e-4
)

// model is the online predictor: the newest samples of every key (an
// endpoint, or a variant when the pool's pods are grouped by a label) and
// the fit made from them. Every replica fed the same completions (in any
// order) holds the same samples, hence the same fit.
type model struct {
	window    time.Duration
	perKey    int
	refitGap  time.Duration
	refitRows int
	now       func() time.Time
	metrics   *metricSet

	mu      sync.Mutex
	byKey   map[string][]sample // each sorted by stamp, newest perKey kept
	pending atomic.Int64        // samples since the last fit
	lastFit atomic.Int64        // Unix nanoseconds
	fitting atomic.Bool

	current atomic.Pointer[fit]
}

func newModel(window time.Duration, perKey int, now func() time.Time, metrics *metricSet) *model {
	m := &model{window: window, perKey: perKey, refitGap: 250 * time.Millisecond, refitRows: 64, now: now, byKey: map[string][]sample{}, metrics: metrics}
	m.current.Store(&fit{theta: prior, meanOutput: defaultOutput})
	return m
}

// defaultOutput is the expected output of a request without max_tokens
// before any request finished (vLLM's chat default is open-ended; this is
// a typical answer).
const defaultOutput = 256

// add records a sample under key. It does not fit (callers may hold
// locks); maybeRefit does.
func (m *model) add(key string, s sample) {
	m.mu.Lock()
	l := m.byKey[key]
	i, found := slices.BinarySearchFunc(l, s.stamp, func(a sample, st scheduling.Stamp) int { return a.stamp.Compare(st) })
	switch {
	case found:
		m.mu.Unlock()
		return
	case len(l) >= m.perKey && i == 0:
		m.mu.Unlock()
		return // older than every sample kept
	}
	l = slices.Insert(l, i, s)
	if len(l) > m.perKey {
		l = slices.Delete(l, 0, len(l)-m.perKey)
	}
	m.byKey[key] = l
	m.pending.Add(1)
	m.mu.Unlock()
}

// maybeRefit refits in the background when samples arrived since the
// last fit and either enough did or the last fit is old enough (a fit of
// 20 endpoints' 512 samples takes milliseconds: the completion or request
// that triggers it does not wait for it). Without pending samples it
// costs two atomic loads.
func (m *model) maybeRefit() {
	n := m.pending.Load()
	if n == 0 || (n < int64(m.refitRows) && m.now().UnixNano()-m.lastFit.Load() < int64(m.refitGap)) {
		return
	}
	if m.fitting.CompareAndSwap(false, true) {
		go func() {
			defer m.fitting.Store(false)
			m.fit()
		}()
	}
}

// configure changes the window and the samples kept per key.
func (m *model) configure(window time.Duration, perKey int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.window, m.perKey = window, perKey
	for k, l := range m.byKey {
		if len(l) > perKey {
			m.byKey[k] = slices.Delete(l, 0, len(l)-perKey)
		}
	}
}

// samples returns how many samples the model holds.
func (m *model) samples() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, l := range m.byKey {
		n += len(l)
	}
	return n
}

// drop forgets a key's samples (its endpoint left the pool).
func (m *model) drop(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.byKey, key)
}

// refit fits the model to the samples held now, after any fit under way;
// predictions go on with the previous fit meanwhile.
func (m *model) refit() {
	for !m.fitting.CompareAndSwap(false, true) {
		time.Sleep(time.Millisecond)
	}
	defer m.fitting.Store(false)
	m.fit()
}

// fit fits the model; the caller holds the fitting flag.
func (m *model) fit() {
	m.mu.Lock()
	now := m.now()
	cutoff := now.Add(-m.window).UnixNano()
	keys := make([]string, 0, len(m.byKey))
	for k := range m.byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	byKey := make([][]sample, len(keys))
	for i, k := range keys {
		l := m.byKey[k]
		j, _ := slices.BinarySearchFunc(l, cutoff, func(a sample, c int64) int { return cmp.Compare(a.stamp.Nanos, c) })
		if j > 0 {
			l = slices.Delete(l, 0, j)
			m.byKey[k] = l
		}
		byKey[i] = slices.Clone(l)
	}
	m.pending.Store(0)
	m.lastFit.Store(now.UnixNano())
	m.mu.Unlock()
	start := time.Now()
	m.current.Store(fitSamples(keys, byKey))
	m.metrics.fits.Inc()
	m.metrics.fitTime.Observe(time.Since(start).Seconds())
}

// fitSamples fits the model to the samples of every key. It is a pure
// function of its input: the same samples give the same fit, bit for bit.
//
// The shared coefficients are the prior's, scaled by one factor fitted
// first (the pool's hardware and the clock it is measured in), times
// (1 + d_i) per coefficient, with d a ridge regression pulled towards 0
// (priorRows rows' worth): a coefficient the samples say nothing about
// keeps the prior's shape. Each key then gets two factors (TTFT, TPOT),
// pulled towards 1, fitted to its own samples; the two fits alternate.
// Rows are weighted by 1/y^2, so the fit minimises relative errors.
func fitSamples(keys []string, byKey [][]sample) *fit {
	f := &fit{theta: prior, meanOutput: defaultOutput, scales: make(map[string][2]float64, len(keys))}
	var rows []row
	var outputs, n float64
	for _, l := range byKey {
		for i := range l {
			outputs += l[i].output
			n++
		}
	}
	if n == 0 {
		return f
	}
	f.samples = int(n)
	f.meanOutput = max(outputs/n, 1)
	scales := make([][2]float64, len(keys))
	for i := range scales {
		scales[i] = [2]float64{1, 1}
	}
	build := func() {
		rows = rows[:0]
		for k, l := range byKey {
			for i := range l {
				rows = l[i].rows(rows, scales[k][0], scales[k][1])
			}
		}
	}
	build()
	if len(rows) == 0 {
		return f
	}
	// one factor for the prior's scale
	var num, den float64
	for i := range rows {
		p := dot(&rows[i].x, &prior)
		w := weight(rows[i].y)
		num += w * p * rows[i].y
		den += w * p * p
	}
	alpha := 1.0
	if den > 0 && num > 0 {
		alpha = num / den
	}
	var base [nTheta]float64
	for i := range base {
		base[i] = alpha * prior[i]
	}
	for round := range fitRounds {
		if round > 0 {
			build()
		}
		f.theta = fitShared(rows, &base)
		fits := make([]scaleFit, len(byKey))
		for k, l := range byKey {
			fits[k] = fitScales(l, &f.theta)
		}
		copy(scales, shrinkScales(fits))
	}
	for k, key := range keys {
		f.scales[key] = scales[k]
	}
	f.sanitize(&prior)
	return f
}

// sanitize keeps a fit usable whatever its samples: a coefficient that is
// not finite (samples at the edge of float64) falls back to the prior's,
// a scale that is not finite and positive to 1.
func (f *fit) sanitize(prior *[nTheta]float64) {
	for i, v := range f.theta {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			f.theta[i] = prior[i]
		}
	}
	for key, s := range f.scales {
		for j, v := range s {
			if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
				s[j] = 1
			}
		}
		f.scales[key] = s
	}
}

// fitShared solves for theta = base x (1 + d): with v_i = x_i base_i, the
// rows say y - v.1 = v.d; ridge on d with priorRows rows per coefficient.
func fitShared(rows []row, base *[nTheta]float64) [nTheta]float64 {
	var a [nTheta][nTheta]float64
	var b [nTheta]float64
	var v [nTheta]float64
	for r := range rows {
		var pred float64
		for i := range v {
			v[i] = rows[r].x[i] * base[i]
			pred += v[i]
		}
		w := weight(rows[r].y)
		res := rows[r].y - pred
		for i := range v {
			if v[i] == 0 {
				continue
			}
			wv := w * v[i]
			b[i] += wv * res
			for j := i; j < nTheta; j++ {
				a[i][j] += wv * v[j]
			}
		}
	}
	for i := range a {
		a[i][i] += priorRows
		for j := 0; j < i; j++ {
			a[i][j] = a[j][i]
		}
	}
	d, ok := solve(&a, &b)
	theta := *base
	if !ok {
		return theta
	}
	for i := range theta {
		theta[i] = base[i] * (1 + d[i])
	}
	return theta
}

// scaleFit is a key's TTFT and TPOT factors fitted to its own samples
// alone, with the data's weight behind each (the sum of w a^2: the
// estimate's variance is the residual variance over it).
type scaleFit struct {
	est, info [2]float64
	// sq and n are the key's weighted squared relative residuals and its
	// rows, for the pooled residual variance
	sq, n float64
}

// fitScales fits a key's TTFT and TPOT factors to its samples: y = g x
// (the shared TTFT prediction) + h x (the shared TPOT prediction times the
// tokens it applies to), weighted by 1/y^2. Keys with only unstreamed
// samples get one factor for both (their TTFT and TPOT cannot be told
// apart; a slower accelerator is slower at both).
func fitScales(l []sample, theta *[nTheta]float64) scaleFit {
	type row struct{ at, ad, y float64 }
	rows := make([]row, 0, 2*len(l))
	streamed := false
	for i := range l {
		s := &l[i]
		streamed = streamed || s.ttft > 0 || s.tpot > 0
		var at, ad float64
		for j, v := range s.x.ttft {
			at += theta[j] * v
		}
		for j, v := range s.x.tpot {
			ad += theta[nTTFT+j] * v
		}
		if s.ttft > 0 {
			rows = append(rows, row{at, 0, s.ttft})
		}
		if s.tpot > 0 {
			rows = append(rows, row{0, ad, s.tpot})
		}
		if s.e2e > 0 && s.ttft == 0 {
			rows = append(rows, row{at, max(s.output-1, 0) * ad, s.e2e})
		}
	}
	var a [2][2]float64
	var b [2]float64
	for _, r := range rows {
		w := weight(r.y)
		a[0][0] += w * r.at * r.at
		a[0][1] += w * r.at * r.ad
		a[1][1] += w * r.ad * r.ad
		b[0] += w * r.at * r.y
		b[1] += w * r.ad * r.y
	}
	f := scaleFit{est: [2]float64{1, 1}}
	const eps = 1e-9
	if !streamed {
		den := a[0][0] + 2*a[0][1] + a[1][1]
		if den > eps {
			s := clampScale((b[0] + b[1]) / den)
			f.est, f.info = [2]float64{s, s}, [2]float64{den, den}
		}
	} else {
		det := a[0][0]*a[1][1] - a[0][1]*a[0][1]
		if det > eps {
			f.est = [2]float64{
				clampScale((b[0]*a[1][1] - a[0][1]*b[1]) / det),
				clampScale((a[0][0]*b[1] - a[0][1]*b[0]) / det),
			}
			f.info = [2]float64{a[0][0], a[1][1]}
		}
	}
	for _, r := range rows {
		res := (r.y - f.est[0]*r.at - f.est[1]*r.ad) / max(r.y, minObserve)
		f.sq += res * res
		f.n++
	}
	return f
}

// shrinkScales pulls each key's factors towards the pool's, by how sure
// its own estimate is against how much the keys differ (empirical Bayes):
// with identical pods, a few noisy samples each leave every factor near
// the pool's; a pod that really is slower keeps its factor from a handful
// of samples. The variance of a key's estimate is the pooled residual
// variance over the data's weight behind it; the spread of the true
// factors is what the estimates spread beyond 1.5 times that.
func shrinkScales(fits []scaleFit) [][2]float64 {
	out := make([][2]float64, len(fits))
	var sq, n float64
	for _, f := range fits {
		sq, n = sq+f.sq, n+f.n
	}
	sigma2 := 0.01 // a 10% residual before there are residuals to go by
	if n > 1 {
		sigma2 = max(sq/(n-1), 1e-4)
	}
	for d := range 2 {
		var est, vars []float64
		var idx []int
		for k, f := range fits {
			out[k][d] = 1
			if f.info[d] > 0 {
				est = append(est, f.est[d])
				vars = append(vars, sigma2/f.info[d])
				idx = append(idx, k)
			}
		}
		if len(est) == 0 {
			continue
		}
		// the precision-weighted mean
		var num, den float64
		for i := range est {
			num += est[i] / vars[i]
			den += 1 / vars[i]
		}
		mean := num / den
		tau2 := 0.0
		if len(est) > 1 {
			var spread, meanVar float64
			for i := range est {
				spread += (est[i] - mean) * (est[i] - mean)
				meanVar += vars[i]
			}
			// a spread within 1.5 times what the estimates' own noise
			// makes is taken for noise (with a few keys, the spread of
			// their estimates is itself a noisy measure)
			tau2 = max(spread/float64(len(est)-1)-1.5*meanVar/float64(len(est)), 0)
		}
		for i, k := range idx {
			out[k][d] = clampScale(mean + (est[i]-mean)*tau2/(tau2+vars[i]))
		}
	}
	return out
}

func clampScale(v float64) float64 { return min(max(v, 0.05), 20) }

// weight is a row's weight: 1/y^2, so that residuals count relative to
// what was observed.
func weight(y float64) float64 {
	y = max(y, minObserve)
	return 1 / (y * y)
}

func dot(a, b *[nTheta]float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// solve solves a x = b for a symmetric positive definite a (Cholesky);
// ok is false when a is not.
func solve(a *[nTheta][nTheta]float64, b *[nTheta]float64) (x [nTheta]float64, ok bool) {
	var l [nTheta][nTheta]float64
	for i := range nTheta {
		for j := 0; j <= i; j++ {
			s := a[i][j]
			for k := range j {
				s -= l[i][k] * l[j][k]
			}
			if i == j {
				if s <= 0 || math.IsNaN(s) {
					return x, false
				}
				l[i][i] = math.Sqrt(s)
			} else {
				l[i][j] = s / l[j][j]
			}
		}
	}
	var y [nTheta]float64
	for i := range nTheta {
		s := b[i]
		for k := range i {
			s -= l[i][k] * y[k]
		}
		y[i] = s / l[i][i]
	}
	for i := nTheta - 1; i >= 0; i-- {
		s := y[i]
		for k := i + 1; k < nTheta; k++ {
			s -= l[k][i] * x[k]
		}
		x[i] = s / l[i][i]
	}
	return x, true
}
