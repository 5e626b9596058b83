// Package enforcer applies the autoscaler's policies after the optimizer:
// scale to zero of an idle model, the variants' replica bounds, one replica
// for a model that is not scaled to zero (Enforce), and scale from zero
// when requests queue for a model at zero (FromZero). Both are pure
// functions of their inputs.
//
// The cheapest variant of a model is the one with the lowest Cost (ties:
// the name, ascending) among those whose maxReplicas is at least 1.
//
// minReplicas and zero. Enforce clamps every target to [minReplicas,
// maxReplicas] (minReplicas wins when maxReplicas is below it), so a
// variant with minReplicas 0 may be at 0 while other variants of its model
// run. The model as a whole reaches 0 only by scale to zero, which
// requires minReplicas 0 on every variant: otherwise, when every target is
// 0 after the clamp, the cheapest variant gets 1. A model that is already
// at zero and may be scaled to zero stays there until requests queue for
// it (FromZero), instead of starting a replica only to remove it again.
package enforcer

import (
	"cmp"
	"fmt"
	"math"
	"strconv"

	"github.com/hermod/hermod/services/autoscaler/internal/scaling"
)

// Enforce applies the post-optimization policies to a model's targets (the
// optimizer's output) and returns one target per variant of m, in
// m.Variants order. A variant without a target in targets keeps its
// Current; targets for names m does not have are dropped; of duplicate
// targets the first counts. scaleToZero is whether scale to zero is
// enabled for the model (per-model config > default > WVA_SCALE_TO_ZERO >
// false, resolved by the caller).
//
//  1. Scale to zero: when scaleToZero, no variant has minReplicas > 0, the
//     model has been watched for a whole retention period
//     (RetentionObserved) with no successful request (SuccessInRetention
//     <= 0), and nothing waits or runs (no request in the gateway queue, no
//     replica with a running or waiting request), every variant's Desired
//     is 0 and the remaining steps are skipped. The last two conditions
//     keep scale to zero from undoing FromZero or cutting requests in
//     flight.
//  2. Clamp: every Desired to [MinReplicas, MaxReplicas].
//  3. Keep one: when every Desired is 0, the cheapest variant gets 1;
//     except, when scale to zero is enabled and allowed (no minReplicas >
//     0), every variant's Current is already 0 and no request waits in the
//     gateway queue, the model stays at zero. When no variant has
//     maxReplicas >= 1, the model stays at zero too.
func Enforce(m *scaling.Model, targets []scaling.Target, scaleToZero bool) []scaling.Target {
	if m == nil {
		return nil
	}
	out := make([]scaling.Target, 0, len(m.Variants))
	vars := make([]*scaling.Variant, 0, len(m.Variants))
	for _, v := range m.Variants {
		if v == nil {
			continue
		}
		t := scaling.Target{Variant: v.Name, Current: v.Current, Desired: v.Current, Reason: "no change"}
		for _, in := range targets {
			if in.Variant == v.Name {
				t.Desired = in.Desired
				if in.Reason != "" {
					t.Reason = in.Reason
				}
				break
			}
		}
		out = append(out, t)
		vars = append(vars, v)
	}

	blocker := zeroBlocker(m, vars, scaleToZero)
	if blocker == "" {
		reason := "scale to zero: no successful request in the retention period, none waiting or running"
		for i := range out {
			out[i].Desired = 0
			out[i].Reason = reason
		}
		return out
	}

	allZero := true
	for i, v := range vars {
		d := out[i].Desired
		if d > v.MaxReplicas {
			d = v.MaxReplicas
			addReason(&out[i], fmt.Sprintf("lowered to maxReplicas %d", v.MaxReplicas))
		}
		if d < v.MinReplicas {
			d = max(0, v.MinReplicas)
			addReason(&out[i], fmt.Sprintf("raised to minReplicas %d", v.MinReplicas))
		}
		d = max(0, d)
		out[i].Desired = d
		if d > 0 {
			allZero = false
		}
	}
	if !allZero {
		return out
	}

	if scaleToZero && minBlocker(vars) == "" && m.GatewayQueue <= 0 && allCurrentZero(vars) {
		for i := range out {
			addReason(&out[i], "stays at zero: scale to zero is enabled and the model has no replicas "+
				"(scale from zero adds one when requests queue)")
		}
		return out
	}
	if i := cheapest(vars); i >= 0 {
		out[i].Desired = 1
		addReason(&out[i], fmt.Sprintf("keep one replica on the cheapest variant (cost %s): %s", num(vars[i].Cost), blocker))
	}
	return out
}

