package scheduling

import "fmt"

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
	{"Admitter", is[Admitter]},
	{"SaturationDetector", is[SaturationDetector]},
	{"RequestParser", is[RequestParser]},
	{"AttributeReporter", is[AttributeReporter]},
	{PointResponseReceived, is[ResponseReceived]},
	{PointResponseComplete, is[ResponseComplete]},
	{"DataSource", is[DataSource]},
	{"DataExtractor", is[DataExtractor]},
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
		FeatureGates: append([]string{}, b.cfg.FeatureGates...),
		Data:         b.cfg.Data,
		Warnings:     b.warns,
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
