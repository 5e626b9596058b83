package scheduling

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// FeatureGate is one featureGates entry: "name" or "name=true" enables
// it, "name=false" disables it.
type FeatureGate struct {
	Name    string
	Enabled bool
}

// String writes the gate as the new layout does: the name alone when
// enabled.
func (g FeatureGate) String() string {
	if g.Enabled {
		return g.Name
	}
	return g.Name + "=false"
}

// FlowControlSpec is the flowControl section (llm-d router v0.9+): the
// gateway's queue bounds and policies, and the saturation detector.
type FlowControlSpec struct {
	MaxBytes                    *Quantity
	MaxRequests                 *Quantity
	DefaultRequestTTL           *time.Duration
	DefaultPriorityBand         *PriorityBandSpec
	DefaultNegativePriorityBand *PriorityBandSpec
	PriorityBands               []PriorityBandSpec
	UsageLimitPolicyPluginRef   string
	// SaturationDetector names the detector plugin: this section's
	// saturationDetector, or the deprecated top-level one.
	SaturationDetector string
	EnableEviction     bool
}

// queueSettings reports whether the section sets anything besides the
// saturation detector (what only flow control itself reads).
func (f *FlowControlSpec) queueSettings() bool {
	return f != nil && (f.MaxBytes != nil || f.MaxRequests != nil || f.DefaultRequestTTL != nil ||
		f.DefaultPriorityBand != nil || f.DefaultNegativePriorityBand != nil || len(f.PriorityBands) > 0 ||
		f.UsageLimitPolicyPluginRef != "")
}

// PriorityBandSpec is one flowControl priority band (or the template of
// those not listed).
type PriorityBandSpec struct {
	Priority          int
	MaxBytes          *Quantity
	MaxRequests       *Quantity
	FairnessPolicyRef string
	OrderingPolicyRef string
}

// DataSpec is the data-layer section.
type DataSpec struct {
	// InjectDefaults false stops the default metrics source and extractor
	// from being added (nil: true).
	InjectDefaults *bool
	Sources        []DataSourceSpec
	// Discovery names the endpoint-discovery plugin (file-discovery: a
	// pool without Kubernetes); "" when the platform discovers them.
	Discovery                   string
	CrossReplicaSyncerPluginRef string
	CrossReplicaSyncInterval    *time.Duration

	section string // the key the document used: dataLayer or data
}

// DataSourceSpec is a data source and its extractors.
type DataSourceSpec struct {
	PluginRef  string
	Extractors []string
}

// featureGates decodes featureGates: a list of "name" or "name=bool".
func (p *configParser) featureGates(n *yaml.Node) []FeatureGate {
	var out []FeatureGate
	for i, s := range p.strList(n, "featureGates") {
		name, value, hasValue := strings.Cut(s, "=")
		name = strings.TrimSpace(name)
		g := FeatureGate{Name: name, Enabled: true}
		if hasValue {
			b, err := strconv.ParseBool(strings.ToLower(strings.TrimSpace(value)))
			if err != nil {
				p.fail("featureGates[%d]: %q: %q is not true or false", i, s, value)
				continue
			}
			g.Enabled = b
		}
		if name == "" {
			p.fail("featureGates[%d]: %q has no gate name", i, s)
			continue
		}
		out = append(out, g)
	}
	return out
}

// pluginRefField decodes a mapping holding only pluginRef (path names
// it); required makes an empty one an error.
func (p *configParser) pluginRefField(n *yaml.Node, path string, required bool) string {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return ""
	}
	if n.Kind != yaml.MappingNode {
		p.fail("%s: must be a mapping with pluginRef (line %d)", path, n.Line)
		return ""
	}
	var ref string
	p.fields(n, path, func(key string, v *yaml.Node) bool {
		if key != "pluginRef" {
			return false
		}
		ref = p.str(v, path+".pluginRef")
		return true
	})
	if ref == "" && required {
		p.fail("%s: pluginRef: required (line %d)", path, n.Line)
	}
	return ref
}

// requestHandler decodes requestHandler: {parsers: [{pluginRef}]}.
func (p *configParser) requestHandler(n *yaml.Node) []string {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		p.fail("requestHandler: must be a mapping (line %d)", n.Line)
		return nil
	}
	var parsers []string
	p.fields(n, "requestHandler", func(key string, v *yaml.Node) bool {
		if key != "parsers" {
			return false
		}
		for _, ref := range p.pluginRefs(v, "requestHandler.parsers") {
			if ref != "" {
				parsers = append(parsers, ref)
			}
		}
		return true
	})
	return parsers
}

