package flowcontrol

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/hermod/hermod/libs/plugins/admission"
	"github.com/hermod/hermod/libs/plugins/agentidentity"
	"github.com/hermod/hermod/libs/plugins/flowpolicy"
	"github.com/hermod/hermod/libs/scheduling"
)

// Detector is how the gateway measures the pool's saturation.
type Detector uint8

const (
	// DetectEveryEndpoint (the --flow-control file's rule): the pool is
	// saturated when every endpoint with fresh metrics is past its queue
	// or KV-cache threshold.
	DetectEveryEndpoint Detector = iota
	// DetectUtilization (utilization-detector): the saturation is the mean
	// over the registered endpoints of max(waiting/queueDepthThreshold,
	// kv/kvCacheUtilThreshold), an endpoint without fresh metrics at 1,
	// held to the usage-limit policy's ceilings.
	DetectUtilization
	// DetectConcurrency (concurrency-detector, requests mode): the
	// saturation is the gateway's requests in flight over
	// EndpointConcurrency per registered endpoint.
	DetectConcurrency
)

func (d Detector) String() string {
	switch d {
	case DetectUtilization:
		return admission.UtilizationDetectorType
	case DetectConcurrency:
		return admission.ConcurrencyDetectorType
	}
	return "every-endpoint-saturated"
}

// parsePickerConfig reads flow control from an EndpointPickerConfig, as
// the llm-d router applies its flowControl section when the flowControl
// feature gate is on: requests queue in priority bands (sheddable ones
// too) while the saturation detector's reading is at or above the
// usage-limit policy's ceiling, and wait for endpoints when the pool has
// none.
func parsePickerConfig(data []byte) (Settings, error) {
	cfg, err := scheduling.ParseConfig(data)
	if err != nil {
		return Settings{}, fmt.Errorf("flow control: %w", err)
	}
	if !cfg.GateEnabled(scheduling.GateFlowControl) {
		return Settings{}, errors.New("flow control: this EndpointPickerConfig does not enable the flowControl feature gate " +
			"(featureGates: [flowControl]), so it asks for no queueing: add the gate, or start the gateway without --flow-control")
	}
	f := cfg.FlowControl
	if f == nil {
		f = &scheduling.FlowControlSpec{}
	}
	s := Settings{
		Source:     scheduling.ConfigKind,
		Config:     Config{Queueing: true, QueueSheddable: true},
		QueueDepth: admission.DefaultQueueDepthThreshold, KVCacheUtil: admission.DefaultKVCacheUtilThreshold,
		Staleness: DefaultStaleness, HoldWhenEmpty: true, DefaultObjective: true,
	}
	r := refs{cfg: cfg}
	if ttl := f.DefaultRequestTTL; ttl != nil {
		switch {
		case *ttl < 0:
			r.fail("flowControl.defaultRequestTTL: must not be negative (got %s)", *ttl)
		case *ttl == 0:
			s.Config.NoTTL = true // an explicit 0s: no TTL
		default:
			s.Config.DefaultTTL = *ttl
		}
	}
	if q := f.MaxRequests; q != nil && q.Value > 0 {
		s.Config.MaxQueued = clampInt(q.Value)
	}
	if q := f.MaxBytes; q != nil && q.Value > 0 {
		s.Config.MaxBytes = q.Value
	}
	bands := map[int]Band{}
	for i := range f.PriorityBands {
		b := &f.PriorityBands[i]
		path := fmt.Sprintf("flowControl.priorityBands[%d]", i)
		bands[b.Priority] = r.band(path, b)
	}
	positive := r.band("flowControl.defaultPriorityBand", f.DefaultPriorityBand)
	negative := positive
	if f.DefaultNegativePriorityBand != nil {
		negative = r.band("flowControl.defaultNegativePriorityBand", f.DefaultNegativePriorityBand)
	}
	s.Config.Band = func(priority int) Band {
		if b, ok := bands[priority]; ok {
			return b
		}
		if priority < 0 {
			return negative
		}
		return positive
	}
	s.Config.UsageLimit = r.usageLimit(f.UsageLimitPolicyPluginRef)
	s.Config.Programs = r.programs
	if i := slices.IndexFunc(cfg.Plugins, func(p scheduling.PluginSpec) bool { return p.Type == agentidentity.Type }); i >= 0 {
		// a declared agent-identity names the flow of an agent's session
		a, err := agentidentity.Parse(cfg.Plugins[i].Parameters, nil)
		if err != nil {
			r.fail("plugins %s: %w", cfg.Plugins[i].Name, err)
		}
		s.SessionHeaders = a.Headers()
	}
	r.detector(f.SaturationDetector, &s)
	s.Config.Eviction = r.eviction(f.EnableEviction, s.Detector)
	s.Warnings = append(s.Warnings, r.warnings...)
	return s, errors.Join(r.errs...)
}

