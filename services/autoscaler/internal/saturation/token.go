package saturation

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hermod/hermod/services/autoscaler/internal/scaling"
)

// historyWindow is how many observed capacities the rolling average keeps
// per model|accelerator|output bucket.
const historyWindow = 10

// The engine's batching defaults, used when a variant leaves them 0.
const (
	defaultMaxNumBatchedTokens = 8192
	defaultMaxNumSeqs          = 256
)

// outputBucket classes a workload by its average output tokens: the
// compute-bound capacity of a server depends on it.
type outputBucket uint8

const (
	bucketShort  outputBucket = iota // < 100 output tokens (and unknown)
	bucketMedium                     // < 500
	bucketLong                       // >= 500
)

func bucketOf(outputTokens float64) outputBucket {
	switch {
	case outputTokens < 100:
		return bucketShort
	case outputTokens < 500:
		return bucketMedium
	default:
		return bucketLong
	}
}

func (b outputBucket) String() string {
	switch b {
	case bucketShort:
		return "short"
	case bucketMedium:
		return "medium"
	default:
		return "long"
	}
}

type historyKey struct {
	model       string
	accelerator string
	bucket      outputBucket
}

// window is a rolling window of the last historyWindow observations.
type window struct {
	vals [historyWindow]float64
	n    int // values held, <= historyWindow
	next int // slot the next push writes
}

func (w *window) push(x float64) {
	w.vals[w.next] = x
	w.next = (w.next + 1) % historyWindow
	w.n = min(w.n+1, historyWindow)
}

func (w *window) avg() float64 {
	if w.n == 0 {
		return 0
	}
	var sum float64
	for _, x := range w.vals[:w.n] {
		sum += x
	}
	return sum / float64(w.n)
}

type capacityKey struct {
	model     string
	namespace string
	variant   string
	role      scaling.Role
}

// k2 sources, in the order of the spec's priority chain.
type k2Source uint8

const (
	k2None     k2Source = iota
	k2Observed          // (a) tokens in use of a replica with a saturated queue
	k2History           // (b) rolling average of observations
	k2Derived           // (c) steady-state batching model
	k2KV                // (d) k1
)

// roles in output order.
var roleOrder = [...]scaling.Role{scaling.RoleBoth, scaling.RolePrefill, scaling.RoleDecode}

// TokenAnalyzer is the token based saturation analyzer (experimental in
// reference/004). It keeps state between analyses, which is why it is a
// type: the rolling averages of observed compute-bound capacities (the last
// 10 per model|accelerator|output bucket, buckets < 100, < 500 and >= 500
// average output tokens) and the last known per-replica capacity of every
// variant and role, so a variant scaled to zero still has one.
//
// The zero value is ready to use; methods are safe for concurrent use.
type TokenAnalyzer struct {
	mu       sync.Mutex
	history  map[historyKey]*window
	capacity map[capacityKey]float64
	// lastObs is the snapshot time (Model.Now) of each replica's last
	// pushed observation, per model, so analyzing one snapshot twice does
	// not push its observations twice.
	lastObs map[string]map[replicaKey]time.Time
}

// replicaKey names a replica within a model.
type replicaKey struct{ variant, replica string }

// NewTokenAnalyzer returns an analyzer with empty history and cache.
func NewTokenAnalyzer() *TokenAnalyzer {
	t := &TokenAnalyzer{}
	t.init()
	return t
}

func (t *TokenAnalyzer) init() {
	if t.history == nil {
		t.history = map[historyKey]*window{}
		t.capacity = map[capacityKey]float64{}
		t.lastObs = map[string]map[replicaKey]time.Time{}
	}
}

// Forget drops the history and cached capacities of a model (when its
// variants are deleted).
func (t *TokenAnalyzer) Forget(modelID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.init()
	for k := range t.history {
		if k.model == modelID {
			delete(t.history, k)
		}
	}
	for k := range t.capacity {
		if k.model == modelID {
			delete(t.capacity, k)
		}
	}
	delete(t.lastObs, modelID)
}

