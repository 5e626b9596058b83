package scheduling

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
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
	var section struct {
		PluginRef string `json:"pluginRef"`
	}
	if len(b.cfg.SaturationDetector) > 0 {
		if err := json.Unmarshal(b.cfg.SaturationDetector, &section); err != nil {
			b.fail("saturationDetector: %v", err)
			return
		}
	}
	var found Plugin
	for _, inst := range b.instances {
		if inst.implicit || inst.plugin == nil {
			continue
		}
		tn := inst.plugin.TypedName()
		if (section.PluginRef != "" && tn.Name == section.PluginRef) || (section.PluginRef == "" && tn.Type == TypeUtilizationDetector) {
			found = inst.plugin
			break
		}
	}
	switch d, ok := found.(SaturationDetector); {
	case found == nil && section.PluginRef != "":
		b.fail("saturationDetector.pluginRef: no plugin named %q is declared in plugins", section.PluginRef)
	case found != nil && !ok:
		b.fail("saturationDetector.pluginRef: %q (type %s) is not a saturation detector", section.PluginRef, found.TypedName().Type)
	case ok && !b.gates[GateFlowControl]:
		s.detector = d
	}
}

// parser checks the parser section: its pluginRef must name a declared
// request parser (upstream adds openai-parser when it names none; Hermod
// parses the OpenAI wire either way).
func (b *builder) parser() {
	if len(b.cfg.Parser) == 0 {
		return
	}
	var section struct {
		PluginRef string `json:"pluginRef"`
	}
	if err := json.Unmarshal(b.cfg.Parser, &section); err != nil {
		b.fail("parser: %v", err)
		return
	}
	if section.PluginRef == "" {
		return
	}
	for _, inst := range b.instances {
		if inst.implicit || inst.plugin == nil || inst.plugin.TypedName().Name != section.PluginRef {
			continue
		}
		if _, ok := inst.plugin.(RequestParser); !ok {
			b.fail("parser.pluginRef: %q (type %s) is not a request parser", section.PluginRef, inst.plugin.TypedName().Type)
		}
		return
	}
	b.fail("parser.pluginRef: no plugin named %q is declared in plugins", section.PluginRef)
}
