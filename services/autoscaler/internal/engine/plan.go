package engine

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/hermod/hermod/services/autoscaler/internal/config"
	"github.com/hermod/hermod/services/autoscaler/internal/enforcer"
	"github.com/hermod/hermod/services/autoscaler/internal/optimizer"
	"github.com/hermod/hermod/services/autoscaler/internal/saturation"
	"github.com/hermod/hermod/services/autoscaler/internal/scaling"
	"github.com/hermod/hermod/services/autoscaler/internal/slo"
)

// Optimizer names in decisions.
const (
	OptimizerCostAware = "cost-aware"
	OptimizerGreedy    = "greedy-by-score"
	// FromZeroAnalyzer names the scale-from-zero path's decisions.
	FromZeroAnalyzer = "scale-from-zero"
	// tuneEvery is the least time between two tuner updates of a variant:
	// the inputs are one-minute windows, and feeding the filter the same
	// window at every evaluation would over-weight it.
	tuneEvery = 5 * time.Second
)

// decision is the pipeline's output for one model.
type decision struct {
	Analyzer  string
	Optimizer string
	Analyses  []scaling.Analysis
	Targets   []scaling.Target
	Reasons   []string
}

// capacity returns one replica's capacity of variant in the decision's
// first analysis that knows it.
func (d decision) capacity(variant string) float64 {
	for _, a := range d.Analyses {
		if c, ok := a.VariantCapacity[variant]; ok {
			return c
		}
	}
	return 0
}

// planner runs the analyzers, which keep state between evaluations (the
// token analyzer's history, the SLO analyzer's tuners).
type planner struct {
	mu      sync.Mutex
	token   *saturation.TokenAnalyzer
	tuners  map[string]*slo.Tuner
	tunedAt map[string]time.Time
}

func newPlanner() *planner {
	return &planner{token: saturation.NewTokenAnalyzer(), tuners: map[string]*slo.Tuner{}, tunedAt: map[string]time.Time{}}
}

// pending is one model's analysis, between the analyzers and the
// optimizer.
type analyzed struct {
	m         *scaling.Model
	d         decision
	limited   bool
	zeroOK    bool
	fromZero  bool
	budgets   map[string]int
	analyzeEr error
}

// analyze runs a model's analyzer (or the scale-from-zero path). m's
// max-over-time windows start when its fleet last settled, full's span the
// whole minute: a scale-up needs the current fleet to fall short, a
// scale-down needs the whole last minute to allow it (an event-driven
// loop would otherwise take a replica away on a quiet moment and add it
// back at the next burst).
func (p *planner) analyze(m, full *scaling.Model, set *config.Set, env func(string) string) analyzed {
	out := analyzed{m: m}
	stz := set.ScaleToZero(m.ID, m.Namespace, env)
	out.zeroOK = stz.Enabled
	if t, ok := enforcer.FromZero(m, m.GatewayQueue); ok {
		out.fromZero = true
		out.d = decision{Analyzer: FromZeroAnalyzer, Targets: withTarget(m, t),
			Reasons: []string{fmt.Sprintf("%v requests wait in the gateways for a model at zero replicas", m.GatewayQueue)}}
		return out
	}
	sat, err := set.Saturation(m.ID, m.Namespace)
	if err != nil {
		out.analyzeEr = err
		return out
	}
	out.limited, out.budgets = sat.EnableLimiter, sat.AcceleratorBudgets
	kind, err := set.Analyzer(m.ID, m.Namespace)
	if err != nil {
		out.analyzeEr = err
		return out
	}
	var as []scaling.Analysis
	switch kind {
	case config.AnalyzerQueueingModel:
		// rates and latencies: one-minute windows either way
		q, _ := set.Queueing(m.ID, m.Namespace)
		cfg := slo.Config{TargetTTFT: q.TargetTTFT, TargetITL: q.TargetITL, SLOMultiplier: q.SLOMultiplier, TuningEnabled: q.TuningEnabled}
		a, err := slo.Analyze(m, p.params(m, cfg), cfg)
		if err != nil {
			out.analyzeEr = err
			return out
		}
		as = []scaling.Analysis{a}
		out.d.Analyzer = slo.AnalyzerName
	case config.AnalyzerSaturationToken:
		tc := saturation.TokenConfig{KVCacheThreshold: sat.KVCacheThreshold, QueueLengthThreshold: sat.QueueLengthThreshold,
			ScaleUpThreshold: sat.ScaleUpThreshold, ScaleDownBoundary: sat.ScaleDownBoundary}
		as = combine(p.token.Analyze(m, tc), p.token.Analyze(full, tc))
		out.d.Analyzer = saturation.TokenAnalyzerName
	default:
		pc := saturation.PercentageConfig{KVCacheThreshold: sat.KVCacheThreshold, QueueLengthThreshold: sat.QueueLengthThreshold,
			KVSpareTrigger: sat.KVSpareTrigger, QueueSpareTrigger: sat.QueueSpareTrigger}
		as = combine([]scaling.Analysis{saturation.AnalyzePercentage(m, pc)}, []scaling.Analysis{saturation.AnalyzePercentage(full, pc)})
		out.d.Analyzer = saturation.PercentageAnalyzerName
	}
	for i := range as {
		as[i].Priority = sat.Priority
		out.d.Reasons = append(out.d.Reasons, as[i].Reasons...)
	}
	out.d.Analyses = as
	return out
}

