package filediscovery

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/services/collector/internal/registrysync"
)

// DiscoveredByFile is the value of the label registrysync.LabelDiscoveredBy
// on the entries of an endpoints file.
const DiscoveredByFile = "file"

// endpointsKey is the endpoints file's one top-level key.
const endpointsKey = "endpoints"

// File is the endpoints file: YAML (or JSON, which is YAML) of one document
//
//	endpoints:
//	  - name: vm-1
//	    address: 10.1.2.3:8000
//	    model: meta-llama/Llama-3.1-8B-Instruct
//	    ...
//
// whose entries have the fields of coord.EndpointSpec, named like the flags
// of `hermodctl endpoints register`, or are written as the llm-d router's
// file-discovery has them (see FileEntry):
//
//	endpoints:
//	  - name: vllm-0
//	    namespace: inference        # optional
//	    address: "10.0.0.1"
//	    port: "8000"
//	    labels: {model: llama-3-8b} # optional
type File struct {
	Endpoints []FileEntry `json:"endpoints" yaml:"endpoints"`
}

// DefaultNamespace is the namespace of an entry that gives none, as the
// llm-d router has it; such an entry's registry name is its name.
const DefaultNamespace = "default"

// FileEntry is an entry of the file: the fields of coord.EndpointSpec and
// the two the llm-d router's file-discovery adds, namespace and port.
//
// With a port the entry is in the router's form: the address is the host
// alone, an IPv4 address and the port 1 to 65535 (as the router checks
// them, so that a file Hermod takes works there too), and the model may be
// left out (the collector reads the endpoint's models from its
// /v1/models). Without a port the address is host:port and the model is
// required, as for `hermodctl endpoints register`. The Hermod fields
// (model, served-models, kv-events, ...) may be added to an entry in the
// router's form; the router ignores them.
type FileEntry struct {
	coord.EndpointSpec `yaml:",inline"`
	// Namespace qualifies the name: an entry of a namespace other than
	// DefaultNamespace is registered as <name>.<namespace>, so that the
	// same name in two namespaces stands for two endpoints, as in the
	// router.
	Namespace string `json:"namespace,omitempty" yaml:"namespace,omitempty"`
	// Port is the port of the address, a decimal string or number.
	Port string `json:"port,omitempty" yaml:"port,omitempty"`

	// hasPort says that the entry has the key port (it may be empty).
	hasPort bool
}

// Entry is an endpoint of the file and the line it starts on.
type Entry struct {
	Line int
	Spec FileEntry
}

// LineError is a problem of the file at a line (0 when none applies).
type LineError struct {
	Line int
	// Entry is the 1-based index of the entry it concerns (0: none) and
	// Name its name, if it has one.
	Entry int
	Name  string
	Err   error
}

func (e *LineError) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Entry > 0 {
		fmt.Fprintf(&b, "endpoint %d", e.Entry)
		if e.Name != "" {
			fmt.Fprintf(&b, " (%s)", e.Name)
		}
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *LineError) Unwrap() error { return e.Err }

// The keys of an entry that only the router's form has.
const (
	namespaceKey = "namespace"
	portKey      = "port"
)

// specFields are the keys of an entry: the yaml names of
// coord.EndpointSpec, then the router's namespace and port.
var specFields = func() []string {
	var out []string
	t := reflect.TypeFor[coord.EndpointSpec]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		out = append(out, name)
	}
	return append(out, namespaceKey, portKey)
}()

