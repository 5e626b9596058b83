package scheduling

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/hermod/hermod/libs/openai"
)

// Admitter decides, before any profile runs, whether a request is admitted
// at all (upstream's request-control admission plugins). Every admitter
// must admit a request; a rejection sheds it (429).
type Admitter interface {
	Plugin
	// Admit returns nil to admit req, or why it is rejected. It runs in
	// the scheduler's critical section: it reads the candidates' metrics
	// and cs (its random source), and does no I/O.
	Admit(ctx context.Context, cs *CycleState, req *Request, candidates []*Endpoint) error
}

// SaturationDetector says how saturated a set of endpoints is: below 1 it
// has room, at 1 or more it is saturated. When a config has one (its
// saturationDetector section, or a declared utilization-detector) and not
// the flowControl feature gate, the scheduler sheds a sheddable request
// (priority < 0) whose candidates are saturated, as upstream's legacy
// admission does; with the gate, saturation is flow control's.
type SaturationDetector interface {
	Plugin
	Saturation(ctx context.Context, candidates []*Endpoint) float64
}

// TypeUtilizationDetector is the saturation detector a config uses when
// its saturationDetector section names none (upstream's default).
const TypeUtilizationDetector = "utilization-detector"

// PriorityHeader carries a request's priority: the gateway sets it from
// the InferenceObjective the request names. Negative is sheddable.
const PriorityHeader = "x-gateway-inference-priority"

// Latency SLO headers, in milliseconds: the llm-d router's, then the
// older names (GIE's) it still accepts.
const (
	HeaderSLOTTFT       = "x-llm-d-slo-ttft-ms"
	HeaderSLOTPOT       = "x-llm-d-slo-tpot-ms"
	HeaderSLOTTFTLegacy = "x-slo-ttft-ms"
	HeaderSLOTPOTLegacy = "x-slo-tpot-ms"
)

// SLOMillis is the first of the named headers (get reads one) holding a
// positive, finite number of milliseconds, as a duration (0: none).
func SLOMillis(get func(name string) string, names ...string) time.Duration {
	for _, n := range names {
		if v := get(n); v != "" {
			if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && !math.IsInf(ms, 0) {
				return time.Duration(ms * float64(time.Millisecond))
			}
		}
	}
	return 0
}

// FairnessHeaders name a request's flow (its fairness id), the llm-d
// router's header first, then GIE's.
var FairnessHeaders = []string{"x-llm-d-inference-fairness-id", "x-gateway-inference-fairness-id"}

// Priority is the request's priority (PriorityHeader; 0 when absent or
// not an integer).
func (r *Request) Priority() int {
	v, err := strconv.Atoi(r.Headers[PriorityHeader])
	if err != nil {
		return 0
	}
	return v
}

// errSaturated is the legacy admission's answer to a sheddable request
// when the candidates are saturated.
var errSaturated = &Error{Kind: KindShed, Msg: "system saturated, sheddable request dropped"}

// admit runs the legacy saturation admission and the admitters.
func (s *Scheduler) admit(ctx context.Context, c *cycle, req *Request) error {
	if s.detector != nil && req.Priority() < 0 && s.detector.Saturation(ctx, c.candidates) >= 1 {
		return errSaturated
	}
	for _, a := range s.admitters {
		t := a.t.start()
		err := a.p.Admit(ctx, &c.state, req, c.candidates)
		a.t.done(t)
		if err != nil {
			var se *Error
			if errors.As(err, &se) {
				return err
			}
			return &Error{Kind: KindShed, Msg: fmt.Sprintf("%s: %v", a.p.TypedName().Type, err)}
		}
	}
	return nil
}