// replicaEval is one replica's cleaned inputs and derived capacity.
type replicaEval struct {
	role      scaling.Role
	inUse     float64
	queue     float64
	in, out   float64
	hit       float64
	k1, k2    float64
	src       k2Source
	capacity  float64 // 0: unknown
	demand    float64
	histKey   historyKey
	replicaID replicaKey
}

// tokenAverages are average input/output tokens and prefix hit rate over
// the replicas that report them (0: unknown). The hit rate is averaged over
// the replicas that do prefill (RoleBoth, RolePrefill) and report input
// tokens, or over every replica reporting input tokens when none does:
// a decode replica's hit rate says nothing about prefill work.
type tokenAverages struct{ in, out, hit float64 }

func averagesOf(evals []*replicaEval) tokenAverages {
	var sumIn, sumOut, sumHit, sumHitAll float64
	var nIn, nOut, nHit int
	for _, e := range evals {
		if e.in > 0 {
			sumIn += e.in
			sumHitAll += e.hit
			nIn++
			if e.role != scaling.RoleDecode {
				sumHit += e.hit
				nHit++
			}
		}
		if e.out > 0 {
			sumOut += e.out
			nOut++
		}
	}
	var a tokenAverages
	if nIn > 0 {
		a.in = sumIn / float64(nIn)
		a.hit = sumHitAll / float64(nIn)
	}
	if nHit > 0 {
		a.hit = sumHit / float64(nHit)
	}
	if nOut > 0 {
		a.out = sumOut / float64(nOut)
	}
	return a
}

func (a tokenAverages) known() bool { return a.in > 0 && a.out > 0 }

