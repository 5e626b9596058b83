package scheduling

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// API versions of EndpointPickerConfig Hermod accepts.
const (
	APIVersionGIE  = "inference.networking.x-k8s.io/v1alpha1"
	APIVersionLLMD = "llm-d.ai/v1alpha1"
	ConfigKind     = "EndpointPickerConfig"
)

// Config is a parsed EndpointPickerConfig, before plugins are built, in
// the llm-d router's v0.9+ layout: ParseConfig moves the deprecated fields
// (top-level parser and saturationDetector) to where that layout keeps
// them and says so in Deprecations.
type Config struct {
	APIVersion         string
	Kind               string
	FeatureGates       []FeatureGate
	Plugins            []PluginSpec
	SchedulingProfiles []ProfileSpec
	// Data is the data-layer section (key dataLayer, or the older data).
	Data *DataSpec
	// Parsers are requestHandler.parsers' pluginRefs in order (matched by
	// path); the deprecated top-level parser gives one.
	Parsers []string
	// FlowControl is the flowControl section; the deprecated top-level
	// saturationDetector sets its SaturationDetector.
	FlowControl *FlowControlSpec
	// RequestControl is GIE's requestControl section, which the scheduling
	// core does not interpret.
	RequestControl json.RawMessage
	// Deprecations name each deprecated field the document uses and what
	// replaces it.
	Deprecations []string
	// FromValuesFile is set when the config came from a Helm values file's
	// `config:` key.
	FromValuesFile bool
}

// PluginSpec is one entry of plugins:.
type PluginSpec struct {
	Type       string
	Name       string // defaults to Type
	Parameters json.RawMessage
}

// ProfileSpec is one entry of schedulingProfiles:.
type ProfileSpec struct {
	Name    string
	Plugins []ProfilePluginSpec
}

// ProfilePluginSpec is a plugin reference inside a profile.
type ProfilePluginSpec struct {
	PluginRef string
	// Weight is nil when the config does not set one (default 1).
	Weight *float64
}

// DefaultConfig is the configuration used when none is given: queue-scorer
// (weight 2), kv-cache-utilization-scorer (2), prefix-cache-scorer (3) and
// max-score-picker in one profile.
func DefaultConfig() *Config {
	w := func(f float64) *float64 { return &f }
	return &Config{
		APIVersion: APIVersionGIE,
		Kind:       ConfigKind,
		Plugins: []PluginSpec{
			{Type: "queue-scorer", Name: "queue-scorer"},
			{Type: "kv-cache-utilization-scorer", Name: "kv-cache-utilization-scorer"},
			{Type: "prefix-cache-scorer", Name: "prefix-cache-scorer"},
			{Type: "max-score-picker", Name: "max-score-picker"},
		},
		SchedulingProfiles: []ProfileSpec{{
			Name: "default",
			Plugins: []ProfilePluginSpec{
				{PluginRef: "queue-scorer", Weight: w(2)},
				{PluginRef: "kv-cache-utilization-scorer", Weight: w(2)},
				{PluginRef: "prefix-cache-scorer", Weight: w(3)},
				{PluginRef: "max-score-picker"},
			},
		}},
	}
}

// ParseConfig parses an EndpointPickerConfig from YAML (or JSON). It also
// accepts a Heimdall Helm values file whose `config:` key holds the
// EndpointPickerConfig (as a mapping or as a YAML string). Unknown top-level
// keys, wrong types and missing required fields are errors naming the
// field; every problem found is reported (joined).
func ParseConfig(data []byte) (*Config, error) {
	doc, err := parseYAMLDocument(data)
	if err != nil {
		return nil, err
	}
	if doc.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("config: must be a mapping (line %d)", doc.Line)
	}
	fromValues := false
	if inner := valuesConfig(doc); inner != nil {
		fromValues = true
		if inner.Kind == yaml.ScalarNode && inner.Tag == "!!str" {
			doc, err = parseYAMLDocument([]byte(inner.Value))
			if err != nil {
				return nil, fmt.Errorf("config: %w", err)
			}
		} else {
			doc = inner
		}
		if doc.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("config: must be a mapping (line %d)", doc.Line)
		}
	}
	p := &configParser{}
	cfg := p.config(doc)
	if err := errors.Join(p.errs...); err != nil {
		return nil, err
	}
	cfg.FromValuesFile = fromValues
	return cfg, nil
}

