package optimizer

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/hermod/hermod/services/autoscaler/internal/scaling"
)

// ModelInput is one model and its analyses, for GreedyByScore.
type ModelInput struct {
	Model    *scaling.Model
	Analyses []scaling.Analysis
}

// GreedyByScore plans all models together under a GPU budget per
// accelerator type (budgets: accelerator -> GPUs; the optimizer's
// enableLimiter mode). It returns the targets of models[i] at index i, one
// per variant as CostAware does (nil for a nil Model).
//
// Scale-ups are limited, scale-downs are not: scale-downs, holds, roles and
// the variant order are CostAware's (see the package documentation); only
// how many replicas a scale-up gets differs.
//
// The budget. A variant of accelerator type A uses Current x
// GPUsPerReplica GPUs of budgets[A] (a GPUsPerReplica below 1 counts as
// 1); the running and pending replicas of every input model count, so the
// free GPUs of A are max(0, budgets[A] - used). GPUs a scale-down frees in
// this decision are not given out again before the next one (the replicas
// still hold them while they terminate). A variant whose accelerator has no
// entry in budgets cannot scale up (the required capacity spills to the
// next variant, as past maxReplicas).
//
// The fair share. Each scale-up analysis of each model is a claimant with
// the remaining required capacity R (in its analyzer's unit) and the weight
// priority x R (a Priority that is not positive and finite counts as 1);
// claimants are taken in order of model ID, namespace, input index, then
// Role and Analyzer. Each round:
//
//  1. every claimant with R > 0 picks its target: the first variant in its
//     scale-up order with headroom below maxReplicas and at least one
//     replica's GPUs free on its accelerator; a claimant with none is done
//     (its remaining R is unmet);
//  2. per accelerator (in name order), with F its free GPUs at the start of
//     the round and W the sum of the weights of the claimants targeting it,
//     each claimant's share is F x weight / W GPUs, and it gets
//     min(its demand, floor(share / GPUsPerReplica)) whole replicas, its
//     demand being ceil(R / capacity) capped by the variant's headroom. A
//     claimant whose demand is below its share leaves the excess in the
//     pool for the next round; R and the weights are recomputed then;
//  3. if no claimant of an accelerator got a whole replica this round
//     (every share below one replica), the one with the highest weight
//     (ties: claimant order) gets one replica, so that every round makes
//     progress.
//
// Rounds repeat until no claimant has unmet demand it can still place:
// the budget or the demand is exhausted. Every round hands out at least one
// replica, so it ends. The unit of R should be the same for the models
// that share an accelerator (one analyzer per deployment).
func GreedyByScore(models []ModelInput, budgets map[string]int) [][]scaling.Target {
	out := make([][]scaling.Target, len(models))
	order := make([]int, 0, len(models))
	for k, mi := range models {
		if mi.Model != nil {
			order = append(order, k)
		}
	}
	slices.SortStableFunc(order, func(x, y int) int {
		mx, my := models[x].Model, models[y].Model
		if c := cmp.Compare(mx.ID, my.ID); c != 0 {
			return c
		}
		return cmp.Compare(mx.Namespace, my.Namespace)
	})

	free := make(map[string]int, len(budgets))
	for acc, b := range budgets {
		free[acc] = max(0, b)
	}
	for _, k := range order {
		for _, v := range models[k].Model.Variants {
			if v == nil {
				continue
			}
			if f, ok := free[v.Accelerator]; ok {
				free[v.Accelerator] = max(0, f-max(0, v.Current)*gpus(v))
			}
		}
	}

	plans := make([]*plan, len(models))
	downs := make([][]scaling.Analysis, len(models))
	var cl []*claimant
	for _, k := range order {
		m := models[k].Model
		p := newPlan(m)
		plans[k] = p
		var ups []scaling.Analysis
		ups, downs[k] = p.signals(m, models[k].Analyses)
		for _, a := range ups {
			cs := p.upCandidates(a)
			cl = append(cl, &claimant{
				p: p, a: a, cands: cs, grants: make([]int, len(cs)),
				rem: a.Required, prio: priority(a),
			})
		}
	}

	allocate(cl, free, budgets)

	for _, c := range cl {
		c.finish()
	}
	for _, k := range order {
		for _, a := range downs[k] {
			plans[k].scaleDown(a)
		}
		out[k] = plans[k].targets()
	}
	return out
}

// claimant is one scale-up analysis competing for the GPU budget.
type claimant struct {
	p     *plan
	a     scaling.Analysis
	cands []cand
	// next is the candidate the claimant places replicas on; those before
	// it cannot take more (at maxReplicas or out of budget).
	next   int
	grants []int // replicas granted per candidate
	rem    float64
	prio   float64
	done   bool
	// blocked holds why candidates were passed over, noted after the
	// grants; budget is set when the GPU budget stopped one.
	blocked []blockNote
	budget  bool
}

type blockNote struct {
	i    int
	note string
}