// eviction reads in-flight eviction (flowControl.enableEviction): the
// llm-d router's one order and one filter, whether or not plugins
// declare them, the grace fitting the detector's reading.
func (r *refs) eviction(enabled bool, d Detector) *Eviction {
	for _, p := range r.cfg.Plugins {
		if !enabled && (p.Type == flowpolicy.PriorityThenTimeEviction || p.Type == flowpolicy.SheddableEvictionFilter) {
			r.warnings = append(r.warnings, fmt.Sprintf("plugins %s (%s): flowControl.enableEviction is not set, so no request in flight is evicted", p.Name, p.Type))
		}
	}
	if !enabled {
		return nil
	}
	e := &Eviction{Order: flowpolicy.PriorityThenTime{}, Filter: flowpolicy.Sheddable{}, Grace: DefaultEvictionGrace}
	if d == DetectConcurrency {
		// the gateway's own count drops as the evicted request ends
		e.Grace = CountedEvictionGrace
	}
	return e
}

// refs resolves the policies and the detector the flowControl section
// names: a declared plugin's name, or a plugin type (made with its
// defaults).
type refs struct {
	cfg      *scheduling.Config
	errs     []error
	warnings []string
	// programs is the program-aware-fairness the bands share, and the name
	// it was declared under
	programs     *flowpolicy.ProgramAware
	programsName string
}

// programAware reads the program-aware-fairness spec names: the bands
// that use one share its accounts, so they must name the same one.
func (r *refs) programAware(path string, spec scheduling.PluginSpec) {
	if r.programs != nil {
		if spec.Name != r.programsName {
			r.fail("%s: %s: the bands share one program-aware-fairness, and %s is already it", path, spec.Name, r.programsName)
		}
		return
	}
	p, err := flowpolicy.ParseProgramAware(spec.Parameters, nil)
	if err != nil {
		r.fail("%s: %s: %w", path, spec.Name, err)
		return
	}
	r.programs, r.programsName = &p, spec.Name
}

func (r *refs) fail(format string, args ...any) { r.errs = append(r.errs, fmt.Errorf(format, args...)) }

// resolve returns the type and parameters ref names.
func (r *refs) resolve(ref string) scheduling.PluginSpec {
	if p, ok := r.cfg.Plugin(ref); ok {
		return p
	}
	return scheduling.PluginSpec{Type: ref, Name: ref}
}