func parseYAMLDocument(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("config is empty")
		}
		return nil, fmt.Errorf("config is not valid YAML: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, fmt.Errorf("config is not valid YAML: %w", err)
		}
		return nil, fmt.Errorf("config holds more than one YAML document (second at line %d)", extra.Line)
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 {
		return nil, errors.New("config is empty")
	}
	doc := root.Content[0]
	if doc.Kind == yaml.ScalarNode && doc.Tag == "!!null" {
		return nil, errors.New("config is empty")
	}
	return doc, nil
}

// ConfigDocument returns the EndpointPickerConfig document of data: data
// itself, or the `config:` block of a Heimdall Helm values file (its YAML
// string as is, or its mapping encoded anew).
func ConfigDocument(data []byte) ([]byte, error) {
	doc, err := parseYAMLDocument(data)
	if err != nil {
		return nil, err
	}
	inner := valuesConfig(doc)
	switch {
	case doc.Kind != yaml.MappingNode || inner == nil:
		return data, nil
	case inner.Kind == yaml.ScalarNode && inner.Tag == "!!str":
		return []byte(inner.Value), nil
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(inner); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return b.Bytes(), nil
}

// valuesConfig returns the `config:` node of a Helm values file: a mapping
// that has a config key and none of the EndpointPickerConfig keys.
func valuesConfig(doc *yaml.Node) *yaml.Node {
	var cfg *yaml.Node
	for i := 0; i+1 < len(doc.Content); i += 2 {
		switch doc.Content[i].Value {
		case "apiVersion", "kind", "plugins", "schedulingProfiles":
			return nil
		case "config":
			cfg = doc.Content[i+1]
		}
	}
	return cfg
}

type configParser struct {
	errs []error
	// noVersion: the document gives no apiVersion; sawParser: it has the
	// deprecated top-level parser.
	noVersion, sawParser bool
}

func (p *configParser) fail(format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf(format, args...))
}

func (p *configParser) config(doc *yaml.Node) *Config {
	cfg := &Config{}
	seen := map[string]bool{}
	var dataNode *yaml.Node
	var legacyParser, legacyDetector string
	var thresholds []byte
	hasDetector := false
	for i := 0; i+1 < len(doc.Content); i += 2 {
		k, v := doc.Content[i], doc.Content[i+1]
		if seen[k.Value] {
			p.fail("%s: defined twice (line %d)", k.Value, k.Line)
			continue
		}
		seen[k.Value] = true
		switch k.Value {
		case "apiVersion":
			cfg.APIVersion = p.str(v, "apiVersion")
		case "kind":
			cfg.Kind = p.str(v, "kind")
		case "featureGates":
			cfg.FeatureGates = p.featureGates(v)
		case "plugins":
			cfg.Plugins = p.plugins(v)
		case "schedulingProfiles":
			cfg.SchedulingProfiles = p.profiles(v)
		case "data", "dataLayer":
			if dataNode != nil {
				p.fail("%s: data and dataLayer are the same section; give only one (line %d)", k.Value, k.Line)
				continue
			}
			dataNode = v
			cfg.Data = p.data(v, k.Value)
		case "requestHandler":
			cfg.Parsers = p.requestHandler(v)
		case "flowControl":
			cfg.FlowControl = p.flowControl(v)
		case "saturationDetector":
			hasDetector = v.Kind != yaml.ScalarNode || v.Tag != "!!null"
			legacyDetector, thresholds = p.legacySaturationDetector(v)
		case "parser":
			p.sawParser = true
			legacyParser = p.pluginRefField(v, "parser", false)
		case "requestControl":
			cfg.RequestControl = p.rawObject(v, k.Value)
		default:
			p.fail("%s: unknown field at the top level of EndpointPickerConfig (line %d)", k.Value, k.Line)
		}
	}
	// Both may be left out (published examples often are); given, they must
	// name an EndpointPickerConfig.
	switch cfg.APIVersion {
	case "":
		p.noVersion = true
		cfg.APIVersion = APIVersionLLMD
	case APIVersionGIE, APIVersionLLMD:
	default:
		p.fail("apiVersion: %q is not supported (use %s or %s)", cfg.APIVersion, APIVersionLLMD, APIVersionGIE)
	}
	switch cfg.Kind {
	case "":
		cfg.Kind = ConfigKind
	case ConfigKind:
	default:
		p.fail("kind: %q is not supported (use %s)", cfg.Kind, ConfigKind)
	}
	p.migrate(cfg, legacyParser, legacyDetector, thresholds, hasDetector)
	return cfg
}