// allocate runs the fair-share rounds (see GreedyByScore).
func allocate(cl []*claimant, free, budgets map[string]int) {
	type entry struct {
		c *claimant
		w float64
	}
	pools := map[string][]entry{}
	for {
		clear(pools)
		for _, c := range cl {
			if c.done {
				continue
			}
			cd, ok := c.target(free, budgets)
			if !ok {
				c.done = true
				continue
			}
			acc := c.p.vars[cd.i].Accelerator
			// prio and rem are positive and finite; keep their product so.
			w := min(max(c.prio*c.rem, math.SmallestNonzeroFloat64), math.MaxFloat64)
			pools[acc] = append(pools[acc], entry{c: c, w: w})
		}
		if len(pools) == 0 {
			return
		}
		accs := make([]string, 0, len(pools))
		for acc := range pools {
			accs = append(accs, acc)
		}
		slices.Sort(accs)
		for _, acc := range accs {
			es := pools[acc]
			f := float64(free[acc])
			// Weights relative to the largest, so that their sum stays
			// finite.
			var wmax, sum float64
			for _, e := range es {
				wmax = max(wmax, e.w)
			}
			for _, e := range es {
				sum += e.w / wmax
			}
			granted := false
			for _, e := range es {
				g := gpus(e.c.p.vars[e.c.cands[e.c.next].i])
				share := f * (e.w / wmax) / sum
				n := e.c.need()
				if s := share / float64(g); s < float64(n) {
					n = int(s)
				}
				n = min(n, free[acc]/g)
				if n > 0 {
					e.c.grant(n)
					free[acc] -= n * g
					granted = true
				}
			}
			if !granted {
				best := es[0]
				for _, e := range es[1:] {
					if e.w > best.w {
						best = e
					}
				}
				best.c.grant(1)
				free[acc] -= gpus(best.c.p.vars[best.c.cands[best.c.next].i])
			}
		}
	}
}

// target is the candidate the claimant places its next replicas on, or
// false when its demand is met or cannot be placed.
func (c *claimant) target(free, budgets map[string]int) (cand, bool) {
	for c.next < len(c.cands) {
		cd := c.cands[c.next]
		if ceilReplicas(c.rem, cd.capacity, 1) == 0 {
			return cand{}, false // met
		}
		v := c.p.vars[cd.i]
		f, ok := free[v.Accelerator]
		switch {
		case c.p.headroom(cd.i) == 0:
			if c.grants[c.next] == 0 {
				c.block(cd.i, fmt.Sprintf("%snot scaled up: at maxReplicas %d", tag(c.a), v.MaxReplicas))
			}
		case !ok:
			c.block(cd.i, fmt.Sprintf("%snot scaled up: no GPU budget for accelerator %q", tag(c.a), v.Accelerator))
			c.budget = true
		case f < gpus(v):
			c.block(cd.i, fmt.Sprintf("%sno more replicas: GPU budget for accelerator %q used up "+
				"(%d of %d GPUs free, a replica needs %d)", tag(c.a), v.Accelerator, f, budgets[v.Accelerator], gpus(v)))
			c.budget = true
		default:
			return cd, true
		}
		c.next++
	}
	return cand{}, false
}

func (c *claimant) block(i int, note string) {
	c.blocked = append(c.blocked, blockNote{i: i, note: note})
}

// need is the claimant's demand on its target in whole replicas.
func (c *claimant) need() int {
	cd := c.cands[c.next]
	return ceilReplicas(c.rem, cd.capacity, c.p.headroom(cd.i))
}

func (c *claimant) grant(n int) {
	cd := c.cands[c.next]
	c.p.add(cd.i, n)
	c.grants[c.next] += n
	c.rem -= float64(n) * cd.capacity
}

// finish notes the claimant's grants and its unmet demand.
func (c *claimant) finish() {
	t := tag(c.a)
	for j, n := range c.grants {
		if n == 0 {
			continue
		}
		cd := c.cands[j]
		v := c.p.vars[cd.i]
		var b strings.Builder
		fmt.Fprintf(&b, "%sscale up +%d: required %s at %s per replica, %d GPUs each on accelerator %q "+
			"(GPU budget shared by priority %s x required)", t, n, num(c.a.Required), num(cd.capacity),
			gpus(v), v.Accelerator, num(c.prio))
		if c.p.headroom(cd.i) == 0 {
			fmt.Fprintf(&b, ", reached maxReplicas %d", v.MaxReplicas)
		}
		c.p.note(cd.i, b.String())
	}
	for _, bn := range c.blocked {
		c.p.note(bn.i, bn.note)
	}
	if len(c.cands) > 0 && ceilReplicas(c.rem, c.cands[0].capacity, 1) > 0 {
		why := "no variant can add replicas"
		if c.budget {
			why = "not within the GPU budget"
		}
		c.p.note(c.cands[0].i, fmt.Sprintf("%s%s of required %s not met: %s", t, num(c.rem), num(c.a.Required), why))
	}
}

// priority is a's priority for the fair share (default 1).
func priority(a scaling.Analysis) float64 {
	if a.Priority > 0 && !math.IsInf(a.Priority, 1) {
		return a.Priority
	}
	return 1
}

// gpus is the GPUs one replica of v uses (at least 1).
func gpus(v *scaling.Variant) int { return max(1, v.GPUsPerReplica) }