// band reads a priority band (nil: the defaults).
func (r *refs) band(path string, spec *scheduling.PriorityBandSpec) Band {
	b := Band{Fairness: FairGlobalStrict}
	if spec == nil {
		return b
	}
	if q := spec.MaxRequests; q != nil && q.Value > 0 {
		b.MaxRequests = clampInt(q.Value)
	}
	if q := spec.MaxBytes; q != nil && q.Value > 0 {
		b.MaxBytes = q.Value
	}
	if ref := spec.FairnessPolicyRef; ref != "" {
		switch typ := r.resolve(ref).Type; typ {
		case flowpolicy.GlobalStrictFairness:
		case flowpolicy.RoundRobinFairness:
			b.Fairness = FairRoundRobin
		case flowpolicy.ProgramAwareFairness:
			b.Fairness = FairProgramAware
			r.programAware(path+".fairnessPolicyRef", r.resolve(ref))
		default:
			r.fail("%s.fairnessPolicyRef: %q (type %s) is not a fairness policy (%s, %s, %s)",
				path, ref, typ, flowpolicy.GlobalStrictFairness, flowpolicy.RoundRobinFairness, flowpolicy.ProgramAwareFairness)
		}
	}
	if ref := spec.OrderingPolicyRef; ref != "" {
		switch typ := r.resolve(ref).Type; typ {
		case flowpolicy.FCFSOrdering, flowpolicy.EDFOrdering:
		case flowpolicy.SLODeadlineOrdering:
			b.Ordering = OrderSLODeadline
		default:
			r.fail("%s.orderingPolicyRef: %q (type %s) is not an ordering policy (%s, %s, %s)",
				path, ref, typ, flowpolicy.FCFSOrdering, flowpolicy.EDFOrdering, flowpolicy.SLODeadlineOrdering)
		}
	}
	return b
}

// usageLimit reads the usage-limit policy ("": one ceiling of 1).
func (r *refs) usageLimit(ref string) UsageLimit {
	if ref == "" {
		return nil
	}
	const path = "flowControl.usageLimitPolicyPluginRef"
	p := r.resolve(ref)
	var (
		limit UsageLimit
		err   error
	)
	switch p.Type {
	case flowpolicy.StaticUsageLimit:
		limit, err = flowpolicy.ParseStatic(p.Parameters, nil)
	case flowpolicy.PriorityHoldback:
		limit, err = flowpolicy.ParseHoldback(p.Parameters, nil)
	case flowpolicy.SoftReflective:
		limit, err = flowpolicy.ParseSoftReflective(p.Parameters)
	default:
		r.fail("%s: %q (type %s) is not a usage-limit policy (%s, %s, %s)", path, ref, p.Type,
			flowpolicy.StaticUsageLimit, flowpolicy.PriorityHoldback, flowpolicy.SoftReflective)
		return nil
	}
	if err != nil {
		r.fail("%s: %s: %w", path, p.Name, err)
		return nil
	}
	return limit
}

// detector reads the saturation detector into s ("": a declared
// utilization-detector, else one with its defaults).
func (r *refs) detector(ref string, s *Settings) {
	const path = "flowControl.saturationDetector.pluginRef"
	p := scheduling.PluginSpec{Type: admission.UtilizationDetectorType}
	if ref != "" {
		p = r.resolve(ref)
	} else {
		for _, d := range r.cfg.Plugins {
			if d.Type == admission.UtilizationDetectorType {
				p = d
				break
			}
		}
	}
	switch p.Type {
	case admission.UtilizationDetectorType:
		u, err := admission.ParseUtilizationParams(p.Parameters, nil)
		if err != nil {
			r.fail("%s: %s: %w", path, p.Name, err)
			return
		}
		s.Detector = DetectUtilization
		s.QueueDepth, s.KVCacheUtil = u.QueueDepthThreshold, u.KVCacheUtilThreshold
		s.Staleness = max(time.Duration(u.MetricsStalenessThreshold), DefaultStaleness)
	case admission.ConcurrencyDetectorType:
		c, err := admission.ParseConcurrencyParams(p.Parameters, nil)
		if err != nil {
			r.fail("%s: %s: %w", path, p.Name, err)
			return
		}
		if c.ConcurrencyMode != admission.ModeRequests {
			r.fail("%s: %s: concurrencyMode %s is not supported by the gateway's flow control, which counts requests, not tokens: use %s",
				path, p.Name, c.ConcurrencyMode, admission.ModeRequests)
			return
		}
		s.Detector = DetectConcurrency
		s.EndpointConcurrency = clampInt(c.MaxConcurrency)
	default:
		r.fail("%s: %q (type %s) is not a saturation detector (%s, %s)", path, ref, p.Type,
			admission.UtilizationDetectorType, admission.ConcurrencyDetectorType)
	}
}

func clampInt(v int64) int {
	if v > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(v)
}