// Analyze is the token based saturation analyzer: one Analysis per role
// present (scaling.RoleBoth; or RolePrefill and RoleDecode, computed
// separately, when replicas carry roles), in capacities of KV tokens.
//
// Per ready replica: k1 = KVCapacityTokens x c.KVCacheThreshold; k2 = the
// first available of (a) TokensInUse when Queue >= c.QueueLengthThreshold
// (observed, and pushed into the rolling average of its
// model|accelerator|output bucket), (b) that rolling average, (c) the
// steady-state batching model min(B x O/(I+O), S) x (I + O/2) with B and S
// the variant's MaxNumBatchedTokens and MaxNumSeqs (0: 8192 and 256) and
// I, O the replica's average input and output tokens (both known), (d) k1.
// Capacity = min(k1, k2); a replica whose KV capacity is unknown (0) has
// capacity k2 from (a)-(c), and none if those are unavailable too.
//
// Demand per replica = TokensInUse + Queue x (I + O) (prefill replicas:
// Queue x I), with the model's average I or O for a replica that reports
// none. The gateway queue q adds q x I x (1 - prefix hit rate) + q x O
// with the model's averages; under disaggregation the I part goes to the
// prefill role and the O part to the decode role (a part whose role is
// absent goes to RoleBoth, else to the other role).
//
// Per variant capacity = the median over its ready replicas' capacities,
// cached per variant and role; a variant without a known capacity uses the
// cached one, else an estimate from (c) with the role's (or model's)
// average tokens, else it is absent from VariantCapacity and its replicas
// add no supply. A variant with no replicas belongs to the roles it has
// cached capacities for, else to RoleBoth (so under disaggregation, where
// RoleBoth is not analyzed, such a variant is absent). Supply = the sum
// over variants of ready x capacity; anticipated supply adds pending x
// capacity (pending replicas count for the variant's majority role). Then
// Required = max(0, demand/c.ScaleUpThreshold - anticipated supply) and
// Spare = max(0, supply - demand/c.ScaleDownBoundary). SkipPending is false.
//
// Non-finite or negative inputs count as 0 (unknown), fields of c that are
// not positive take their defaults; outputs are finite and non-negative.
// Analyzing the same snapshot (same non-zero Model.Now) twice pushes its
// observations once.
func (t *TokenAnalyzer) Analyze(m *scaling.Model, c TokenConfig) []scaling.Analysis {
	if m == nil {
		return nil
	}
	c = c.withDefaults()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.init()

	variants := make([]*scaling.Variant, 0, len(m.Variants))
	for _, v := range m.Variants {
		if v != nil {
			variants = append(variants, v)
		}
	}

	// Clean the inputs. The observations are all pushed before any
	// replica's k2 chain runs, so that history lookups see this snapshot's
	// observations whatever the replica order.
	evals := make([][]replicaEval, len(variants))
	var all []*replicaEval
	for vi, v := range variants {
		evals[vi] = make([]replicaEval, len(v.Replicas))
		for ri := range v.Replicas {
			r := &v.Replicas[ri]
			e := &evals[vi][ri]
			*e = replicaEval{
				role:      normRole(r.Role),
				inUse:     clean(r.TokensInUse),
				queue:     clean(r.Queue),
				in:        clean(r.AvgInputTokens),
				out:       clean(r.AvgOutputTokens),
				hit:       ratio(r.PrefixHitRate),
				k1:        clean(r.KVCapacityTokens) * c.KVCacheThreshold,
				replicaID: replicaKey{v.Name, r.Name},
			}
			all = append(all, e)
		}
	}
	// A replica that reports no output tokens is bucketed by the model's
	// average.
	model := averagesOf(all)
	for vi, v := range variants {
		for ri := range evals[vi] {
			e := &evals[vi][ri]
			out := e.out
			if out == 0 {
				out = model.out
			}
			e.histKey = historyKey{model: m.ID, accelerator: v.Accelerator, bucket: bucketOf(out)}
		}
	}
	t.observe(m, all, c)

	for vi, v := range variants {
		for ri := range evals[vi] {
			t.evaluate(&evals[vi][ri], v, model)
		}
	}

	// Roles present: the replicas', plus the cached roles of variants
	// without replicas; RoleBoth when there are none.
	present := map[scaling.Role]bool{}
	for _, e := range all {
		present[e.role] = true
	}
	for _, v := range variants {
		if len(v.Replicas) == 0 {
			for _, role := range t.cachedRoles(m, v) {
				present[role] = true
			}
		}
	}
	if len(present) == 0 {
		present[scaling.RoleBoth] = true
	}

	gw := gatewayDemand(m, model, present)
	out := make([]scaling.Analysis, 0, len(present))
	for _, role := range roleOrder {
		if present[role] {
			out = append(out, t.analyzeRole(m, c, role, variants, evals, model, gw))
		}
	}
	return out
}

// observe pushes the observed capacities (tokens in use of replicas whose
// queue is saturated) into the rolling averages, once per replica and
// snapshot time, and sets them as those replicas' k2.
func (t *TokenAnalyzer) observe(m *scaling.Model, all []*replicaEval, c TokenConfig) {
	last := t.lastObs[m.ID]
	if last == nil {
		last = map[replicaKey]time.Time{}
		t.lastObs[m.ID] = last
	}
	seen := make(map[replicaKey]struct{}, len(all))
	var pushed []replicaKey
	for _, e := range all {
		seen[e.replicaID] = struct{}{}
		if e.queue < c.QueueLengthThreshold || e.inUse <= 0 {
			continue
		}
		e.k2, e.src = e.inUse, k2Observed
		// Compare with the previous calls' records only (updates are
		// applied after the loop), so replicas sharing a name all count.
		if prev, ok := last[e.replicaID]; ok && !m.Now.IsZero() && prev.Equal(m.Now) {
			continue // this snapshot was pushed already
		}
		w := t.history[e.histKey]
		if w == nil {
			w = &window{}
			t.history[e.histKey] = w
		}
		w.push(e.inUse)
		pushed = append(pushed, e.replicaID)
	}
	for _, id := range pushed {
		last[id] = m.Now
	}
	for id := range last {
		if _, ok := seen[id]; !ok {
			delete(last, id)
		}
	}
}

