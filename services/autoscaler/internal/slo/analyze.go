package slo

import (
	"errors"
	"fmt"

	"github.com/hermod/hermod/services/autoscaler/internal/scaling"
)

// AnalyzerName is the SLO analyzer's name in scaling.Analysis.Analyzer.
const AnalyzerName = "slo"

// Analyze sizes a model's variants against its latency targets. The unit
// of every capacity in the result is requests per second.
//
//   - Demand is the model's total arrival rate, the sum of its replicas'
//     ArrivalRate.
//   - The workload is the model's average input and output tokens over the
//     replicas that completed requests, weighted by arrival rate (equal
//     weights when none has traffic); an average below one output token
//     (aborted requests) is raised to one.
//   - Each variant is modelled with params[variant] (DefaultParams when the
//     map has none), its MaxNumSeqs and cfg; VariantCapacity[variant] is its
//     lambda* (Model.MaxRate) for cfg.Targets.
//   - Supply is sum over variants of ready x lambda*; the anticipated supply
//     also counts pending replicas. Required = max(0, demand - anticipated)
//     and Spare = max(0, supply - demand), as the token analyzer does, so
//     capacity that is not serving yet is never offered for removal.
//
// A variant whose targets an idle replica already misses (ErrInfeasible)
// gets no capacity entry; when no variant is feasible, or no replica has
// completed a request yet (no token averages), the analysis holds.
// Invalid inputs (a negative or non-finite rate or token average, invalid
// parameters or config) return an error naming the model and field.
func Analyze(m *scaling.Model, params map[string]Params, cfg Config) (scaling.Analysis, error) {
	if m == nil {
		return scaling.Analysis{}, fmt.Errorf("slo analyze: nil model")
	}
	if err := cfg.Validate(); err != nil {
		return scaling.Analysis{}, fmt.Errorf("slo analyze %s: %w", m.ID, err)
	}
	out := scaling.Analysis{
		ModelID:         m.ID,
		Role:            scaling.RoleBoth,
		Analyzer:        AnalyzerName,
		VariantCapacity: map[string]float64{},
		Priority:        1,
	}
	demand, err := demandPerSecond(m)
	if err != nil {
		return scaling.Analysis{}, fmt.Errorf("slo analyze %s: %w", m.ID, err)
	}
	out.Demand = demand
	w, ok, err := modelWorkload(m)
	if err != nil {
		return scaling.Analysis{}, fmt.Errorf("slo analyze %s: %w", m.ID, err)
	}
	if !ok {
		out.Hold = true
		out.Reasons = append(out.Reasons, fmt.Sprintf(
			"no replica has completed a request: token averages unknown, holding (demand %.4g req/s)", demand))
		return out, nil
	}

	var supply, anticipated float64
	for _, v := range m.Variants {
		if v == nil {
			continue
		}
		c, reason, err := variantCapacity(v, params, cfg, w, demand)
		if err != nil {
			return scaling.Analysis{}, fmt.Errorf("slo analyze %s: %w", m.ID, err)
		}
		out.Reasons = append(out.Reasons, reason)
		if c == 0 {
			continue
		}
		out.VariantCapacity[v.Name] = c
		ready := max(0, v.Ready)
		supply += float64(ready) * c
		anticipated += float64(ready+v.Pending()) * c
	}
	out.Supply = supply
	if len(out.VariantCapacity) == 0 {
		out.Hold = true
		out.Reasons = append(out.Reasons,
			"no variant can meet the targets even idle: more replicas would not help, holding")
		return out, nil
	}
	out.Required = max(0, demand-anticipated)
	out.Spare = max(0, supply-demand)
	out.Reasons = append(out.Reasons, fmt.Sprintf(
		"demand %.4g req/s (avg %.4g input, %.4g output tokens); supply %.4g req/s ready, %.4g with pending; required %.4g req/s, spare %.4g req/s",
		demand, w.InputTokens, w.OutputTokens, supply, anticipated, out.Required, out.Spare))
	return out, nil
}