// flowControl decodes the flowControl section.
func (p *configParser) flowControl(n *yaml.Node) *FlowControlSpec {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		p.fail("flowControl: must be a mapping (line %d)", n.Line)
		return nil
	}
	f := &FlowControlSpec{}
	p.fields(n, "flowControl", func(key string, v *yaml.Node) bool {
		path := "flowControl." + key
		switch key {
		case "maxBytes":
			f.MaxBytes = p.quantity(v, path)
		case "maxRequests":
			f.MaxRequests = p.quantity(v, path)
		case "defaultRequestTTL":
			f.DefaultRequestTTL = p.duration(v, path)
		case "defaultPriorityBand":
			f.DefaultPriorityBand = p.priorityBand(v, path, false)
		case "defaultNegativePriorityBand":
			f.DefaultNegativePriorityBand = p.priorityBand(v, path, false)
		case "priorityBands":
			seen := map[int]string{}
			p.eachMapping(v, path, "priority, maxBytes, maxRequests, fairnessPolicyRef and orderingPolicyRef", func(ipath string, item *yaml.Node) {
				b := p.priorityBand(item, ipath, true)
				if b == nil {
					return
				}
				if prev, dup := seen[b.Priority]; dup {
					p.fail("%s: priority %d is already %s (line %d)", ipath, b.Priority, prev, item.Line)
					return
				}
				seen[b.Priority] = ipath
				f.PriorityBands = append(f.PriorityBands, *b)
			})
		case "usageLimitPolicyPluginRef":
			f.UsageLimitPolicyPluginRef = p.str(v, path)
		case "saturationDetector":
			f.SaturationDetector = p.pluginRefField(v, path, true)
		case "enableEviction":
			f.EnableEviction = p.boolean(v, path)
		default:
			return false
		}
		return true
	})
	return f
}

func (p *configParser) priorityBand(n *yaml.Node, path string, needPriority bool) *PriorityBandSpec {
	if n.Kind != yaml.MappingNode {
		p.fail("%s: must be a mapping (line %d)", path, n.Line)
		return nil
	}
	b := &PriorityBandSpec{}
	hasPriority := false
	p.fields(n, path, func(key string, v *yaml.Node) bool {
		kpath := path + "." + key
		switch key {
		case "priority":
			hasPriority = true
			b.Priority = p.integer(v, kpath)
		case "maxBytes":
			b.MaxBytes = p.quantity(v, kpath)
		case "maxRequests":
			b.MaxRequests = p.quantity(v, kpath)
		case "fairnessPolicyRef":
			b.FairnessPolicyRef = p.str(v, kpath)
		case "orderingPolicyRef":
			b.OrderingPolicyRef = p.str(v, kpath)
		default:
			return false
		}
		return true
	})
	if needPriority && !hasPriority {
		p.fail("%s: priority: required (line %d)", path, n.Line)
	}
	return b
}

func (p *configParser) quantity(n *yaml.Node, path string) *Quantity {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && n.Tag != "!!int" && n.Tag != "!!float") {
		p.fail("%s: must be a quantity such as 1000, 10k or 1Gi (line %d)", path, n.Line)
		return nil
	}
	q, err := ParseQuantity(strings.ReplaceAll(n.Value, "_", ""))
	if err != nil {
		p.fail("%s: %v (line %d)", path, err, n.Line)
		return nil
	}
	q.Text = n.Value
	return &q
}

func (p *configParser) duration(n *yaml.Node, path string) *time.Duration {
	s := p.str(n, path)
	if s == "" {
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		p.fail("%s: %q is not a duration such as 60s (line %d)", path, s, n.Line)
		return nil
	}
	return &d
}

func (p *configParser) integer(n *yaml.Node, path string) int {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		p.fail("%s: must be an integer (line %d)", path, n.Line)
		return 0
	}
	i, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 32)
	if err != nil {
		p.fail("%s: %q is not a 32-bit integer (line %d)", path, n.Value, n.Line)
		return 0
	}
	return int(i)
}

func (p *configParser) boolean(n *yaml.Node, path string) bool {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		p.fail("%s: must be true or false (line %d)", path, n.Line)
		return false
	}
	b, err := strconv.ParseBool(strings.ToLower(n.Value))
	if err != nil {
		p.fail("%s: %q is not true or false (line %d)", path, n.Value, n.Line)
	}
	return b
}

// data decodes the data-layer section (dataLayer, or the older data).
func (p *configParser) data(n *yaml.Node, path string) *DataSpec {
	if n.Kind != yaml.MappingNode {
		p.fail("%s: must be a mapping (line %d)", path, n.Line)
		return nil
	}
	spec := &DataSpec{section: path}
	p.fields(n, path, func(key string, v *yaml.Node) bool {
		kpath := path + "." + key
		switch key {
		case "sources":
			spec.Sources = p.dataSources(v, kpath)
		case "injectDefaults":
			b := p.boolean(v, kpath)
			spec.InjectDefaults = &b
		case "discovery":
			spec.Discovery = p.pluginRefField(v, kpath, true)
		case "crossReplicaSyncerPluginRef":
			spec.CrossReplicaSyncerPluginRef = p.str(v, kpath)
		case "crossReplicaSyncInterval":
			spec.CrossReplicaSyncInterval = p.duration(v, kpath)
		default:
			return false
		}
		return true
	})
	return spec
}

