package config

import (
	"errors"
	"fmt"
	"reflect"

	"sigs.k8s.io/yaml"

	"github.com/hermod/hermod/libs/yamlstream"
)

// Object is a parsed configuration object: *VariantAutoscaling,
// *SaturationConfigMap, *QueueingConfigMap or *ScaleToZeroConfigMap.
type Object interface {
	// ObjectKind returns "VariantAutoscaling" or "ConfigMap".
	ObjectKind() string
	// ObjectName returns metadata.name.
	ObjectName() string
	// Validate returns every problem of the object as a *FieldError
	// (joined with errors.Join); nil when the object is valid.
	Validate() error
}

// The Object implementations.
var (
	_ Object = (*VariantAutoscaling)(nil)
	_ Object = (*SaturationConfigMap)(nil)
	_ Object = (*QueueingConfigMap)(nil)
	_ Object = (*ScaleToZeroConfigMap)(nil)
)

// configMapDoc is a ConfigMap as written.
type configMapDoc struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   ObjectMeta        `json:"metadata"`
	Data       map[string]string `json:"data,omitempty"`
}

// Parse decodes a stream of YAML documents separated by "---" lines (each
// document may also be JSON) into objects, in stream order. Empty
// documents are skipped. Decoding is strict: unknown fields (matched case
// sensitively), wrong types, duplicate keys and invalid values are errors.
// Each error is a *DocumentError wrapping a *FieldError (or a syntax
// error), e.g.
//
//	document 1: VariantAutoscaling "llama-8b-a10g": spec.maxReplica: unknown field
//
// Every problem of every document is reported, joined with errors.Join;
// on error no objects are returned. Cross-object rules (duplicates,
// groups) are checked by NewSet.
func Parse(data []byte) ([]Object, error) {
	var objs []Object
	var errs []error
	for i, doc := range yamlstream.Split(data) {
		obj, docErrs := parseDocument(doc)
		for _, err := range docErrs {
			errs = append(errs, &DocumentError{Index: i + 1, Err: err})
		}
		if obj != nil && len(docErrs) == 0 {
			objs = append(objs, obj)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return objs, nil
}

// parseDocument decodes and validates one document; nil, nil for an
// empty document.
func parseDocument(doc yamlstream.Document) (Object, []error) {
	js, tree, err := toJSON(doc.Text, doc.Line)
	if err != nil {
		return nil, []error{err}
	}
	if tree == nil {
		return nil, nil
	}
	m, ok := tree.(map[string]any)
	if !ok {
		return nil, []error{fmt.Errorf("must be a mapping with apiVersion and kind, got %s", describe(tree))}
	}
	kind, _ := m["kind"].(string)
	name := ""
	if meta, ok := m["metadata"].(map[string]any); ok {
		name, _ = meta["name"].(string)
	}
	switch kind {
	case VariantAutoscalingKind:
		va := &VariantAutoscaling{}
		label := objectLabel(VariantAutoscalingKind, name)
		var p problems
		if !decodeStrict(js, tree, va, "", &p) {
			return nil, p.errs(label)
		}
		if err := va.Validate(); err != nil {
			return nil, unjoin(err)
		}
		return va, nil
	case ConfigMapKind:
		return parseConfigMap(js, tree, name)
	default:
		msg := fmt.Sprintf("must be %s or %s, got %s", VariantAutoscalingKind, ConfigMapKind, describe(m["kind"]))
		if m["kind"] == nil {
			msg = fmt.Sprintf("required (%s or %s)", VariantAutoscalingKind, ConfigMapKind)
		}
		return nil, []error{&FieldError{Object: truncate(name), Field: "kind", Msg: msg}}
	}
}

// parseConfigMap decodes a ConfigMap document and each of its data
// entries with the entry type its name selects.
func parseConfigMap(js []byte, tree any, name string) (Object, []error) {
	label := configMapLabel(name)
	var p problems
	var doc configMapDoc
	if !decodeStrict(js, tree, &doc, "", &p) {
		return nil, p.errs(label)
	}
	if doc.APIVersion != ConfigMapAPIVersion {
		p.addf("apiVersion", "must be %s, got %q", ConfigMapAPIVersion, truncate(doc.APIVersion))
	}
	var obj Object
	switch name {
	case SaturationConfigMapName:
		obj = &SaturationConfigMap{Metadata: doc.Metadata, Entries: parseEntries[SaturationEntry](doc.Data, &p)}
	case QueueingConfigMapName:
		obj = &QueueingConfigMap{Metadata: doc.Metadata, Entries: parseEntries[QueueingEntry](doc.Data, &p)}
	case ScaleToZeroConfigMapName:
		obj = &ScaleToZeroConfigMap{Metadata: doc.Metadata, Entries: parseEntries[ScaleToZeroEntry](doc.Data, &p)}
	case "":
		p.addf("metadata.name", "required (%s, %s or %s)", SaturationConfigMapName, QueueingConfigMapName, ScaleToZeroConfigMapName)
	default:
		p.addf("metadata.name", "must be %s, %s or %s, got %q",
			SaturationConfigMapName, QueueingConfigMapName, ScaleToZeroConfigMapName, truncate(name))
	}
	if len(p) > 0 {
		return nil, p.errs(label)
	}
	if err := obj.Validate(); err != nil {
		return nil, unjoin(err)
	}
	return obj, nil
}

// parseEntries decodes every data entry (a YAML or JSON document) into E.
// An empty entry sets nothing.
func parseEntries[E any](data map[string]string, p *problems) map[string]E {
	entries := make(map[string]E, len(data))
	for _, name := range sortedKeys(data) {
		path := joinPath("data", name)
		js, tree, err := entryJSON(data[name])
		if err != nil {
			p.addf(path, "%v", err)
			continue
		}
		var e E
		if tree != nil {
			if _, ok := tree.(map[string]any); !ok {
				p.addf(path, "must be a YAML mapping of settings, got %s", describe(tree))
				continue
			}
			if !decodeStrict(js, tree, &e, path, p) {
				continue
			}
		}
		entries[name] = e
	}
	return entries
}

// entryJSON converts a data entry, which must hold at most one non-empty
// YAML document (yaml.v2 would silently ignore the others).
func entryJSON(entry string) ([]byte, any, error) {
	var js []byte
	var tree any
	for _, doc := range yamlstream.Split([]byte(entry)) {
		j, t, err := toJSON(doc.Text, doc.Line)
		if err != nil {
			return nil, nil, err
		}
		if t == nil {
			continue
		}
		if tree != nil {
			return nil, nil, errors.New("must hold a single YAML document, found a second one")
		}
		js, tree = j, t
	}
	return js, tree, nil
}

// objectLabel names an object in errors: `Kind "name"`, or just the kind
// when the name is unknown.
func objectLabel(kind, name string) string {
	if name == "" {
		return truncate(kind)
	}
	return fmt.Sprintf("%s %q", truncate(kind), truncate(name))
}

// unjoin splits an errors.Join error into its errors.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// Marshal encodes an object as a YAML document that Parse decodes back to
// an equal object. A VariantAutoscaling is written as stored: unset
// optional fields stay unset (call SetDefaults first to show the
// defaults). A ConfigMap's entries are written as YAML strings under data.
func Marshal(obj Object) ([]byte, error) {
	var v any
	switch o := obj.(type) {
	case *VariantAutoscaling:
		if o == nil {
			return nil, errors.New("marshal: nil VariantAutoscaling")
		}
		v = o
	case configMapObject:
		if reflect.ValueOf(o).IsNil() {
			return nil, errors.New("marshal: nil ConfigMap")
		}
		doc, err := o.configMapDoc()
		if err != nil {
			return nil, err
		}
		v = doc
	default:
		return nil, fmt.Errorf("marshal: unsupported object %T", obj)
	}
	out, err := yaml.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("marshal %s %q: %w", obj.ObjectKind(), obj.ObjectName(), err)
	}
	return out, nil
}

// configMapObject is one of the ConfigMap Objects: *SaturationConfigMap,
// *QueueingConfigMap or *ScaleToZeroConfigMap.
type configMapObject interface {
	Object
	// configMapDoc returns the document Marshal writes.
	configMapDoc() (*configMapDoc, error)
}

// configMapDocOf builds the ConfigMap document of parsed entries, each
// entry written as a YAML string.
func configMapDocOf[E any](meta ObjectMeta, entries map[string]E) (*configMapDoc, error) {
	doc := &configMapDoc{APIVersion: ConfigMapAPIVersion, Kind: ConfigMapKind, Metadata: meta}
	if len(entries) > 0 {
		doc.Data = make(map[string]string, len(entries))
		for name, e := range entries {
			b, err := yaml.Marshal(e)
			if err != nil {
				return nil, fmt.Errorf("marshal %s: %w", joinPath("data", name), err)
			}
			doc.Data[name] = string(b)
		}
	}
	return doc, nil
}