// demandPerSecond sums the replicas' arrival rates.
func demandPerSecond(m *scaling.Model) (float64, error) {
	var total float64
	for _, v := range m.Variants {
		if v == nil {
			continue
		}
		for _, r := range v.Replicas {
			if !within(r.ArrivalRate, 0, LimitRatePerSecond) {
				return 0, fmt.Errorf("%w: replica %s of %s: arrival rate %v requests/s", ErrInvalidRate, r.Name, v.Name, r.ArrivalRate)
			}
			total += r.ArrivalRate
		}
	}
	return total, nil
}

// modelWorkload averages the token counts of the replicas that completed
// requests (a positive input or output average), weighted by arrival
// rate; ok is false when no replica did.
func modelWorkload(m *scaling.Model) (w Workload, ok bool, err error) {
	var in, outTok, weight, plainIn, plainOut float64
	var n int
	for _, v := range m.Variants {
		if v == nil {
			continue
		}
		for _, r := range v.Replicas {
			if !within(r.AvgInputTokens, 0, LimitTokens) || !within(r.AvgOutputTokens, 0, LimitTokens) {
				return Workload{}, false, fmt.Errorf("%w: replica %s of %s: average tokens %v in / %v out",
					ErrInvalidWorkload, r.Name, v.Name, r.AvgInputTokens, r.AvgOutputTokens)
			}
			if r.AvgInputTokens == 0 && r.AvgOutputTokens == 0 {
				continue
			}
			n++
			plainIn += r.AvgInputTokens
			plainOut += r.AvgOutputTokens
			in += r.ArrivalRate * r.AvgInputTokens
			outTok += r.ArrivalRate * r.AvgOutputTokens
			weight += r.ArrivalRate
		}
	}
	switch {
	case n == 0:
		return Workload{}, false, nil
	case weight > 0:
		w = Workload{InputTokens: in / weight, OutputTokens: outTok / weight}
	default:
		w = Workload{InputTokens: plainIn / float64(n), OutputTokens: plainOut / float64(n)}
	}
	if w.OutputTokens > 0 && w.OutputTokens < 1 {
		w.OutputTokens = 1
	}
	return w, true, nil
}

// variantCapacity returns a variant's lambda* (0 when its targets are
// infeasible) and the reason line describing it.
func variantCapacity(v *scaling.Variant, params map[string]Params, cfg Config, w Workload, demand float64) (float64, string, error) {
	p, learned := params[v.Name]
	source := "learned"
	if !learned {
		p, source = DefaultParams(), "default"
	}
	model, err := NewModel(p, w, cfg.Queue(v))
	if err != nil {
		return 0, "", fmt.Errorf("variant %s: %w", v.Name, err)
	}
	t, err := cfg.Targets(p, w)
	if err != nil {
		return 0, "", fmt.Errorf("variant %s: %w", v.Name, err)
	}
	head := fmt.Sprintf("variant %s: %s params alpha=%.4g beta=%.4g gamma=%.4g ms, targets TTFT %.4g ms ITL %.4g ms (%s)",
		v.Name, source, p.Alpha, p.Beta, p.Gamma, t.TTFTMs, t.ITLMs, targetSource(cfg))
	c, err := model.MaxRate(t)
	if errors.Is(err, ErrInfeasible) {
		return 0, head + ": " + err.Error() + ", no capacity", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("variant %s: %w", v.Name, err)
	}
	alone, err := Replicas(demand, c)
	if err != nil {
		return 0, "", fmt.Errorf("variant %s: %w", v.Name, err)
	}
	return c, fmt.Sprintf("%s: lambda* %.4g req/s per replica, %d ready + %d pending, %d replicas alone for the demand",
		head, c, max(0, v.Ready), v.Pending(), alone), nil
}

// targetSource says where the targets come from, for the reasons.
func targetSource(cfg Config) string {
	switch {
	case cfg.TargetTTFT > 0 && cfg.TargetITL > 0:
		return "explicit"
	case cfg.TargetTTFT > 0:
		return fmt.Sprintf("explicit TTFT, ITL inferred with k=%g", cfg.Multiplier())
	case cfg.TargetITL > 0:
		return fmt.Sprintf("explicit ITL, TTFT inferred with k=%g", cfg.Multiplier())
	default:
		return fmt.Sprintf("inferred with k=%g", cfg.Multiplier())
	}
}