// Decode parses an endpoints file into its entries, strictly: one
// document, a mapping whose one key is "endpoints", a sequence of mappings
// with the keys of FileEntry only, each at most once. Errors are
// *LineErrors (several joined) or YAML syntax errors, which name lines too.
// It does not check the entries' values (Parse does).
func Decode(data []byte) ([]Entry, error) {
	root, err := document(data)
	if err != nil {
		return nil, err
	}
	seq, err := endpointsNode(root)
	if err != nil || seq == nil {
		return nil, err
	}
	var (
		entries = make([]Entry, 0, len(seq.Content))
		errs    []error
	)
	for i, n := range seq.Content {
		spec, err := decodeEntry(n)
		if err != nil {
			errs = append(errs, &LineError{Line: n.Line, Entry: i + 1, Name: spec.Name, Err: err})
			continue
		}
		entries = append(entries, Entry{Line: n.Line, Spec: spec})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return entries, nil
}

// document returns the root node of the file's one document.
func document(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &LineError{Err: errors.New(`empty file (write "endpoints: []" to register none)`)}
		}
		return nil, fmt.Errorf("parse: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := extra.Line
		if err != nil {
			return nil, fmt.Errorf("parse: %w", err)
		}
		return nil, &LineError{Line: line, Err: errors.New("a second YAML document: the file holds one")}
	}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 0 {
		return nil, &LineError{Err: errors.New(`empty file (write "endpoints: []" to register none)`)}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, &LineError{Line: doc.Line, Err: errors.New("not a YAML document")}
	}
	return doc.Content[0], nil
}

// endpointsNode returns the sequence under the root's "endpoints" key; nil
// when it is null.
func endpointsNode(root *yaml.Node) (*yaml.Node, error) {
	if root.Kind != yaml.MappingNode {
		return nil, &LineError{Line: root.Line, Err: fmt.Errorf("the file is not a mapping with the key %q", endpointsKey)}
	}
	var seq *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch {
		case k.Value != endpointsKey:
			return nil, &LineError{Line: k.Line, Err: fmt.Errorf("unknown key %q (the file's one key is %q)", k.Value, endpointsKey)}
		case seq != nil:
			return nil, &LineError{Line: k.Line, Err: fmt.Errorf("key %q given twice", endpointsKey)}
		}
		seq = v
	}
	switch {
	case seq == nil:
		return nil, &LineError{Line: root.Line, Err: fmt.Errorf("no key %q (write \"endpoints: []\" to register none)", endpointsKey)}
	case seq.Kind == yaml.ScalarNode && seq.Tag == "!!null":
		return nil, nil
	case seq.Kind != yaml.SequenceNode:
		return nil, &LineError{Line: seq.Line, Err: fmt.Errorf("%q is not a list", endpointsKey)}
	}
	return seq, nil
}

// decodeEntry decodes one entry strictly. The spec returned with an error
// has the entry's name if it could be read.
func decodeEntry(n *yaml.Node) (FileEntry, error) {
	var spec FileEntry
	if n.Kind != yaml.MappingNode {
		return spec, errors.New("not a mapping of endpoint fields")
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		switch {
		case !slices.Contains(specFields, k.Value):
			return spec, fmt.Errorf("line %d: unknown field %q (fields: %s)", k.Line, k.Value, strings.Join(specFields, ", "))
		case seen[k.Value]:
			return spec, fmt.Errorf("line %d: field %q given twice", k.Line, k.Value)
		}
		seen[k.Value] = true
		if k.Value == "name" && n.Content[i+1].Kind == yaml.ScalarNode {
			spec.Name = n.Content[i+1].Value
		}
	}
	name := spec.Name
	if err := n.Decode(&spec); err != nil {
		return FileEntry{EndpointSpec: coord.EndpointSpec{Name: name}}, fmt.Errorf("decode: %w", err)
	}
	spec.hasPort = seen[portKey]
	return spec, nil
}

// Endpoint checks the entry and returns the registry entry it stands for
// in pool (without RegisteredAt), as coord.EndpointSpec.Endpoint does, in
// the entry's form (see FileEntry). Each failure is a *coord.SpecError;
// all are returned, joined.
func (e FileEntry) Endpoint(pool string) (*registryv1.Endpoint, error) {
	return e.endpoint(pool, false)
}

// ClusterEndpoint is Endpoint for a file of clusters
// (multicluster-file-discovery): in the router's form the address may be
// a host name (RFC 1123) or any IP address, a cluster being reached at its
// gateway.
func (e FileEntry) ClusterEndpoint(pool string) (*registryv1.Endpoint, error) {
	return e.endpoint(pool, true)
}

