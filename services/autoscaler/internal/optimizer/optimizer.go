// Package optimizer turns the analyzers' capacity signals
// (scaling.Analysis) into per-variant replica targets (scaling.Target).
//
// Two modes exist. CostAware (the default) plans every model on its own
// with no limit but the variants' maxReplicas. GreedyByScore (enableLimiter)
// plans all models together under a GPU budget per accelerator type, which
// they share in proportion to priority x remaining required capacity.
// Both are pure functions of their inputs and deterministic.
//
// # Which variants an analysis covers
//
// An analysis covers the variants it gives a positive, finite capacity for
// in VariantCapacity, whose replicas serve its role: for a prefill or decode
// analysis a variant with replicas must have at least one replica of that
// role (a variant with no replicas cannot be told apart and counts as
// serving every role); a scaling.RoleBoth analysis covers every variant
// with a capacity. A variant without a capacity entry is never scaled by
// that analysis (its per-replica capacity, hence its replica count, is
// unknown) and does not count in it. This is how the analyzers map roles:
// the token analyzer lists a role's variants only, the percentage analyzer
// lists every variant with capacity 1.
//
// # Scale up
//
// The covered variants are ordered by Cost / capacity, lowest first (ties by
// name, ascending). With SkipPending a variant with pending replicas is
// skipped. The first variant gets ceil(required / capacity) replicas,
// capped by its maxReplicas; the required capacity its added replicas do
// not cover spills to the next variant, and so on. A ratio within 1e-9 of a
// whole number counts as that number (floating-point noise does not cost a
// replica).
//
// # Scale down
//
// The covered variants are ordered by Cost, most expensive first (ties by
// name, descending: the exact reverse of cheapest-first, so the cheapest
// variant comes last). Each loses floor(spare / capacity) replicas, but
// keeps at least
//
//   - its minReplicas;
//   - ScaleDownMinCurrent (a variant with that many replicas or fewer loses
//     none: the percentage analyzer's "more than one replica");
//   - one replica if it is the cheapest covered variant (lowest Cost, ties
//     by name ascending) while other covered variants run;
//   - one replica if no other covered variant runs: the optimizer never
//     removes the last replica; only the enforcer's scale to zero takes a
//     model to zero.
//
// The spare capacity its removed replicas do not account for spills to the
// next most expensive variant. A scale-down never adds replicas.
//
// # Several analyses per model
//
// Analyses whose ModelID is set and differs from the model's are ignored.
// Hold makes that analysis change nothing (the others still apply). A
// signal that is not a finite number is ignored. When Required and Spare
// are both positive, Required wins. Scale-ups apply first, then
// scale-downs, each ordered by (Role, Analyzer) and each starting from the
// targets the previous ones left; a scale-down never takes replicas from a
// variant a scale-up raised in the same decision (a variant does not grow
// and shrink at once).
package optimizer

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/hermod/hermod/services/autoscaler/internal/scaling"
)

// ratioEps is the tolerance of the whole-replica rounding: a ratio within
// it of a whole number counts as that number.
const ratioEps = 1e-9

// CostAware plans one model's variants from its analyses, without a
// resource limit (see the package documentation for the rules). It returns
// one target per variant of m, in m.Variants order, with Desired ==
// Current for a variant it does not change; nil for a nil model.
func CostAware(m *scaling.Model, as []scaling.Analysis) []scaling.Target {
	if m == nil {
		return nil
	}
	p := newPlan(m)
	ups, downs := p.signals(m, as)
	for _, a := range ups {
		p.scaleUp(a)
	}
	for _, a := range downs {
		p.scaleDown(a)
	}
	return p.targets()
}

// plan is one model's targets while the optimizer builds them.
type plan struct {
	vars    []*scaling.Variant
	desired []int
	// raised marks variants a scale-up added replicas to.
	raised []bool
	notes  [][]string
}

func newPlan(m *scaling.Model) *plan {
	n := len(m.Variants)
	p := &plan{
		vars:    m.Variants,
		desired: make([]int, n),
		raised:  make([]bool, n),
		notes:   make([][]string, n),
	}
	for i, v := range m.Variants {
		if v != nil {
			p.desired[i] = v.Current
		}
	}
	return p
}

func (p *plan) note(i int, s string) { p.notes[i] = append(p.notes[i], s) }

func (p *plan) add(i, n int) {
	p.desired[i] += n
	p.raised[i] = true
}

// headroom is how many replicas variant i may still add.
func (p *plan) headroom(i int) int { return max(0, p.vars[i].MaxReplicas-p.desired[i]) }

