package saturation

import (
	"fmt"

	"github.com/hermod/hermod/services/autoscaler/internal/scaling"
)

// AnalyzePercentage is the percentage based saturation analyzer (the
// default). Over the ready replicas of all variants of the model, a replica
// is saturated iff its KV usage >= c.KVCacheThreshold or its queue >=
// c.QueueLengthThreshold. Over the N non-saturated replicas it averages the
// spare KV (threshold - usage) and spare queue (threshold - queue):
//
//   - scale up (Required 1) iff an average spare is below its trigger, or
//     every replica is saturated;
//   - scale down (Spare 1) iff N >= 2 and, with the non-saturated replicas'
//     average load scaled by N/(N-1) (one of them removed), both spares stay
//     at or above their triggers;
//   - a model in transition (a variant with pending replicas or more ready
//     replicas than its target) gets Hold and no change;
//   - a model with no ready replica gets no signal (scale from zero is the
//     enforcer's).
//
// The unit is replicas: VariantCapacity is 1 for every variant, SkipPending
// is set (a scale-up skips variants with pending replicas) and
// ScaleDownMinCurrent is 1 (only a variant with more than one replica loses
// one). Supply is the number of ready replicas; Demand is their load in
// replicas at the saturation thresholds, the sum over ready replicas of
// max(kv/KVCacheThreshold, queue/QueueLengthThreshold), so Demand > Supply
// means the average replica is past a threshold. Reasons state the numbers.
//
// Non-finite or negative replica values count as 0; fields of c that are
// not positive take their defaults.
func AnalyzePercentage(m *scaling.Model, c PercentageConfig) scaling.Analysis {
	c = c.withDefaults()
	a := scaling.Analysis{
		Analyzer:            PercentageAnalyzerName,
		Role:                scaling.RoleBoth,
		Priority:            1,
		SkipPending:         true,
		ScaleDownMinCurrent: 1,
		VariantCapacity:     map[string]float64{},
	}
	if m == nil {
		a.Reasons = []string{"no model: no signal"}
		return a
	}
	a.ModelID = m.ID
	for _, v := range m.Variants {
		if v != nil {
			a.VariantCapacity[v.Name] = 1
		}
	}

	ready, nonSat, load, sumKv, sumQueue := percentageLoad(m, c)
	a.Demand = nonNeg(load)
	a.Supply = float64(ready)

	if moving := transitions(m); len(moving) > 0 {
		a.Hold = true
		a.Reasons = append(moving, "model in transition: hold, no change")
		return a
	}
	if ready == 0 {
		a.Reasons = []string{"no ready replicas: no signal (scale from zero is the enforcer's)"}
		return a
	}
	if nonSat == 0 {
		a.Required = 1
		a.Reasons = []string{fmt.Sprintf(
			"all %d ready replicas saturated (kv >= %g or queue >= %g): scale up by 1 replica",
			ready, c.KVCacheThreshold, c.QueueLengthThreshold)}
		return a
	}

	n := float64(nonSat)
	avgKv, avgQueue := sumKv/n, sumQueue/n
	spareKv := c.KVCacheThreshold - avgKv
	spareQueue := c.QueueLengthThreshold - avgQueue
	a.Reasons = []string{fmt.Sprintf(
		"%d ready replicas, %d saturated; over %d non-saturated: avg kv %.3f, avg queue %.2f, avg spare kv %.3f, avg spare queue %.2f",
		ready, ready-nonSat, nonSat, avgKv, avgQueue, spareKv, spareQueue)}

	if spareKv < c.KVSpareTrigger || spareQueue < c.QueueSpareTrigger {
		a.Required = 1
		if spareKv < c.KVSpareTrigger {
			a.Reasons = append(a.Reasons, fmt.Sprintf("avg spare kv %.3f < %g", spareKv, c.KVSpareTrigger))
		}
		if spareQueue < c.QueueSpareTrigger {
			a.Reasons = append(a.Reasons, fmt.Sprintf("avg spare queue %.2f < %g", spareQueue, c.QueueSpareTrigger))
		}
		a.Reasons = append(a.Reasons, "scale up by 1 replica")
		return a
	}
	if nonSat < 2 {
		a.Reasons = append(a.Reasons, fmt.Sprintf("%d non-saturated replica: scale-down needs >= 2; no change", nonSat))
		return a
	}

	spare, reason := scaleDownByOne(c, nonSat, avgKv, avgQueue)
	a.Spare = spare
	a.Reasons = append(a.Reasons, reason)
	return a
}

// percentageLoad sums the replicas' load: how many are ready and how many
// of them are not saturated, their total load in thresholds, and the kv
// usage and queue of the non-saturated ones.
func percentageLoad(m *scaling.Model, c PercentageConfig) (ready, nonSat int, load, sumKv, sumQueue float64) {
	for _, v := range m.Variants {
		if v == nil {
			continue
		}
		for i := range v.Replicas {
			r := &v.Replicas[i]
			kv, queue := clean(r.KVUsage), clean(r.Queue)
			ready++
			load += max(kv/c.KVCacheThreshold, queue/c.QueueLengthThreshold)
			if saturated(kv, queue, c) {
				continue
			}
			nonSat++
			sumKv += kv
			sumQueue += queue
		}
	}
	return ready, nonSat, load, sumKv, sumQueue
}

// scaleDownByOne simulates removing one of nonSat non-saturated replicas:
// its load spreads over the other N-1, so the average load grows by
// N/(N-1). It returns 1 when the others would keep the spare triggers,
// and why.
func scaleDownByOne(c PercentageConfig, nonSat int, avgKv, avgQueue float64) (float64, string) {
	n := float64(nonSat)
	f := n / (n - 1)
	spareKvAfter := c.KVCacheThreshold - avgKv*f
	spareQueueAfter := c.QueueLengthThreshold - avgQueue*f
	after := fmt.Sprintf("with load x %d/%d: spare kv %.3f, spare queue %.2f", nonSat, nonSat-1, spareKvAfter, spareQueueAfter)
	if spareKvAfter >= c.KVSpareTrigger && spareQueueAfter >= c.QueueSpareTrigger {
		return 1, fmt.Sprintf("%s (>= %g and >= %g): scale down by 1 replica", after, c.KVSpareTrigger, c.QueueSpareTrigger)
	}
	why := fmt.Sprintf("spare queue %.2f < %g", spareQueueAfter, c.QueueSpareTrigger)
	if spareKvAfter < c.KVSpareTrigger {
		why = fmt.Sprintf("spare kv %.3f < %g", spareKvAfter, c.KVSpareTrigger)
	}
	return 0, fmt.Sprintf("%s: scale-down refused (%s); no change", after, why)
}

// saturated reports whether a replica is saturated: kv usage or queue at or
// above its threshold.
func saturated(kv, queue float64, c PercentageConfig) bool {
	return kv >= c.KVCacheThreshold || queue >= c.QueueLengthThreshold
}

// transitions describes the variants in transition: pending replicas
// (target above ready) or ready replicas above the target. It is
// scaling.Model.Transitioning with the reasons, tolerating nil variants.
func transitions(m *scaling.Model) []string {
	var out []string
	for _, v := range m.Variants {
		if v == nil {
			continue
		}
		if v.Pending() > 0 || v.Ready > v.Current {
			out = append(out, fmt.Sprintf("variant %s in transition: target %d, ready %d", v.Name, v.Current, v.Ready))
		}
	}
	return out
}
