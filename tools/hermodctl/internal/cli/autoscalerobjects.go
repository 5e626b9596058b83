package cli

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/libs/yamlstream"
)

// The autoscaler's object kinds, as hermod-autoscaler reads them (the
// Workload Variant Autoscaler's YAML). hermodctl checks only what it needs
// to store an object under its key; the autoscaler validates the objects
// fully when it loads them.
const (
	kindVariant       = "VariantAutoscaling"
	kindConfigMap     = "ConfigMap"
	variantAPI        = "llmd.ai/v1alpha1"
	configMapAPI      = "v1"
	variantResource   = "variantautoscaling"
	configMapResource = "configmap"
)

// configMapNames are the ConfigMaps the autoscaler reads.
var configMapNames = []string{"wva-saturation-scaling-config", "wva-queueing-model-config", "wva-model-scale-to-zero-config"}

// errNoObjects is returned by parseObjects for a stream without a
// document.
var errNoObjects = errors.New("no objects: every document is empty")

// dns1123Subdomain is a Kubernetes object name, as the autoscaler requires
// of a VariantAutoscaling: it is also a safe etcd key element.
var dns1123Subdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// object is one autoscaler object of an applied stream.
type object struct {
	kind string // kindVariant or kindConfigMap
	name string
	doc  int    // its document's number in the stream, from 1
	data []byte // the document as written
}

// ref names the object as kubectl does: variantautoscaling/<name>.
func (o object) ref() string { return resourceRef(o.kind, o.name) }

// key returns the object's etcd key in pool.
func (o object) key(pool string) string { return objectKey(pool, o.kind, o.name) }

func resourceRef(kind, name string) string {
	if kind == kindConfigMap {
		return configMapResource + "/" + name
	}
	return variantResource + "/" + name
}

func objectKey(pool, kind, name string) string {
	if kind == kindConfigMap {
		return coord.AutoscalerConfigMapsPrefix(pool) + name
	}
	return coord.AutoscalerVariantsPrefix(pool) + name
}

// fieldError is a problem with one field of one object.
type fieldError struct {
	object string // `VariantAutoscaling "name"`, or "" when unknown
	field  string
	msg    string
}

func (e *fieldError) Error() string {
	var b strings.Builder
	if e.object != "" {
		b.WriteString(e.object + ": ")
	}
	if e.field != "" {
		b.WriteString(e.field + ": ")
	}
	b.WriteString(e.msg)
	return b.String()
}

// documentError is an error in one document of a stream; index counts the
// documents from 1, empty ones included (as hermod-autoscaler counts them).
type documentError struct {
	index int
	err   error
}

func (e *documentError) Error() string { return fmt.Sprintf("document %d: %v", e.index, e.err) }

func (e *documentError) Unwrap() error { return e.err }