func (p *plan) targets() []scaling.Target {
	out := make([]scaling.Target, 0, len(p.vars))
	for i, v := range p.vars {
		if v == nil {
			continue
		}
		reason := "no change"
		if len(p.notes[i]) > 0 {
			reason = strings.Join(p.notes[i], "; ")
		}
		out = append(out, scaling.Target{Variant: v.Name, Current: v.Current, Desired: p.desired[i], Reason: reason})
	}
	return out
}

// signals splits a model's analyses into the scale-ups and scale-downs to
// apply, in order, and notes holds and ignored signals on the variants.
func (p *plan) signals(m *scaling.Model, as []scaling.Analysis) (ups, downs []scaling.Analysis) {
	for _, a := range as {
		switch {
		case a.ModelID != "" && a.ModelID != m.ID:
			continue
		case a.Hold:
			for _, i := range p.covered(a) {
				p.note(i, tag(a)+"hold: the analyzer asks for no change (a variant is in transition)")
			}
		case !finite(a.Required) || !finite(a.Spare):
			for _, i := range p.covered(a) {
				p.note(i, tag(a)+"signal ignored: required or spare is not a finite number")
			}
		case a.Required > 0:
			ups = append(ups, a)
		case a.Spare > 0:
			downs = append(downs, a)
		}
	}
	byRole := func(x, y scaling.Analysis) int {
		if c := cmp.Compare(x.Role, y.Role); c != 0 {
			return c
		}
		return cmp.Compare(x.Analyzer, y.Analyzer)
	}
	slices.SortStableFunc(ups, byRole)
	slices.SortStableFunc(downs, byRole)
	return ups, downs
}

// serves reports whether v's replicas serve role r (a variant without
// replicas serves every role).
func serves(v *scaling.Variant, r scaling.Role) bool {
	if r == scaling.RoleBoth || len(v.Replicas) == 0 {
		return true
	}
	for i := range v.Replicas {
		if v.Replicas[i].Role == r {
			return true
		}
	}
	return false
}

// capacityOf is one replica's capacity of v in a's unit, if known.
func capacityOf(a scaling.Analysis, v *scaling.Variant) (float64, bool) {
	c, ok := a.VariantCapacity[v.Name]
	return c, ok && c > 0 && !math.IsInf(c, 1)
}

// covered lists the variants a covers, in m.Variants order.
func (p *plan) covered(a scaling.Analysis) []int {
	var idx []int
	for i, v := range p.vars {
		if v == nil {
			continue
		}
		if _, ok := capacityOf(a, v); !ok {
			continue
		}
		if !serves(v, a.Role) {
			p.note(i, fmt.Sprintf("%snot scaled: its replicas do not serve the %s role", tag(a), a.Role))
			continue
		}
		idx = append(idx, i)
	}
	return idx
}

// cand is a scale-up candidate: variant i with one replica's capacity.
type cand struct {
	i        int
	capacity float64
}

// upCandidates are a's covered variants in scale-up order (Cost / capacity,
// then name), without those skipped for pending replicas.
func (p *plan) upCandidates(a scaling.Analysis) []cand {
	var cs []cand
	for _, i := range p.covered(a) {
		v := p.vars[i]
		if a.SkipPending && v.Pending() > 0 {
			p.note(i, fmt.Sprintf("%snot scaled up: %d replicas pending", tag(a), v.Pending()))
			continue
		}
		c, _ := capacityOf(a, v)
		cs = append(cs, cand{i: i, capacity: c})
	}
	slices.SortFunc(cs, func(x, y cand) int {
		vx, vy := p.vars[x.i], p.vars[y.i]
		if c := cmp.Compare(vx.Cost/x.capacity, vy.Cost/y.capacity); c != 0 {
			return c
		}
		return cmp.Compare(vx.Name, vy.Name)
	})
	return cs
}

// scaleUp applies one scale-up analysis without a resource limit.
func (p *plan) scaleUp(a scaling.Analysis) {
	t := tag(a)
	rem := a.Required
	cs := p.upCandidates(a)
	for j, c := range cs {
		if ceilReplicas(rem, c.capacity, 1) == 0 {
			return // met
		}
		maxR := p.vars[c.i].MaxReplicas
		head := p.headroom(c.i)
		if head == 0 {
			p.note(c.i, fmt.Sprintf("%snot scaled up: at maxReplicas %d", t, maxR))
			continue
		}
		want := ceilReplicas(rem, c.capacity, math.MaxInt)
		n := min(want, head)
		before := rem
		p.add(c.i, n)
		rem -= float64(n) * c.capacity
		s := fmt.Sprintf("%sscale up +%d: required %s at %s per replica, ceil(%s) = %d",
			t, n, num(before), num(c.capacity), num(before/c.capacity), want)
		if n < want {
			s += fmt.Sprintf(", capped by maxReplicas %d", maxR)
			if j < len(cs)-1 {
				s += fmt.Sprintf("; %s spills to the next variant", num(rem))
			}
		}
		p.note(c.i, s)
	}
	if len(cs) > 0 && ceilReplicas(rem, cs[0].capacity, 1) > 0 {
		p.note(cs[0].i, fmt.Sprintf("%s%s of required %s not met: no variant can add replicas",
			t, num(rem), num(a.Required)))
	}
}