// FromZero is scale from zero: when every variant of m has Current 0 and
// queued (the requests for the model waiting in the gateway queue) is
// above 0, it returns the cheapest variant's target of 1 replica and true,
// to be applied at once. Otherwise, or when no variant may have a replica
// (maxReplicas 0 everywhere), it returns false.
func FromZero(m *scaling.Model, queued float64) (scaling.Target, bool) {
	if m == nil || !(queued > 0) {
		return scaling.Target{}, false
	}
	vars := make([]*scaling.Variant, 0, len(m.Variants))
	for _, v := range m.Variants {
		if v != nil {
			vars = append(vars, v)
		}
	}
	if !allCurrentZero(vars) {
		return scaling.Target{}, false
	}
	i := cheapest(vars)
	if i < 0 {
		return scaling.Target{}, false
	}
	v := vars[i]
	return scaling.Target{
		Variant: v.Name,
		Current: v.Current,
		Desired: 1,
		Reason: fmt.Sprintf("scale from zero: %s requests waiting in the gateway queue, the cheapest variant (cost %s) to 1",
			num(queued), num(v.Cost)),
	}, true
}

// zeroBlocker says why scale to zero does not apply to m, or "" when it
// does.
func zeroBlocker(m *scaling.Model, vars []*scaling.Variant, enabled bool) string {
	if !enabled {
		return "scale to zero is disabled"
	}
	if why := minBlocker(vars); why != "" {
		return why
	}
	if !m.RetentionObserved {
		return "scale to zero waits until the model has been watched for a whole retention period"
	}
	if !(m.SuccessInRetention <= 0) {
		return fmt.Sprintf("%s successful requests in the retention period", num(m.SuccessInRetention))
	}
	if m.GatewayQueue > 0 {
		return fmt.Sprintf("%s requests waiting in the gateway queue", num(m.GatewayQueue))
	}
	for _, v := range vars {
		for i := range v.Replicas {
			if r := &v.Replicas[i]; r.Running > 0 || r.Queue > 0 {
				return fmt.Sprintf("replica %s of variant %s has requests running or waiting", r.Name, v.Name)
			}
		}
	}
	if len(vars) == 0 {
		return "the model has no variants"
	}
	return ""
}

// minBlocker names the first variant with minReplicas > 0 (scale to zero
// is skipped then), or "".
func minBlocker(vars []*scaling.Variant) string {
	for _, v := range vars {
		if v.MinReplicas > 0 {
			return fmt.Sprintf("scale to zero skipped: variant %s has minReplicas %d", v.Name, v.MinReplicas)
		}
	}
	return ""
}

func allCurrentZero(vars []*scaling.Variant) bool {
	for _, v := range vars {
		if v.Current > 0 {
			return false
		}
	}
	return true
}

// cheapest is the index of the lowest-cost variant (ties: name) that may
// have a replica, or -1.
func cheapest(vars []*scaling.Variant) int {
	best := -1
	for i, v := range vars {
		if v.MaxReplicas < 1 {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		b := vars[best]
		if c := cmp.Compare(v.Cost, b.Cost); c < 0 || c == 0 && v.Name < b.Name {
			best = i
		}
	}
	return best
}

// addReason appends s to t's reason ("no change" gives way).
func addReason(t *scaling.Target, s string) {
	if t.Reason == "" || t.Reason == "no change" {
		t.Reason = s
		return
	}
	t.Reason += "; " + s
}

// num formats a number for a reason: at most 3 decimals, no exponent.
func num(x float64) string {
	return strconv.FormatFloat(math.Round(x*1000)/1000, 'f', -1, 64)
}