func (e FileEntry) endpoint(pool string, hostNames bool) (*registryv1.Endpoint, error) {
	spec := e.EndpointSpec
	var errs []error
	fail := func(field string, err error) { errs = append(errs, &coord.SpecError{Field: field, Err: err}) }
	switch {
	case e.Namespace == "" || e.Namespace == DefaultNamespace:
	case strings.Contains(e.Namespace, "/"):
		fail(namespaceKey, fmt.Errorf("%q contains '/'", e.Namespace))
	case spec.Name != "":
		spec.Name += "." + e.Namespace
	}
	if !e.hasPort {
		ep, err := spec.Endpoint(pool)
		if len(errs) == 0 {
			return ep, err
		}
		return nil, errors.Join(append(errs, unjoin(err)...)...)
	}
	// The router's form: the address is an IPv4 address (a cluster's: a
	// host name or an IP address), the port apart.
	if hostNames {
		if net.ParseIP(spec.Address) == nil && !isHostName(spec.Address) {
			fail("address", fmt.Errorf("%q is neither a host name (RFC 1123) nor an IP address", spec.Address))
		}
	} else if ip := net.ParseIP(spec.Address); ip == nil || ip.To4() == nil {
		fail("address", fmt.Errorf("%q is not an IPv4 address (with a port given, the address is the host alone and an IPv4 address, as the llm-d router has it; "+
			"for a host name or an IPv6 address leave the port out and write host:port)", spec.Address))
	}
	if p, err := strconv.Atoi(e.Port); err != nil || p < 1 || p > 65535 {
		fail(portKey, fmt.Errorf("%q is not a port from 1 to 65535", e.Port))
	}
	spec.Address = net.JoinHostPort(spec.Address, e.Port)
	ep, err := spec.EndpointModelOptional(pool)
	for _, fe := range unjoin(err) {
		// Checked above (a valid address and port make a valid
		// host:port): an invalid one is not reported twice.
		var se *coord.SpecError
		if errors.As(fe, &se) && se.Field == "address" {
			continue
		}
		errs = append(errs, fe)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return ep, nil
}

// isHostName says whether s is an RFC 1123 host name (a DNS subdomain, as
// Kubernetes checks them): lower-case labels of letters, digits and
// hyphens, each starting and ending with a letter or digit, 253
// characters at most.
func isHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			switch c := l[i]; {
			case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-':
			default:
				return false
			}
		}
	}
	return true
}

// unjoin returns the errors joined in err (err itself if it joins none).
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// Parse decodes an endpoints file and checks its entries: it returns the
// registry entries of pool by name, labelled as the file's
// (registrysync.LabelDiscoveredBy=file), without RegisteredAt. Every
// problem found is returned, joined, each naming its line and entry.
func Parse(pool string, data []byte) (map[string]*registryv1.Endpoint, error) {
	return parse(pool, data, false)
}

// ParseClusters is Parse for a file of clusters
// (multicluster-file-discovery): see FileEntry.ClusterEndpoint.
func ParseClusters(pool string, data []byte) (map[string]*registryv1.Endpoint, error) {
	return parse(pool, data, true)
}

func parse(pool string, data []byte, hostNames bool) (map[string]*registryv1.Endpoint, error) {
	entries, err := Decode(data)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*registryv1.Endpoint, len(entries))
	lines := make(map[string]int, len(entries))
	var errs []error
	for i, e := range entries {
		fail := func(err error) {
			errs = append(errs, &LineError{Line: e.Line, Entry: i + 1, Name: e.Spec.Name, Err: err})
		}
		ep, err := e.Spec.endpoint(pool, hostNames)
		if err != nil {
			fail(err)
			continue
		}
		if _, ok := e.Spec.Labels[registrysync.LabelDiscoveredBy]; ok {
			fail(fmt.Errorf("labels: %s is set by the collector", registrysync.LabelDiscoveredBy))
			continue
		}
		if first, ok := lines[ep.GetName()]; ok {
			fail(fmt.Errorf("name: %q is taken by the endpoint on line %d", ep.GetName(), first))
			continue
		}
		if ep.Labels == nil {
			ep.Labels = map[string]string{}
		}
		ep.Labels[registrysync.LabelDiscoveredBy] = DiscoveredByFile
		out[ep.GetName()], lines[ep.GetName()] = ep, e.Line
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}
