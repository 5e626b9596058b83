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

// ExtensionPoints lists the extension points a plugin implements.
func ExtensionPoints(p Plugin) []string {
	var out []string
	add := func(ok bool, name string) {
		if ok {
			out = append(out, name)
		}
	}
	_, ph := p.(ProfileHandler)
	add(ph, PointProfileHandler)
	_, pd := p.(PrefillDecider)
	add(pd, "PrefillDecider")
	_, ed := p.(EncodeDecider)
	add(ed, "EncodeDecider")
	_, f := p.(Filter)
	add(f, PointFilter)
	_, sc := p.(Scorer)
	add(sc, PointScorer)
	_, pk := p.(Picker)
	add(pk, PointPicker)
	_, prep := p.(PrepareData)
	add(prep, PointPrepareData)
	_, pre := p.(PreRequest)
	add(pre, PointPreRequest)
	_, rr := p.(ResponseReceived)
	add(rr, PointResponseReceived)
	_, rs := p.(ResponseStreaming)
	add(rs, PointResponseStreaming)
	_, rc := p.(ResponseComplete)
	add(rc, PointResponseComplete)
	_, ds := p.(DataSource)
	add(ds, "DataSource")
	_, de := p.(DataExtractor)
	add(de, "DataExtractor")
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