// scaleDown applies one scale-down analysis.
func (p *plan) scaleDown(a scaling.Analysis) {
	t := tag(a)
	idx := p.covered(a)
	if len(idx) == 0 {
		return
	}
	// Most expensive first; ties by name descending, so that the cheapest
	// (lowest Cost, then name) comes last.
	slices.SortFunc(idx, func(x, y int) int {
		if c := cmp.Compare(p.vars[y].Cost, p.vars[x].Cost); c != 0 {
			return c
		}
		return cmp.Compare(p.vars[y].Name, p.vars[x].Name)
	})
	cheapest := idx[len(idx)-1]
	rem := a.Spare
	for j, i := range idx {
		if !(rem > 0) {
			return
		}
		c, _ := capacityOf(a, p.vars[i])
		if p.desired[i] <= 0 {
			continue // nothing to remove
		}
		if p.raised[i] {
			p.note(i, t+"not scaled down: a scale-up raised it in this decision")
			continue
		}
		k := floorReplicas(rem, c, math.MaxInt)
		if k == 0 {
			p.note(i, fmt.Sprintf("%snot scaled down: spare %s is less than one replica (%s)", t, num(rem), num(c)))
			continue
		}
		keep, why := p.keepAtLeast(i, idx, cheapest, a)
		n := min(k, p.desired[i]-keep)
		if n <= 0 {
			p.note(i, fmt.Sprintf("%snot scaled down: %d replicas, keeps %d (%s)", t, p.desired[i], keep, why))
			continue
		}
		before := rem
		p.desired[i] -= n
		rem -= float64(n) * c
		s := fmt.Sprintf("%sscale down -%d: spare %s at %s per replica, floor(%s) = %d",
			t, n, num(before), num(c), num(before/c), k)
		if n < k {
			s += fmt.Sprintf(", keeps %d (%s)", keep, why)
		}
		if rem > 0 && j < len(idx)-1 {
			s += fmt.Sprintf("; %s spare left for cheaper variants", num(rem))
		}
		p.note(i, s)
	}
}

// keepAtLeast is the replica count variant i keeps under a scale-down by a
// (idx: the variants a covers), and why.
func (p *plan) keepAtLeast(i int, idx []int, cheapest int, a scaling.Analysis) (int, string) {
	keep, why := 0, ""
	if m := p.vars[i].MinReplicas; m > keep {
		keep, why = m, fmt.Sprintf("minReplicas %d", m)
	}
	if s := a.ScaleDownMinCurrent; s > keep {
		keep, why = s, fmt.Sprintf("a scale-down only takes from a variant with more than %d replicas", s)
	}
	if keep >= 1 {
		return keep, why
	}
	others := 0
	for _, j := range idx {
		if j != i {
			others += max(0, p.desired[j])
		}
	}
	switch {
	case others == 0:
		return 1, "the last running replica: only scale to zero removes it"
	case i == cheapest:
		return 1, "the cheapest variant keeps one replica while other variants run"
	}
	return 0, ""
}

// ceilReplicas is ceil(x / c), within ratioEps, in [0, limit].
func ceilReplicas(x, c float64, limit int) int { return clampReplicas(math.Ceil(x/c-ratioEps), limit) }

// floorReplicas is floor(x / c), within ratioEps, in [0, limit].
func floorReplicas(x, c float64, limit int) int {
	return clampReplicas(math.Floor(x/c+ratioEps), limit)
}

// clampReplicas is the whole number r in [0, limit] (0 when r is NaN).
func clampReplicas(r float64, limit int) int {
	switch {
	case !(r > 0):
		return 0
	case r >= float64(limit):
		return limit
	}
	return int(r)
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// tag prefixes a note with the analysis it comes from.
func tag(a scaling.Analysis) string {
	switch {
	case a.Analyzer != "" && a.Role != scaling.RoleBoth:
		return a.Analyzer + " (" + string(a.Role) + "): "
	case a.Analyzer != "":
		return a.Analyzer + ": "
	case a.Role != scaling.RoleBoth:
		return string(a.Role) + ": "
	}
	return ""
}

// num formats a number for a reason: at most 3 decimals, no exponent.
func num(x float64) string {
	return strconv.FormatFloat(math.Round(x*1000)/1000, 'f', -1, 64)
}
