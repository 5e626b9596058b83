package scheduling

import (
	"encoding/json"
	"fmt"
)

// Resolved is a configuration as the scheduler runs it, defaults applied.
type Resolved struct {
	APIVersion         string            `json:"apiVersion"`
	FeatureGates       []string          `json:"featureGates"`
	Plugins            []ResolvedPlugin  `json:"plugins"`
	ProfileHandler     string            `json:"profileHandler"`
	SchedulingProfiles []ResolvedProfile `json:"schedulingProfiles"`
	Data               *DataSpec         `json:"data,omitempty"`
	// Warnings are load-time warnings (skipped plugins, deprecated or
	// unknown parameters, ignored weights).
	Warnings []string `json:"warnings,omitempty"`
	// Deprecations name the deprecated fields the config uses and what
	// replaces each (it runs as if it used those).
	Deprecations []string `json:"deprecations,omitempty"`
	// Effective is the configuration as it runs, in the v0.9+ layout:
	// every plugin (those the builder added too) with its effective
	// parameters, the profiles' filters, scorers (with weights) and picker
	// in order, the parsers in use. It loads as it is.
	Effective *Config `json:"-"`
}

// ResolvedPlugin is one plugin instance.
type ResolvedPlugin struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// Origin is "plugins[i]" for declared plugins and "default" for those
	// the builder added.
	Origin string `json:"origin"`
	// ExtensionPoints lists what the plugin serves (Filter, Scorer, ...).
	ExtensionPoints []string `json:"extensionPoints,omitempty"`
	// Parameters are the effective parameters, defaults applied.
	Parameters any `json:"parameters,omitempty"`
	// Skipped says why a declared plugin is not active.
	Skipped string `json:"skipped,omitempty"`
}

// ResolvedProfile is one scheduling profile.
type ResolvedProfile struct {
	Name    string       `json:"name"`
	Filters []string     `json:"filters,omitempty"`
	Scorers []ScorerInfo `json:"scorers,omitempty"`
	Picker  string       `json:"picker"`
}

// ParameterReporter is implemented by plugins that can report their
// effective parameters (defaults applied) for Describe.
type ParameterReporter interface {
	Parameters() any
}

// extensionPoints names the interfaces a plugin may implement, in the
// order Describe lists them.
var extensionPoints = []struct {
	name string
	is   func(Plugin) bool
}{
	{PointProfileHandler, is[ProfileHandler]},
	{"PrefillDecider", is[PrefillDecider]},
	{"EncodeDecider", is[EncodeDecider]},
	{PointFilter, is[Filter]},
	{PointScorer, is[Scorer]},
	{PointPicker, is[Picker]},
	{PointPrepareData, is[PrepareData]},
	{PointPreRequest, is[PreRequest]},
	{PointScreener, is[Screener]},
	{"Admitter", is[Admitter]},
	{"SaturationDetector", is[SaturationDetector]},
	{"RequestParser", is[RequestParser]},
	{"AttributeReporter", is[AttributeReporter]},
	{PointResponseReceived, is[ResponseReceived]},
	{PointResponseComplete, is[ResponseComplete]},
	{"ServedVerifier", is[ServedVerifier]},
	{"DataSource", is[DataSource]},
	{"DataExtractor", is[DataExtractor]},
	{"EndpointDiscovery", is[EndpointDiscovery]},
}

func is[T any](p Plugin) bool {
	_, ok := p.(T)
	return ok
}

// ExtensionPoints lists the extension points a plugin implements.
func ExtensionPoints(p Plugin) []string {
	var out []string
	for _, ep := range extensionPoints {
		if ep.is(p) {
			out = append(out, ep.name)
		}
	}
	return out
}

func (b *builder) describe(s *Scheduler) *Resolved {
	r := &Resolved{
		APIVersion:   b.cfg.APIVersion,
		FeatureGates: gateStrings(b.cfg.FeatureGates),
		Data:         b.cfg.Data,
		Warnings:     b.warns,
		Deprecations: b.deprecations,
	}
	for _, inst := range b.instances {
		rp := ResolvedPlugin{Name: inst.spec.Name, Type: inst.spec.Type, Origin: inst.origin()}
		if inst.plugin != nil {
			rp.Type = inst.plugin.TypedName().Type
			rp.ExtensionPoints = ExtensionPoints(inst.plugin)
			if pr, ok := inst.plugin.(ParameterReporter); ok {
				rp.Parameters = pr.Parameters()
			}
		}
		rp.Skipped = inst.skipped
		r.Plugins = append(r.Plugins, rp)
	}
	r.ProfileHandler = s.handler.TypedName().Name
	r.Effective = b.effective(s)
	for _, name := range s.profileOrder {
		p := s.profiles[name]
		rp := ResolvedProfile{Name: name, Picker: p.picker.TypedName().Name, Scorers: p.scorerInfo}
		for _, f := range p.filters {
			rp.Filters = append(rp.Filters, f.TypedName().Name)
		}
		r.SchedulingProfiles = append(r.SchedulingProfiles, rp)
	}
	return r
}

func (inst *instance) origin() string {
	switch {
	case inst.implicit && inst.addedBy != "":
		return "made by " + inst.addedBy
	case inst.implicit:
		return "default"
	}
	return fmt.Sprintf("plugins[%d]", inst.index)
}

func gateStrings(gates []FeatureGate) []string {
	out := make([]string, 0, len(gates))
	for _, g := range gates {
		out = append(out, g.String())
	}
	return out
}

// effective is the configuration s runs, in the v0.9+ layout.
func (b *builder) effective(s *Scheduler) *Config {
	cfg := &Config{
		APIVersion:     APIVersionLLMD,
		Kind:           ConfigKind,
		FeatureGates:   b.cfg.FeatureGates,
		Data:           b.cfg.Data,
		FlowControl:    b.cfg.FlowControl,
		RequestControl: b.cfg.RequestControl,
		Parsers:        b.cfg.Parsers,
	}
	for _, inst := range b.instances {
		spec := PluginSpec{Name: inst.spec.Name, Type: inst.spec.Type, Parameters: inst.spec.Parameters}
		if inst.plugin != nil {
			tn := inst.plugin.TypedName()
			spec.Name, spec.Type = tn.Name, tn.Type
			if pr, ok := inst.plugin.(ParameterReporter); ok {
				if raw, err := json.Marshal(pr.Parameters()); err == nil && string(raw) != "{}" {
					spec.Parameters = raw
				}
			}
		}
		cfg.Plugins = append(cfg.Plugins, spec)
	}
	for _, name := range s.profileOrder {
		p := s.profiles[name]
		// A plugin is listed once and serves every extension point it
		// implements there (a filter that scores carries its weight).
		ps := ProfileSpec{Name: name}
		at := map[string]int{}
		ref := func(name string, weight *float64) {
			if i, ok := at[name]; ok {
				if weight != nil {
					ps.Plugins[i].Weight = weight
				}
				return
			}
			at[name] = len(ps.Plugins)
			ps.Plugins = append(ps.Plugins, ProfilePluginSpec{PluginRef: name, Weight: weight})
		}
		for _, f := range p.filters {
			ref(f.TypedName().Name, nil)
		}
		for _, sc := range p.scorerInfo {
			w := sc.Weight
			ref(sc.Name, &w)
		}
		ref(p.picker.TypedName().Name, nil)
		cfg.SchedulingProfiles = append(cfg.SchedulingProfiles, ps)
	}
	return cfg
}