// legacySaturationDetector decodes the deprecated top-level
// saturationDetector: the llm-d router's {pluginRef}, or GIE's inline
// thresholds of its built-in detector (queueDepthThreshold,
// kvCacheUtilThreshold, metricsStalenessThreshold), which the caller turns
// into a utilization-detector plugin.
func (p *configParser) legacySaturationDetector(n *yaml.Node) (ref string, thresholds []byte) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return "", nil
	}
	if n.Kind != yaml.MappingNode {
		p.fail("saturationDetector: must be a mapping (line %d)", n.Line)
		return "", nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "pluginRef" {
			return p.pluginRefField(n, "saturationDetector", true), nil
		}
	}
	return "", p.rawObject(n, "saturationDetector")
}

// Names of what ParseConfig moves out of the deprecated fields.
const (
	// legacyDetectorName names the utilization-detector made from GIE's
	// inline saturationDetector thresholds (or this with a suffix, when a
	// declared plugin has the name).
	legacyDetectorName = "saturation-detector"
)

// migrate moves the deprecated top-level fields into the new layout, the
// new field winning when both are set, and notes each in Deprecations.
func (p *configParser) migrate(cfg *Config, legacyParser string, legacyDetector string, thresholds []byte, hasDetector bool) {
	if cfg.APIVersion == APIVersionGIE && !p.noVersion {
		cfg.Deprecations = append(cfg.Deprecations, fmt.Sprintf("apiVersion: %s is deprecated, use %s", APIVersionGIE, APIVersionLLMD))
	}
	if cfg.Data != nil && cfg.Data.section == "data" {
		cfg.Deprecations = append(cfg.Deprecations, "data: the section is called dataLayer")
	}
	// Gates that are gone upstream change nothing; they are dropped.
	gates := cfg.FeatureGates[:0]
	for i, g := range cfg.FeatureGates {
		if why, gone := removedGates[g.Name]; gone {
			cfg.Deprecations = append(cfg.Deprecations, fmt.Sprintf("featureGates[%d]: %s changes nothing (%s); remove it", i, g.Name, why))
			continue
		}
		gates = append(gates, g)
	}
	cfg.FeatureGates = gates
	if p.sawParser {
		cfg.Deprecations = append(cfg.Deprecations, "parser: the top-level parser is deprecated, use requestHandler.parsers (when both are set, requestHandler.parsers is used)")
		if len(cfg.Parsers) == 0 && legacyParser != "" {
			cfg.Parsers = []string{legacyParser}
		}
	}
	if !hasDetector {
		return
	}
	cfg.Deprecations = append(cfg.Deprecations, "saturationDetector: the top-level saturationDetector is deprecated, use flowControl.saturationDetector (when both are set, flowControl.saturationDetector is used)")
	if cfg.FlowControl != nil && cfg.FlowControl.SaturationDetector != "" {
		return
	}
	if thresholds != nil {
		name := uniqueName(cfg.Plugins, legacyDetectorName)
		cfg.Plugins = append(cfg.Plugins, PluginSpec{Type: TypeUtilizationDetector, Name: name, Parameters: thresholds})
		legacyDetector = name
	}
	if legacyDetector == "" {
		return
	}
	if cfg.FlowControl == nil {
		cfg.FlowControl = &FlowControlSpec{}
	}
	cfg.FlowControl.SaturationDetector = legacyDetector
}

// uniqueName returns name, or name-2, name-3 ... when a plugin has it.
func uniqueName(plugins []PluginSpec, name string) string {
	taken := func(n string) bool {
		for _, p := range plugins {
			if p.Name == n {
				return true
			}
		}
		return false
	}
	out := name
	for i := 2; taken(out); i++ {
		out = fmt.Sprintf("%s-%d", name, i)
	}
	return out
}

// GateEnabled reports whether featureGates enables the named gate (a
// later entry for a gate overrides an earlier one).
func (c *Config) GateEnabled(name string) bool {
	on := false
	for _, g := range c.FeatureGates {
		if g.Name == name {
			on = g.Enabled
		}
	}
	return on
}

// Plugin is the declared plugin named name.
func (c *Config) Plugin(name string) (PluginSpec, bool) {
	for _, p := range c.Plugins {
		if p.Name == name {
			return p, true
		}
	}
	return PluginSpec{}, false
}