func (p *configParser) plugins(n *yaml.Node) []PluginSpec {
	out := decodeMappings(p, n, "plugins", "type, name and parameters", "type",
		func(spec *PluginSpec) string { return spec.Type },
		func(spec *PluginSpec, path, key string, v *yaml.Node) bool {
			switch key {
			case "type":
				spec.Type = p.str(v, path+".type")
			case "name":
				spec.Name = p.str(v, path+".name")
			case "parameters":
				spec.Parameters = p.rawObject(v, path+".parameters")
			default:
				return false
			}
			return true
		})
	for i := range out {
		if out[i].Name == "" {
			out[i].Name = out[i].Type
		}
	}
	return out
}

func (p *configParser) profiles(n *yaml.Node) []ProfileSpec {
	return decodeMappings(p, n, "schedulingProfiles", "name and plugins", "name",
		func(spec *ProfileSpec) string { return spec.Name },
		func(spec *ProfileSpec, path, key string, v *yaml.Node) bool {
			switch key {
			case "name":
				spec.Name = p.str(v, path+".name")
			case "plugins":
				spec.Plugins = p.profilePlugins(v, path+".plugins")
			default:
				return false
			}
			return true
		})
}

func (p *configParser) profilePlugins(n *yaml.Node, path string) []ProfilePluginSpec {
	return decodeMappings(p, n, path, "pluginRef and weight", "pluginRef",
		func(spec *ProfilePluginSpec) string { return spec.PluginRef },
		func(spec *ProfilePluginSpec, ipath, key string, v *yaml.Node) bool {
			switch key {
			case "pluginRef":
				spec.PluginRef = p.str(v, ipath+".pluginRef")
			case "weight":
				spec.Weight = p.weight(v, ipath+".weight")
			default:
				return false
			}
			return true
		})
}

func (p *configParser) dataSources(n *yaml.Node, path string) []DataSourceSpec {
	return decodeMappings(p, n, path, "pluginRef and extractors", "pluginRef",
		func(s *DataSourceSpec) string { return s.PluginRef },
		func(s *DataSourceSpec, spath, key string, v *yaml.Node) bool {
			switch key {
			case "pluginRef":
				s.PluginRef = p.str(v, spath+".pluginRef")
			case "extractors":
				for _, ref := range p.pluginRefs(v, spath+".extractors") {
					if ref != "" {
						s.Extractors = append(s.Extractors, ref)
					}
				}
			default:
				return false
			}
			return true
		})
}

// pluginRefs decodes a list of mappings each holding only a required
// pluginRef; an item without one gives "".
func (p *configParser) pluginRefs(n *yaml.Node, path string) []string {
	return decodeMappings(p, n, path, "pluginRef", "pluginRef",
		func(ref *string) string { return *ref },
		func(ref *string, epath, key string, v *yaml.Node) bool {
			if key != "pluginRef" {
				return false
			}
			*ref = p.str(v, epath+".pluginRef")
			return true
		})
}

// decodeMappings decodes a list of mappings (see eachMapping) into one T
// per item. field decodes one key of an item (path is the item's) and
// returns false for an unknown key; required names the key the item must
// set, whose value get reads.
func decodeMappings[T any](p *configParser, n *yaml.Node, path, holds, required string,
	get func(*T) string, field func(t *T, path, key string, v *yaml.Node) bool) []T {
	var out []T
	p.eachMapping(n, path, holds, func(ipath string, item *yaml.Node) {
		var t T
		p.fields(item, ipath, func(key string, v *yaml.Node) bool { return field(&t, ipath, key, v) })
		if get(&t) == "" {
			p.fail("%s: %s: required (line %d)", ipath, required, item.Line)
		}
		out = append(out, t)
	})
	return out
}