// evaluate completes a replica's k2 chain, capacity and demand.
func (t *TokenAnalyzer) evaluate(e *replicaEval, v *scaling.Variant, model tokenAverages) {
	if e.src == k2None {
		if w := t.history[e.histKey]; w != nil && w.n > 0 {
			e.k2, e.src = w.avg(), k2History
		} else if e.in > 0 && e.out > 0 {
			e.k2, e.src = derivedCapacity(v, e.in, e.out), k2Derived
		} else if e.k1 > 0 {
			e.k2, e.src = e.k1, k2KV
		}
	}
	switch {
	case e.k1 > 0 && e.k2 > 0:
		e.capacity = min(e.k1, e.k2)
	case e.k1 > 0:
		e.capacity = e.k1
	default:
		e.capacity = e.k2 // 0 when unknown
	}

	in, out := e.in, e.out
	if in == 0 {
		in = model.in
	}
	if out == 0 {
		out = model.out
	}
	if e.role == scaling.RolePrefill {
		e.demand = e.inUse + e.queue*in
	} else {
		e.demand = e.inUse + e.queue*(in+out)
	}
}

// derivedCapacity is k2 (c): a steady-state batch of
// n = min(B x O/(I+O), S) sequences, each holding I + O/2 tokens on average.
func derivedCapacity(v *scaling.Variant, in, out float64) float64 {
	if !(in > 0 && out > 0) {
		return 0
	}
	b, s := float64(defaultMaxNumBatchedTokens), float64(defaultMaxNumSeqs)
	if v.MaxNumBatchedTokens > 0 {
		b = float64(v.MaxNumBatchedTokens)
	}
	if v.MaxNumSeqs > 0 {
		s = float64(v.MaxNumSeqs)
	}
	return min(b*out/(in+out), s) * (in + out/2)
}

// gatewayShare is the gateway queue's demand in tokens, per role.
type gatewayShare struct {
	queued  float64
	byRole  map[scaling.Role]float64
	inPart  float64
	outPart float64
	inRole  scaling.Role
	outRole scaling.Role
	avg     tokenAverages
}

// gatewayDemand splits q x I x (1 - hit) + q x O over the roles present:
// the I part to prefill, else RoleBoth, else decode; the O part to decode,
// else RoleBoth, else prefill.
func gatewayDemand(m *scaling.Model, avg tokenAverages, present map[scaling.Role]bool) gatewayShare {
	g := gatewayShare{queued: clean(m.GatewayQueue), byRole: map[scaling.Role]float64{}, avg: avg}
	g.inRole = firstPresent(present, scaling.RolePrefill, scaling.RoleBoth, scaling.RoleDecode)
	g.outRole = firstPresent(present, scaling.RoleDecode, scaling.RoleBoth, scaling.RolePrefill)
	if g.queued == 0 {
		return g
	}
	g.inPart = g.queued * avg.in * (1 - avg.hit)
	g.outPart = g.queued * avg.out
	g.byRole[g.inRole] += g.inPart
	g.byRole[g.outRole] += g.outPart
	return g
}

func firstPresent(present map[scaling.Role]bool, roles ...scaling.Role) scaling.Role {
	for _, r := range roles {
		if present[r] {
			return r
		}
	}
	return scaling.RoleBoth
}