// admission sets up the scheduler's admission: the admitters declared,
// and, without the flowControl gate, the saturation detector the
// saturationDetector section names, else a declared utilization-detector.
// A config with neither has no saturation admission in the picker (the
// gateway's flow control owns saturation), where upstream would add a
// default detector.
func (b *builder) admission(s *Scheduler) {
	m := b.o.metrics
	for _, inst := range b.instances {
		if a, ok := inst.plugin.(Admitter); ok {
			s.admitters = append(s.admitters, timed[Admitter]{a, m.timer(PointAdmission, a)})
		}
	}
	ref := ""
	if f := b.cfg.FlowControl; f != nil {
		ref = f.SaturationDetector
		if f.queueSettings() || f.EnableEviction {
			// A client must hear when what it asked for does not happen.
			b.warn("flowControl: Hermod queues in the gateway, not in the picker: its queue bounds, TTL, bands and policies apply where hermod-gateway runs with --flow-control naming this file")
		}
		b.flowControlRefs(f)
	}
	var found Plugin
	for _, inst := range b.instances {
		if inst.implicit || inst.plugin == nil {
			continue
		}
		tn := inst.plugin.TypedName()
		if (ref != "" && tn.Name == ref) || (ref == "" && tn.Type == TypeUtilizationDetector) {
			found = inst.plugin
			break
		}
	}
	switch d, ok := found.(SaturationDetector); {
	case found == nil && ref != "":
		b.fail("flowControl.saturationDetector.pluginRef: no plugin named %q is declared in plugins", ref)
	case found != nil && !ok:
		b.fail("flowControl.saturationDetector.pluginRef: %q (type %s) is not a saturation detector", ref, found.TypedName().Type)
	case ok && !b.gates[GateFlowControl]:
		s.detector = d
	}
}

// parsers resolves requestHandler.parsers: each pluginRef names a
// declared request parser or, as upstream, a parser type, which is made
// with its defaults. The APIs the named parsers claim are the ones s
// serves; a config that lists none gets the default parsers, which
// between them serve every API.
func (b *builder) parsers(s *Scheduler) {
	if len(b.cfg.Parsers) == 0 {
		s.apis = ^apiSet(0)
		return
	}
	fallback := false
	for i, ref := range b.cfg.Parsers {
		path := fmt.Sprintf("requestHandler.parsers[%d].pluginRef", i)
		var p Plugin
		notParser := ""
		if inst, ok := b.byName[ref]; ok {
			p = inst.plugin
			if p != nil {
				notParser = fmt.Sprintf("%s: %q (type %s) is not a request parser", path, ref, p.TypedName().Type)
			}
		} else if reg, ok := b.o.registry.Lookup(ref); ok {
			p = b.implicit(reg.Type)
			notParser = fmt.Sprintf("%s: %q is not a request parser type", path, ref)
		} else {
			b.fail("%s: no plugin named %q is declared in plugins, and no parser type has that name", path, ref)
			continue
		}
		if p == nil {
			continue // its failure is reported
		}
		rp, ok := p.(RequestParser)
		if !ok {
			b.fail("%s", notParser)
			continue
		}
		if _, ok := rp.(FallbackParser); ok {
			fallback = true
			continue
		}
		for _, api := range rp.APIs() {
			s.apis |= apiBit(api)
		}
	}
	if fallback {
		s.unread = ^s.apis
		s.apis = ^apiSet(0)
	}
}

// apiSet is a set of APIs, one bit each.
type apiSet uint32

func apiBit(api openai.API) apiSet { return 1 << (api & 31) }

// Serves says whether the config's parsers parse requests to api (a
// config that lists no parsers serves every API).
func (s *Scheduler) Serves(api openai.API) bool { return s.apis&apiBit(api) != 0 }

// Unread says whether requests to api are routed without their prompt:
// the config's fallback parser (passthrough-parser) takes api, which no
// other listed parser claims.
func (s *Scheduler) Unread(api openai.API) bool { return s.unread&apiBit(api) != 0 }

// flowControlRefs checks that each policy the flowControl section names
// is a declared plugin or a plugin type (made with its defaults where it
// is applied, as upstream does). Whether it is the right kind of policy is
// the gateway's flow control to say.
func (b *builder) flowControlRefs(f *FlowControlSpec) {
	check := func(path, ref string) {
		if ref == "" {
			return
		}
		if _, ok := b.byName[ref]; ok {
			return
		}
		if _, ok := b.o.registry.Lookup(ref); !ok {
			b.fail("%s: no plugin named %q is declared in plugins, and no plugin type has that name", path, ref)
		}
	}
	check("flowControl.usageLimitPolicyPluginRef", f.UsageLimitPolicyPluginRef)
	band := func(path string, s *PriorityBandSpec) {
		if s != nil {
			check(path+".fairnessPolicyRef", s.FairnessPolicyRef)
			check(path+".orderingPolicyRef", s.OrderingPolicyRef)
		}
	}
	band("flowControl.defaultPriorityBand", f.DefaultPriorityBand)
	band("flowControl.defaultNegativePriorityBand", f.DefaultNegativePriorityBand)
	for i := range f.PriorityBands {
		band(fmt.Sprintf("flowControl.priorityBands[%d]", i), &f.PriorityBands[i])
	}
}