// eachMapping calls f for each item of a list of mappings; a null list is
// empty, and an item that is not a mapping is an error saying what it should
// hold.
func (p *configParser) eachMapping(n *yaml.Node, path, holds string, f func(path string, item *yaml.Node)) {
	if !p.isSeq(n, path) {
		return
	}
	for i, item := range n.Content {
		ipath := fmt.Sprintf("%s[%d]", path, i)
		if item.Kind != yaml.MappingNode {
			p.fail("%s: must be a mapping with %s (line %d)", ipath, holds, item.Line)
			continue
		}
		f(ipath, item)
	}
}

// fields walks a mapping, calling f for each key; f returns false for an
// unknown key, which is an error. Duplicate keys are errors.
func (p *configParser) fields(n *yaml.Node, path string, f func(key string, v *yaml.Node) bool) {
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if seen[k.Value] {
			p.fail("%s.%s: defined twice (line %d)", path, k.Value, k.Line)
			continue
		}
		seen[k.Value] = true
		if !f(k.Value, v) {
			p.fail("%s.%s: unknown field (line %d)", path, k.Value, k.Line)
		}
	}
}

func (p *configParser) isSeq(n *yaml.Node, path string) bool {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return false
	}
	if n.Kind != yaml.SequenceNode {
		p.fail("%s: must be a list (line %d)", path, n.Line)
		return false
	}
	return true
}

func (p *configParser) str(n *yaml.Node, path string) string {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			return ""
		}
		p.fail("%s: must be a string (line %d)", path, n.Line)
		return ""
	}
	return n.Value
}

func (p *configParser) strList(n *yaml.Node, path string) []string {
	if !p.isSeq(n, path) {
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		if s := p.str(item, fmt.Sprintf("%s[%d]", path, i)); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func (p *configParser) weight(n *yaml.Node, path string) *float64 {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
		p.fail("%s: must be a number (line %d)", path, n.Line)
		return nil
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
	if err != nil {
		if i, ierr := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64); ierr == nil {
			f, err = float64(i), nil
		}
	}
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		p.fail("%s: must be a finite number (line %d)", path, n.Line)
		return nil
	}
	if f < 0 {
		p.fail("%s: must not be negative (line %d)", path, n.Line)
		return nil
	}
	return &f
}

// rawObject converts a mapping node to JSON; null or absent gives nil.
func (p *configParser) rawObject(n *yaml.Node, path string) json.RawMessage {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	isAliasedMapping := n.Kind == yaml.AliasNode && n.Alias != nil && n.Alias.Kind == yaml.MappingNode
	if n.Kind != yaml.MappingNode && !isAliasedMapping {
		p.fail("%s: must be a mapping (line %d)", path, n.Line)
		return nil
	}
	x := expander{budget: maxExpandedNodes}
	if err := x.json(n, path, 0); err != nil {
		p.errs = append(p.errs, err)
		return nil
	}
	return x.buf.Bytes()
}

// Limits on turning a YAML section into JSON. Aliases and merge keys let a
// small document describe an exponentially large one ("billion laughs"):
// every node visited, including while resolving merges, spends budget.
const (
	maxYAMLDepth     = 64
	maxExpandedNodes = 1 << 16
)

// expander writes YAML nodes as JSON within a node budget. Mapping keys
// must be scalars; aliases are expanded; merge keys (<<) are applied.
type expander struct {
	buf    bytes.Buffer
	budget int
}

func (x *expander) spend(path string, n *yaml.Node, cost int) error {
	x.budget -= cost
	if x.budget < 0 {
		return fmt.Errorf("%s: expands to more than %d YAML nodes (aliases or merge keys?) (line %d)", path, maxExpandedNodes, n.Line)
	}
	return nil
}