// analyzeRole computes one role's Analysis.
func (t *TokenAnalyzer) analyzeRole(m *scaling.Model, c TokenConfig, role scaling.Role,
	variants []*scaling.Variant, evals [][]replicaEval, model tokenAverages, gw gatewayShare,
) scaling.Analysis {
	a := scaling.Analysis{
		ModelID:         m.ID,
		Role:            role,
		Analyzer:        TokenAnalyzerName,
		Priority:        1,
		VariantCapacity: map[string]float64{},
	}

	var group []*replicaEval
	for vi := range evals {
		for ri := range evals[vi] {
			if evals[vi][ri].role == role {
				group = append(group, &evals[vi][ri])
			}
		}
	}
	avg := averagesOf(group)
	if !avg.known() {
		avg = model
	}

	var replicaDemand float64
	var sources [k2KV + 1]int
	for _, e := range group {
		replicaDemand += e.demand
		sources[e.src]++
	}

	sup := t.roleSupply(m, role, variants, evals, avg, len(group), a.VariantCapacity)
	supply, pendingSupply, readyTotal, pendingTotal, variantReasons := sup.ready, sup.pending, sup.readyReplicas, sup.pendingReplicas, sup.reasons
	gwDemand := gw.byRole[role]
	demand := replicaDemand + gwDemand
	anticipated := supply + pendingSupply
	a.Demand = nonNeg(demand)
	a.Supply = nonNeg(supply)
	a.Required = nonNeg(demand/c.ScaleUpThreshold - anticipated)
	a.Spare = nonNeg(supply - demand/c.ScaleDownBoundary)
	if a.Required > 0 {
		a.Spare = 0 // only with a ScaleDownBoundary above ScaleUpThreshold
	}

	a.Reasons = append(a.Reasons, fmt.Sprintf(
		"demand %.0f tokens (%d replicas %.0f + gateway %.0f), supply %.0f (%d ready), anticipated %.0f (+%d pending)",
		demand, len(group), replicaDemand, gwDemand, supply, readyTotal, anticipated, pendingTotal))
	a.Reasons = append(a.Reasons, fmt.Sprintf(
		"required = max(0, %.0f/%g - %.0f) = %.0f; spare = max(0, %.0f - %.0f/%g) = %.0f",
		demand, c.ScaleUpThreshold, anticipated, a.Required, supply, demand, c.ScaleDownBoundary, a.Spare))
	if len(group) > 0 {
		a.Reasons = append(a.Reasons, fmt.Sprintf("k2 from: observed %d, history %d, derived %d, k1 %d, unknown %d",
			sources[k2Observed], sources[k2History], sources[k2Derived], sources[k2KV], sources[k2None]))
	}
	if r, ok := gw.reason(role); ok {
		a.Reasons = append(a.Reasons, r)
	}
	a.Reasons = append(a.Reasons, variantReasons...)
	return a
}

// roleSupply is what one role's replicas can serve.
type roleSupply struct {
	// ready and pending are the tokens the ready and the pending replicas
	// serve; readyReplicas and pendingReplicas count them.
	ready, pending                 float64
	readyReplicas, pendingReplicas int
	// reasons say, variant by variant, how the figures were reached.
	reasons []string
}

// roleSupply sums the capacity of each variant's replicas in role (a
// variant's capacity: the median of its replicas', else the cached one,
// else derived from the token averages), recording it in capacity.
func (t *TokenAnalyzer) roleSupply(m *scaling.Model, role scaling.Role, variants []*scaling.Variant, evals [][]replicaEval,
	avg tokenAverages, groupSize int, capacity map[string]float64,
) roleSupply {
	var out roleSupply
	caps := make([]float64, 0, groupSize)
	for vi, v := range variants {
		ready := 0
		caps = caps[:0]
		for ri := range evals[vi] {
			e := &evals[vi][ri]
			if e.role != role {
				continue
			}
			ready++
			if e.capacity > 0 {
				caps = append(caps, e.capacity)
			}
		}
		key := t.capacityKey(m, v, role)
		cached, isCached := t.capacity[key]
		if ready == 0 {
			if len(v.Replicas) > 0 {
				continue // its replicas serve another role
			}
			if !isCached && (role != scaling.RoleBoth || len(t.cachedRoles(m, v)) > 0) {
				continue // no replicas: belongs to its cached roles, else RoleBoth
			}
		}
		pending := 0
		if t.primaryRole(m, v) == role {
			pending = v.Pending()
		}
		var perReplica float64
		var how string
		switch {
		case len(caps) > 0:
			perReplica = median(caps)
			t.capacity[key] = perReplica
			how = fmt.Sprintf("median of %d replicas", len(caps))
		case isCached:
			perReplica, how = cached, "cached"
		case avg.known():
			perReplica = derivedCapacity(v, avg.in, avg.out)
			how = fmt.Sprintf("estimated from avg %.0f in / %.0f out tokens", avg.in, avg.out)
		}
		out.readyReplicas += ready
		out.pendingReplicas += pending
		if !(perReplica > 0) {
			if ready > 0 || pending > 0 {
				out.reasons = append(out.reasons, fmt.Sprintf(
					"variant %s: %d ready, %d pending, capacity unknown (not counted in supply)", v.Name, ready, pending))
			}
			continue
		}
		capacity[v.Name] = perReplica
		out.ready += float64(ready) * perReplica
		out.pending += float64(pending) * perReplica
		out.reasons = append(out.reasons, fmt.Sprintf(
			"variant %s: %d ready, %d pending, %.0f tokens/replica (%s)", v.Name, ready, pending, perReplica, how))
	}
	return out
}