// parseObjects splits a YAML stream (documents separated by "---" lines,
// each YAML or JSON) into objects, skipping empty documents. It checks
// that each document is a VariantAutoscaling or one of the autoscaler's
// ConfigMaps with the right apiVersion and a name, and that no two share
// a kind and name; it reports every problem, each naming its document and
// field, and returns no object then.
func parseObjects(data []byte) ([]object, error) {
	var objs []object
	var errs []error
	seen := map[string]int{}
	for i, doc := range yamlstream.Split(data) {
		index := i + 1
		obj, problems := parseObject(doc)
		for _, p := range problems {
			errs = append(errs, &documentError{index: index, err: p})
		}
		if obj == nil || len(problems) > 0 {
			continue
		}
		obj.doc = index
		if first, ok := seen[obj.ref()]; ok {
			errs = append(errs, &documentError{index: index, err: &fieldError{
				object: objectLabel(obj.kind, obj.name), field: "metadata.name", msg: fmt.Sprintf("document %d has the same kind and name", first)}})
			continue
		}
		seen[obj.ref()] = index
		objs = append(objs, *obj)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(objs) == 0 {
		return nil, errNoObjects
	}
	return objs, nil
}

// parseObject checks one document; nil and no problems for an empty one.
func parseObject(doc yamlstream.Document) (*object, []error) {
	var root yaml.Node
	if err := yaml.Unmarshal(doc.Text, &root); err != nil {
		return nil, []error{errors.New(yamlstream.ShiftLines(err.Error(), doc.Line))}
	}
	if len(root.Content) == 0 {
		return nil, nil
	}
	m := resolve(root.Content[0])
	if m.Kind != yaml.MappingNode {
		return nil, []error{&fieldError{msg: "must be a mapping with apiVersion, kind and metadata, got " + describeNode(m)}}
	}
	var problems []error
	add := func(object, field, format string, args ...any) {
		problems = append(problems, &fieldError{object: object, field: field, msg: fmt.Sprintf(format, args...)})
	}
	meta := lookup(m, "metadata")
	name, nameOK := scalar(lookup(meta, "name"))
	kind, kindOK := scalar(lookup(m, "kind"))
	label := ""
	var wantAPI string
	switch {
	case lookup(m, "kind") == nil:
		add("", "kind", "required (%s or %s)", kindVariant, kindConfigMap)
	case !kindOK || (kind != kindVariant && kind != kindConfigMap):
		add("", "kind", "must be %s or %s, got %s", kindVariant, kindConfigMap, describeValue(lookup(m, "kind")))
	default:
		label = objectLabel(kind, name)
		wantAPI = variantAPI
		if kind == kindConfigMap {
			wantAPI = configMapAPI
		}
	}
	api, apiOK := scalar(lookup(m, "apiVersion"))
	switch {
	case lookup(m, "apiVersion") == nil && wantAPI != "":
		add(label, "apiVersion", "required (%s)", wantAPI)
	case lookup(m, "apiVersion") == nil:
		add(label, "apiVersion", "required")
	case wantAPI != "" && (!apiOK || api != wantAPI):
		add(label, "apiVersion", "must be %s, got %s", wantAPI, describeValue(lookup(m, "apiVersion")))
	}
	switch {
	case meta != nil && meta.Kind != yaml.MappingNode:
		add(label, "metadata", "must be a mapping with name, got %s", describeNode(meta))
	case lookup(meta, "name") == nil || (nameOK && name == ""):
		if kind == kindConfigMap {
			add(label, "metadata.name", "required (%s)", strings.Join(configMapNames, ", "))
		} else {
			add(label, "metadata.name", "required")
		}
	case !nameOK:
		add(label, "metadata.name", "must be a string, got %s", describeValue(lookup(meta, "name")))
	case kind == kindConfigMap && !isConfigMapName(name):
		add(label, "metadata.name", "must be %s, got %q", strings.Join(configMapNames, ", "), name)
	case kind == kindVariant && (len(name) > 253 || !dns1123Subdomain.MatchString(name)):
		add(label, "metadata.name", "must be a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', "+
			"starting and ending with a letter or digit, at most 253 characters), got %q", name)
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return &object{kind: kind, name: name, data: doc.Text}, nil
}

func isConfigMapName(name string) bool {
	for _, n := range configMapNames {
		if n == name {
			return true
		}
	}
	return false
}

// objectLabel names an object in errors: `Kind "name"`, or the kind alone.
func objectLabel(kind, name string) string {
	if name == "" {
		return kind
	}
	return fmt.Sprintf("%s %q", kind, name)
}

// resolve follows an alias.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// lookup returns the value of key in mapping m, nil if m is not a mapping
// or lacks key.
func lookup(m *yaml.Node, key string) *yaml.Node {
	m = resolve(m)
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := resolve(m.Content[i]); k.Kind == yaml.ScalarNode && k.Value == key {
			return resolve(m.Content[i+1])
		}
	}
	return nil
}

// root returns a document's top node, nil for an empty document.
func root(doc *yaml.Node) *yaml.Node {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil
	}
	return resolve(doc.Content[0])
}

// scalar returns a string scalar's value.
func scalar(n *yaml.Node) (string, bool) {
	n = resolve(n)
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		return "", false
	}
	return n.Value, true
}

// display returns a scalar's text as written, "-" for anything else.
func display(n *yaml.Node) string {
	n = resolve(n)
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		return "-"
	}
	return n.Value
}

func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a sequence"
	default:
		return describeValue(n)
	}
}

func describeValue(n *yaml.Node) string {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode {
		return describeNode(n)
	}
	switch n.ShortTag() {
	case "!!str":
		return strconv.Quote(n.Value)
	case "!!null":
		return "null"
	default:
		return fmt.Sprintf("%s (%s)", n.Value, strings.TrimPrefix(n.ShortTag(), "!!"))
	}
}