func (x *expander) json(n *yaml.Node, path string, depth int) error {
	if depth > maxYAMLDepth {
		return fmt.Errorf("%s: nested more than %d levels deep (line %d)", path, maxYAMLDepth, n.Line)
	}
	if err := x.spend(path, n, 1); err != nil {
		return err
	}
	switch n.Kind {
	case yaml.AliasNode:
		return x.json(n.Alias, path, depth+1)
	case yaml.MappingNode:
		pairs, err := x.pairs(n, path, depth)
		if err != nil {
			return err
		}
		x.buf.WriteByte('{')
		for i, kv := range pairs {
			if i > 0 {
				x.buf.WriteByte(',')
			}
			kb, _ := json.Marshal(kv.key)
			x.buf.Write(kb)
			x.buf.WriteByte(':')
			if err := x.json(kv.value, path+"."+kv.key, depth+1); err != nil {
				return err
			}
		}
		x.buf.WriteByte('}')
		return nil
	case yaml.SequenceNode:
		x.buf.WriteByte('[')
		for i, item := range n.Content {
			if i > 0 {
				x.buf.WriteByte(',')
			}
			if err := x.json(item, fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
				return err
			}
		}
		x.buf.WriteByte(']')
		return nil
	case yaml.ScalarNode:
		return scalarToJSON(n, &x.buf, path)
	}
	return fmt.Errorf("%s: unsupported YAML node (line %d)", path, n.Line)
}

type yamlPair struct {
	key   string
	value *yaml.Node
}

// pairs lists a mapping's key/value pairs in order, applying merge keys
// (explicit keys win over merged ones) and rejecting duplicates.
func (x *expander) pairs(n *yaml.Node, path string, depth int) ([]yamlPair, error) {
	if depth > maxYAMLDepth {
		return nil, fmt.Errorf("%s: nested more than %d levels deep (line %d)", path, maxYAMLDepth, n.Line)
	}
	if err := x.spend(path, n, len(n.Content)/2); err != nil {
		return nil, err
	}
	var pairs []yamlPair
	index := map[string]int{}
	var merged []yamlPair
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("%s: mapping keys must be scalars (line %d)", path, k.Line)
		}
		if k.Tag == "!!merge" {
			src := v
			if src.Kind == yaml.AliasNode {
				src = src.Alias
			}
			var sources []*yaml.Node
			switch src.Kind {
			case yaml.MappingNode:
				sources = []*yaml.Node{src}
			case yaml.SequenceNode:
				for _, s := range src.Content {
					if s.Kind == yaml.AliasNode {
						s = s.Alias
					}
					sources = append(sources, s)
				}
			}
			for _, s := range sources {
				if s == nil || s.Kind != yaml.MappingNode {
					return nil, fmt.Errorf("%s: << must merge mappings (line %d)", path, v.Line)
				}
				sp, err := x.pairs(s, path, depth+1)
				if err != nil {
					return nil, err
				}
				merged = append(merged, sp...)
			}
			continue
		}
		if _, dup := index[k.Value]; dup {
			return nil, fmt.Errorf("%s.%s: defined twice (line %d)", path, k.Value, k.Line)
		}
		index[k.Value] = len(pairs)
		pairs = append(pairs, yamlPair{k.Value, v})
	}
	for _, m := range merged {
		if _, ok := index[m.key]; ok {
			continue
		}
		index[m.key] = len(pairs)
		pairs = append(pairs, m)
	}
	return pairs, nil
}

func scalarToJSON(n *yaml.Node, buf *bytes.Buffer, path string) error {
	switch n.Tag {
	case "!!null":
		buf.WriteString("null")
	case "!!bool":
		b, err := strconv.ParseBool(strings.ToLower(n.Value))
		if err != nil {
			return fmt.Errorf("%s: %q is not a boolean (line %d)", path, n.Value, n.Line)
		}
		buf.WriteString(strconv.FormatBool(b))
	case "!!int":
		v := strings.ReplaceAll(n.Value, "_", "")
		if i, err := strconv.ParseInt(v, 0, 64); err == nil {
			buf.WriteString(strconv.FormatInt(i, 10))
		} else if u, err := strconv.ParseUint(v, 0, 64); err == nil {
			buf.WriteString(strconv.FormatUint(u, 10))
		} else {
			return fmt.Errorf("%s: %q is not a 64-bit integer (line %d)", path, n.Value, n.Line)
		}
	case "!!float":
		f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%s: %q is not a finite number (line %d)", path, n.Value, n.Line)
		}
		buf.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
	default: // !!str, !!timestamp, !!binary and custom tags keep their text
		b, _ := json.Marshal(n.Value)
		buf.Write(b)
	}
	return nil
}