// reason says what the gateway's queue adds to role's demand, when it
// adds to it.
func (gw gatewayShare) reason(role scaling.Role) (string, bool) {
	if gw.queued <= 0 || (role != gw.inRole && role != gw.outRole) {
		return "", false
	}
	switch {
	case gw.avg.in == 0 && gw.avg.out == 0:
		return fmt.Sprintf("gateway queue %.0f: token averages unknown, not counted", gw.queued), true
	case gw.inRole == gw.outRole:
		return fmt.Sprintf("gateway queue %.0f x (%.0f in x (1 - hit %.2f) + %.0f out) = %.0f",
			gw.queued, gw.avg.in, gw.avg.hit, gw.avg.out, gw.inPart+gw.outPart), true
	case role == gw.inRole:
		return fmt.Sprintf("gateway queue %.0f x %.0f in x (1 - hit %.2f) = %.0f (input part)",
			gw.queued, gw.avg.in, gw.avg.hit, gw.inPart), true
	}
	return fmt.Sprintf("gateway queue %.0f x %.0f out = %.0f (output part)", gw.queued, gw.avg.out, gw.outPart), true
}

func (t *TokenAnalyzer) capacityKey(m *scaling.Model, v *scaling.Variant, role scaling.Role) capacityKey {
	ns := v.Namespace
	if ns == "" {
		ns = m.Namespace
	}
	return capacityKey{model: m.ID, namespace: ns, variant: v.Name, role: role}
}

// cachedRoles are the roles a variant has cached capacities for.
func (t *TokenAnalyzer) cachedRoles(m *scaling.Model, v *scaling.Variant) []scaling.Role {
	var roles []scaling.Role
	for _, role := range roleOrder {
		if _, ok := t.capacity[t.capacityKey(m, v, role)]; ok {
			roles = append(roles, role)
		}
	}
	return roles
}

// primaryRole is the role a variant's pending replicas will serve: its
// replicas' majority role (ties in roleOrder), else its first cached role,
// else RoleBoth.
func (t *TokenAnalyzer) primaryRole(m *scaling.Model, v *scaling.Variant) scaling.Role {
	if len(v.Replicas) == 0 {
		if roles := t.cachedRoles(m, v); len(roles) > 0 {
			return roles[0]
		}
		return scaling.RoleBoth
	}
	var count [len(roleOrder)]int
	for i := range v.Replicas {
		count[slices.Index(roleOrder[:], normRole(v.Replicas[i].Role))]++
	}
	best := 0
	for i := range count {
		if count[i] > count[best] {
			best = i
		}
	}
	return roleOrder[best]
}

// normRole maps an unknown role to RoleBoth.
func normRole(r scaling.Role) scaling.Role {
	switch r {
	case scaling.RolePrefill, scaling.RoleDecode:
		return r
	default:
		return scaling.RoleBoth
	}
}

// median of a non-empty slice, which it sorts; the mean of the two middle
// values for an even count.
func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
