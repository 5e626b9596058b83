package scheduling

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"
)

// Document writes cfg as an EndpointPickerConfig in the llm-d router's
// v0.9+ layout (apiVersion llm-d.ai/v1alpha1, requestHandler.parsers,
// flowControl.saturationDetector), fields in the upstream order; what
// ParseConfig reads back from it is cfg again.
func (cfg *Config) Document() *yaml.Node {
	doc := mapping()
	add(doc, "apiVersion", str(APIVersionLLMD))
	add(doc, "kind", str(ConfigKind))
	if len(cfg.FeatureGates) > 0 {
		gates := seq()
		for _, g := range cfg.FeatureGates {
			gates.Content = append(gates.Content, str(g.String()))
		}
		add(doc, "featureGates", gates)
	}
	plugins := seq()
	for _, p := range cfg.Plugins {
		m := mapping()
		if p.Name != "" && p.Name != p.Type {
			add(m, "name", str(p.Name))
		}
		add(m, "type", str(p.Type))
		if len(p.Parameters) > 0 && !bytes.Equal(bytes.TrimSpace(p.Parameters), []byte("null")) {
			add(m, "parameters", jsonNode(p.Parameters))
		}
		plugins.Content = append(plugins.Content, m)
	}
	add(doc, "plugins", plugins)
	if len(cfg.SchedulingProfiles) > 0 {
		profiles := seq()
		for _, pr := range cfg.SchedulingProfiles {
			refs := seq()
			for _, ref := range pr.Plugins {
				m := mapping()
				add(m, "pluginRef", str(ref.PluginRef))
				if ref.Weight != nil {
					add(m, "weight", number(*ref.Weight))
				}
				refs.Content = append(refs.Content, m)
			}
			m := mapping()
			add(m, "name", str(pr.Name))
			add(m, "plugins", refs)
			profiles.Content = append(profiles.Content, m)
		}
		add(doc, "schedulingProfiles", profiles)
	}
	if len(cfg.Parsers) > 0 {
		add(doc, "requestHandler", single("parsers", refList(cfg.Parsers)))
	}
	if d := cfg.Data; d != nil {
		m := mapping()
		if d.InjectDefaults != nil {
			add(m, "injectDefaults", boolean(*d.InjectDefaults))
		}
		if len(d.Sources) > 0 {
			sources := seq()
			for _, src := range d.Sources {
				s := mapping()
				add(s, "pluginRef", str(src.PluginRef))
				if len(src.Extractors) > 0 {
					add(s, "extractors", refList(src.Extractors))
				}
				sources.Content = append(sources.Content, s)
			}
			add(m, "sources", sources)
		}
		if d.Discovery != "" {
			add(m, "discovery", single("pluginRef", str(d.Discovery)))
		}
		if d.CrossReplicaSyncerPluginRef != "" {
			add(m, "crossReplicaSyncerPluginRef", str(d.CrossReplicaSyncerPluginRef))
		}
		if d.CrossReplicaSyncInterval != nil {
			add(m, "crossReplicaSyncInterval", str(d.CrossReplicaSyncInterval.String()))
		}
		add(doc, "dataLayer", m)
	}
	if f := cfg.FlowControl; f != nil {
		add(doc, "flowControl", flowControlNode(f))
	}
	if len(cfg.RequestControl) > 0 {
		add(doc, "requestControl", jsonNode(cfg.RequestControl))
	}
	return doc
}

func flowControlNode(f *FlowControlSpec) *yaml.Node {
	m := mapping()
	quantity(m, "maxBytes", f.MaxBytes)
	quantity(m, "maxRequests", f.MaxRequests)
	if f.DefaultRequestTTL != nil {
		add(m, "defaultRequestTTL", str(durationText(*f.DefaultRequestTTL)))
	}
	if f.DefaultPriorityBand != nil {
		add(m, "defaultPriorityBand", bandNode(f.DefaultPriorityBand, false))
	}
	if f.DefaultNegativePriorityBand != nil {
		add(m, "defaultNegativePriorityBand", bandNode(f.DefaultNegativePriorityBand, false))
	}
	if len(f.PriorityBands) > 0 {
		bands := seq()
		for i := range f.PriorityBands {
			bands.Content = append(bands.Content, bandNode(&f.PriorityBands[i], true))
		}
		add(m, "priorityBands", bands)
	}
	if f.UsageLimitPolicyPluginRef != "" {
		add(m, "usageLimitPolicyPluginRef", str(f.UsageLimitPolicyPluginRef))
	}
	if f.SaturationDetector != "" {
		add(m, "saturationDetector", single("pluginRef", str(f.SaturationDetector)))
	}
	if f.EnableEviction {
		add(m, "enableEviction", boolean(true))
	}
	return m
}

func bandNode(b *PriorityBandSpec, withPriority bool) *yaml.Node {
	m := mapping()
	if withPriority {
		add(m, "priority", number(float64(b.Priority)))
	}
	quantity(m, "maxBytes", b.MaxBytes)
	quantity(m, "maxRequests", b.MaxRequests)
	if b.FairnessPolicyRef != "" {
		add(m, "fairnessPolicyRef", str(b.FairnessPolicyRef))
	}
	if b.OrderingPolicyRef != "" {
		add(m, "orderingPolicyRef", str(b.OrderingPolicyRef))
	}
	return m
}

// durationText writes a duration as Go does, 0 as 0s.
func durationText(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	return d.String()
}

// MarshalConfig writes cfg in the v0.9+ layout as YAML (see Document).
func MarshalConfig(cfg *Config) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(cfg.Document()); err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	return b.Bytes(), nil
}

// DocumentJSON writes a YAML document node (Document's) as JSON, keys in
// order.
func DocumentJSON(n *yaml.Node) ([]byte, error) {
	x := expander{budget: maxExpandedNodes}
	if err := x.json(n, "config", 0); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, x.buf.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func mapping() *yaml.Node { return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"} }
func seq() *yaml.Node     { return &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"} }

func str(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

func boolean(b bool) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(b)}
}

func number(f float64) *yaml.Node {
	if f == float64(int64(f)) {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(int64(f), 10)}
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: strconv.FormatFloat(f, 'g', -1, 64)}
}

func add(m *yaml.Node, key string, v *yaml.Node) { m.Content = append(m.Content, str(key), v) }

func single(key string, v *yaml.Node) *yaml.Node {
	m := mapping()
	add(m, key, v)
	return m
}

func refList(refs []string) *yaml.Node {
	out := seq()
	for _, r := range refs {
		out.Content = append(out.Content, single("pluginRef", str(r)))
	}
	return out
}

// quantity writes a quantity as written; a number stays a number.
func quantity(m *yaml.Node, key string, q *Quantity) {
	if q == nil {
		return
	}
	if _, err := strconv.ParseInt(q.Text, 10, 64); err == nil {
		add(m, key, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: q.Text})
		return
	}
	add(m, key, str(q.Text))
}

// jsonNode turns JSON (parameters, as ParseConfig keeps them) into YAML
// nodes, keys in their order.
func jsonNode(raw json.RawMessage) *yaml.Node {
	var n yaml.Node
	if err := yaml.Unmarshal(raw, &n); err != nil || n.Kind != yaml.DocumentNode || len(n.Content) != 1 {
		return str(string(raw))
	}
	plain(n.Content[0])
	return n.Content[0]
}

// plain drops the flow style and quotes JSON parsing leaves (the encoder
// quotes a string that would read back as another type).
func plain(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		plain(c)
	}
}