// combine takes, per role, the scale-up signal (or hold) of the analysis
// since the fleet settled, else the scale-down signal of the whole
// window's analysis.
func combine(since, full []scaling.Analysis) []scaling.Analysis {
	out := make([]scaling.Analysis, 0, len(since))
	for _, a := range since {
		if a.Required > 0 || a.Hold {
			out = append(out, a)
			continue
		}
		a.Spare = 0 // a quiet moment is no reason to shrink
		for _, f := range full {
			if f.Role == a.Role && f.Spare > 0 && !f.Hold {
				f.Required = 0
				a = f
				break
			}
		}
		out = append(out, a)
	}
	return out
}

// params returns the SLO analyzer's parameters per variant, first feeding
// the tuners the replicas' latest observations when tuning is on.
func (p *planner) params(m *scaling.Model, cfg slo.Config) map[string]slo.Params {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]slo.Params{}
	for _, v := range m.Variants {
		key := v.Namespace + "/" + v.Name
		obs := slo.Observations(v, cfg)
		t := p.tuners[key]
		if t == nil && cfg.TuningEnabled && len(obs) > 0 {
			if nt, err := slo.NewTuner(slo.InitialParams(obs)); err == nil {
				t = nt
				p.tuners[key] = t
			}
		}
		if t != nil && cfg.TuningEnabled && m.Now.Sub(p.tunedAt[key]) >= tuneEvery {
			for _, o := range obs {
				_, _ = t.Update(o) // a rejected update (outlier) is the filter's business
			}
			p.tunedAt[key] = m.Now
		}
		if t != nil {
			out[v.Name] = t.Params()
		}
	}
	return out
}

// optimize turns each analyzed model into targets: greedy-by-score over
// the models with the limiter on (one GPU budget), cost-aware for the
// others, then the enforcer.
func optimize(models []*analyzed) {
	var greedy []optimizer.ModelInput
	var greedyAt []*analyzed
	var budgets map[string]int
	for _, a := range models {
		if a.fromZero || a.analyzeEr != nil {
			continue
		}
		if a.limited {
			greedy = append(greedy, optimizer.ModelInput{Model: a.m, Analyses: a.d.Analyses})
			greedyAt = append(greedyAt, a)
			if budgets == nil {
				budgets = a.budgets
			}
			continue
		}
		a.d.Optimizer = OptimizerCostAware
		a.d.Targets = optimizer.CostAware(a.m, a.d.Analyses)
	}
	if len(greedy) > 0 {
		for i, ts := range optimizer.GreedyByScore(greedy, budgets) {
			greedyAt[i].d.Optimizer, greedyAt[i].d.Targets = OptimizerGreedy, ts
		}
	}
	for _, a := range models {
		if a.fromZero || a.analyzeEr != nil {
			continue
		}
		a.d.Targets = enforcer.Enforce(a.m, a.d.Targets, a.zeroOK)
	}
}

// withTarget returns every variant unchanged but t's.
func withTarget(m *scaling.Model, t scaling.Target) []scaling.Target {
	out := make([]scaling.Target, 0, len(m.Variants))
	for _, v := range m.Variants {
		if v.Name == t.Variant {
			out = append(out, t)
			continue
		}
		out = append(out, scaling.Target{Variant: v.Name, Current: v.Current, Desired: v.Current})
	}
	return out
}

// plannerState is the persisted part of the planner: the tuners.
type plannerState struct {
	Tuners map[string]slo.TunerState `json:"tuners"`
}

func (p *planner) snapshot() (json.RawMessage, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := plannerState{Tuners: map[string]slo.TunerState{}}
	for k, t := range p.tuners {
		s.Tuners[k] = t.State()
	}
	return json.Marshal(s)
}

func (p *planner) restore(raw json.RawMessage) error {
	var s plannerState
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("planner state: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, st := range s.Tuners {
		t, err := slo.RestoreTuner(st)
		if err != nil {
			return fmt.Errorf("tuner %s: %w", k, err)
		}
		p.tuners[k] = t
	}
	return nil
}
