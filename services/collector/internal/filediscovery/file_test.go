package filediscovery

import (
	"errors"
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/coord"
)

// fixtureEntries are the entries of testdata/endpoints.{yaml,json} in pool p.
func fixtureEntries() map[string]*registryv1.Endpoint {
	const model = "meta-llama/Llama-3.1-8B-Instruct"
	return map[string]*registryv1.Endpoint{
		"vm-a100-1": {
			Name: "vm-a100-1", Pool: "p", Address: "10.1.2.3", Port: 8000, Model: model, ServedModels: []string{model, "sql-lora"},
			Labels:           map[string]string{"hermod.io/variant": "a100", "llm-d.ai/role": "decode", "hermod.io/discovered-by": "file"},
			KvEventsEndpoint: "tcp://10.1.2.3:5557", KvEventsTopic: "kv@10.1.2.3@" + model, KvReplayEndpoint: "tcp://10.1.2.3:5558",
		},
		"slurm-job-4711-rank1": {
			Name: "slurm-job-4711-rank1", Pool: "p", Address: "node17.cluster", Port: 8001, Model: model, ServedModels: []string{model},
			Labels: map[string]string{"hermod.io/discovered-by": "file"}, DataParallelRank: 1,
		},
	}
}

func equalEntries(t *testing.T, got, want map[string]*registryv1.Endpoint) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d entries %v, want %d", len(got), got, len(want))
	}
	for name, w := range want {
		if !proto.Equal(got[name], w) {
			t.Errorf("entry %s:\n got %v\nwant %v", name, got[name], w)
		}
	}
}

// The YAML and the JSON fixture stand for the same entries.
func TestParseFixtures(t *testing.T) {
	t.Parallel()
	for _, file := range []string{"testdata/endpoints.yaml", "testdata/endpoints.json"} {
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Parse("p", data)
			if err != nil {
				t.Fatal(err)
			}
			equalEntries(t, got, fixtureEntries())
		})
	}
}

// The llm-d router's endpoints files (its docs' examples, YAML and JSON):
// no model (the collector reads the served models from /v1/models), the
// labels as they are, a namespace other than "default" qualifying the name.
func TestParseRouterFixtures(t *testing.T) {
	t.Parallel()
	single := func() map[string]string {
		return map[string]string{"hermod.io/discovered-by": "file", "model": "llama-3-8b"}
	}
	rank := func(r string) map[string]string {
		return map[string]string{"hermod.io/discovered-by": "file", "rank": r, "job": "slurm-job-42"}
	}
	want := map[string]*registryv1.Endpoint{
		"vllm-0":                 {Name: "vllm-0", Pool: "p", Address: "10.0.0.1", Port: 8000, Labels: single()},
		"vllm-1":                 {Name: "vllm-1", Pool: "p", Address: "10.0.0.2", Port: 8000, Labels: single()},
		"tp-rank-0.slurm-job-42": {Name: "tp-rank-0.slurm-job-42", Pool: "p", Address: "192.168.1.10", Port: 8000, Labels: rank("0")},
		"tp-rank-1.slurm-job-42": {Name: "tp-rank-1.slurm-job-42", Pool: "p", Address: "192.168.1.11", Port: 8000, Labels: rank("1")},
	}
	for _, f := range []string{"testdata/llm-d-endpoints.yaml", "testdata/llm-d-endpoints.json"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Parse("p", data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		equalEntries(t, got, want)
	}
}

// An entry in the router's form may carry Hermod's fields; its port may be
// a number; the same name in two namespaces is two endpoints.
func TestParseRouterForm(t *testing.T) {
	t.Parallel()
	got, err := Parse("p", []byte(`endpoints:
  - name: a
    address: 10.0.0.1
    port: 8000
    model: llama
    served-models: [llama, sql-lora]
    kv-events: tcp://10.0.0.1:5557
  - {name: a, namespace: team-b, address: "10.0.0.2", port: "8001"}
  - {name: b, address: "10.0.0.3", port: "+08002", served-models: [base, lora]}
  - {name: c, address: "10.0.0.4:9000", model: m}
`))
	if err != nil {
		t.Fatal(err)
	}
	lbl := map[string]string{"hermod.io/discovered-by": "file"}
	equalEntries(t, got, map[string]*registryv1.Endpoint{
		"a": {Name: "a", Pool: "p", Address: "10.0.0.1", Port: 8000, Model: "llama", ServedModels: []string{"llama", "sql-lora"},
			KvEventsEndpoint: "tcp://10.0.0.1:5557", Labels: lbl},
		"a.team-b": {Name: "a.team-b", Pool: "p", Address: "10.0.0.2", Port: 8001, Labels: lbl},
		"b":        {Name: "b", Pool: "p", Address: "10.0.0.3", Port: 8002, Model: "base", ServedModels: []string{"base", "lora"}, Labels: lbl},
		"c":        {Name: "c", Pool: "p", Address: "10.0.0.4", Port: 9000, Model: "m", ServedModels: []string{"m"}, Labels: lbl},
	})
}

// The router's form is checked as the router checks it (an IPv4 address,
// a port from 1 to 65535), and as Hermod checks every entry (a name, unique
// once qualified by its namespace).
func TestParseRouterFormErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, entry string
		want        []string
	}{
		{"IPv6", `{name: a, address: "::1", port: "8000"}`, []string{`address: "::1" is not an IPv4 address`, "leave the port out"}},
		{"host name", `{name: a, address: node17.cluster, port: "8000"}`, []string{`address: "node17.cluster" is not an IPv4 address`}},
		{"address with a port", `{name: a, address: "10.0.0.1:8000", port: "8000"}`, []string{`address: "10.0.0.1:8000" is not an IPv4 address`}},
		{"no address", `{name: a, port: "8000"}`, []string{`address: "" is not an IPv4 address`}},
		{"port too large", `{name: a, address: "10.0.0.1", port: "99999"}`, []string{`port: "99999" is not a port from 1 to 65535`}},
		{"port 0", `{name: a, address: "10.0.0.1", port: 0}`, []string{`port: "0" is not a port`}},
		{"port not a number", `{name: a, address: "10.0.0.1", port: http}`, []string{`port: "http" is not a port`}},
		{"empty port", `{name: a, address: "10.0.0.1", port: ""}`, []string{`port: "" is not a port`}},
		{"null port", `{name: a, address: "10.0.0.1", port: ~}`, []string{`port: "" is not a port`}},
		{"no name", `{namespace: ns, address: "10.0.0.1", port: "8000"}`, []string{"name: endpoint name is empty"}},
		{"slash in namespace", `{name: a, namespace: x/y, address: "10.0.0.1", port: "8000"}`, []string{`namespace: "x/y" contains '/'`}},
		{"blank model", `{name: a, address: "10.0.0.1", port: "8000", model: " "}`, []string{"model:"}},
		{"several problems", `{name: a, address: "::1", port: "0", kv-events: "ipc://x"}`,
			[]string{"address:", "port:", "kv-events:"}},
		{"without a port the model is required", `{name: a, namespace: ns, address: "10.0.0.1:8000"}`, []string{"(a): model: required"}},
		{"unknown field", `{name: a, address: "10.0.0.1", port: "8000", metricsHost: "10.0.0.1:9090"}`, []string{`unknown field "metricsHost"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse("p", []byte("endpoints:\n  - "+tc.entry+"\n"))
			if err == nil {
				t.Fatalf("got %v, want an error", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if tc.name == "IPv6" && strings.Count(err.Error(), "address:") != 1 {
				t.Errorf("the address is reported more than once: %q", err)
			}
		})
	}

	// the router lets the last of two entries of one name win; Hermod takes
	// neither, as for its own form
	_, err := Parse("p", []byte(`endpoints:
  - {name: a, namespace: ns, address: "10.0.0.1", port: "8000"}
  - {name: a, namespace: ns, address: "10.0.0.2", port: "8000"}
`))
	if err == nil || !strings.Contains(err.Error(), `line 3: endpoint 2 (a): name: "a.ns" is taken by the endpoint on line 2`) {
		t.Errorf("duplicate: %v", err)
	}
}

func TestParseNoEndpoints(t *testing.T) {
	t.Parallel()
	for _, text := range []string{"endpoints: []\n", "endpoints:\n", "# none yet\nendpoints: ~\n", `{"endpoints": []}`} {
		got, err := Parse("p", []byte(text))
		if err != nil || len(got) != 0 {
			t.Errorf("%q: got %v, %v; want no entries", text, got, err)
		}
	}
}

// Every problem is reported with its line and entry.
func TestParseErrors(t *testing.T) {
	t.Parallel()
	const ok = "  - name: a\n    address: h:1\n    model: m\n"
	for _, tc := range []struct {
		name, text string
		want       []string // substrings of the error
	}{
		{"empty", "", []string{"empty file"}},
		{"comments only", "# nothing\n", []string{"empty file"}},
		{"syntax", "endpoints: [\n", []string{"parse: yaml: line"}},
		{"tab indentation", "endpoints:\n\t- name: a\n", []string{"parse: yaml: line 2"}},
		{"not a mapping", "- a\n", []string{"line 1: the file is not a mapping"}},
		{"unknown top-level key", "endpoints: []\npool: p\n", []string{`line 2: unknown key "pool"`}},
		{"no endpoints key", "{}\n", []string{`no key "endpoints"`}},
		{"endpoints twice", "endpoints: []\nendpoints: []\n", []string{`line 2: key "endpoints" given twice`}},
		{"not a list", "endpoints: {a: 1}\n", []string{`line 1: "endpoints" is not a list`}},
		{"two documents", "endpoints: []\n---\nendpoints: []\n", []string{"line 2: a second YAML document"}},
		{"entry not a mapping", "endpoints:\n" + ok + "  - vm-2\n", []string{"line 5: endpoint 2: not a mapping"}},
		{"unknown field", "endpoints:\n" + ok + "  - name: b\n    addr: h:1\n", []string{`line 5: endpoint 2 (b): line 6: unknown field "addr"`}},
		{"field twice", "endpoints:\n  - name: a\n    model: m\n    model: n\n", []string{`endpoint 1 (a): line 4: field "model" given twice`}},
		{"wrong type", "endpoints:\n  - name: a\n    address: h:1\n    model: m\n    data-parallel-rank: one\n", []string{"line 2: endpoint 1 (a): decode: yaml: unmarshal errors:", "line 5: cannot unmarshal"}},
		{"invalid values", "endpoints:\n" + ok + "  - name: b\n    address: h\n    kv-events: ipc://x\n",
			[]string{"line 5: endpoint 2 (b): address:", "kv-events:", "model: required"}},
		{"duplicate name", "endpoints:\n" + ok + ok, []string{`line 5: endpoint 2 (a): name: "a" is taken by the endpoint on line 2`}},
		{"reserved label", "endpoints:\n  - name: a\n    address: h:1\n    model: m\n    labels: {hermod.io/discovered-by: kubernetes}\n",
			[]string{"line 2: endpoint 1 (a): labels: hermod.io/discovered-by is set by the collector"}},
		{"several entries", "endpoints:\n  - name: a\n  - name: b/c\n    address: h:1\n    model: m\n",
			[]string{"line 2: endpoint 1 (a): address:", "line 3: endpoint 2 (b/c): name:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse("p", []byte(tc.text))
			if err == nil {
				t.Fatalf("got %v, want an error", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// A field error of an entry is a *coord.SpecError inside a *LineError.
func TestParseErrorTypes(t *testing.T) {
	t.Parallel()
	_, err := Parse("p", []byte("endpoints:\n  - name: a\n    address: h:1\n"))
	var le *LineError
	var se *coord.SpecError
	if !errors.As(err, &le) || le.Line != 2 || le.Entry != 1 || le.Name != "a" || !errors.As(err, &se) || se.Field != "model" {
		t.Fatalf("error %v: line error %+v, spec error %+v", err, le, se)
	}
}

// FuzzParse checks that no input makes the decoder panic, and that a file
// it accepts holds valid entries and reads the same once written back.
func FuzzParse(f *testing.F) {
	for _, file := range []string{"testdata/endpoints.yaml", "testdata/endpoints.json", "testdata/llm-d-endpoints.yaml", "testdata/llm-d-endpoints.json"} {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"", "endpoints: []", "endpoints:\n  - name: a\n    address: h:1\n    model: m\n", "endpoints: [{name: a}]",
		"endpoints: &a [*a]", "endpoints:\n  - &e {name: a, address: 'h:1', model: m}\n  - *e\n", "endpoints: !!str x", "{\"endpoints\": [1]}",
		"endpoints:\n  - {name: a, namespace: ns, address: '10.0.0.1', port: '8000'}\n  - {name: a, address: '10.0.0.2', port: 8000}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := Parse("p", data)
		if err != nil {
			return
		}
		entries, err := Decode(data)
		if err != nil {
			t.Fatalf("Parse accepts what Decode rejects: %v", err)
		}
		file := File{Endpoints: make([]FileEntry, len(entries))}
		for i, e := range entries {
			file.Endpoints[i] = e.Spec
		}
		for name, ep := range got {
			if ep.GetName() != name || ep.GetPool() != "p" || ep.GetLabels()["hermod.io/discovered-by"] != DiscoveredByFile {
				t.Fatalf("entry %s: %v", name, ep)
			}
		}
		out, err := yaml.Marshal(file)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Parse("p", out)
		if err != nil {
			t.Fatalf("the file written back does not parse: %v\n%s", err, out)
		}
		equalEntries(t, again, got)
	})
}

// A file of clusters (multicluster-file-discovery) is in the router's form
// too, its addresses the clusters' gateways: host names as well as IP
// addresses, the labels (metricsAddress, metricsPort) kept for the
// metrics source. The same file is refused as a file of pods.
func TestParseClusters(t *testing.T) {
	t.Parallel()
	file := []byte(`endpoints:
  - name: cluster-a
    address: gw.cluster-a.example.com
    port: "443"
    labels: {metricsAddress: metrics.cluster-a.internal, metricsPort: "9090"}
  - {name: cluster-b, address: "10.1.0.1", port: 8443}
  - {name: cluster-c, address: "fd00::1", port: 443}
`)
	got, err := ParseClusters("p", file)
	if err != nil {
		t.Fatal(err)
	}
	lbl := map[string]string{"hermod.io/discovered-by": "file"}
	equalEntries(t, got, map[string]*registryv1.Endpoint{
		"cluster-a": {Name: "cluster-a", Pool: "p", Address: "gw.cluster-a.example.com", Port: 443,
			Labels: map[string]string{"hermod.io/discovered-by": "file", "metricsAddress": "metrics.cluster-a.internal", "metricsPort": "9090"}},
		"cluster-b": {Name: "cluster-b", Pool: "p", Address: "10.1.0.1", Port: 8443, Labels: lbl},
		"cluster-c": {Name: "cluster-c", Pool: "p", Address: "fd00::1", Port: 443, Labels: lbl},
	})
	if _, err := Parse("p", file); err == nil || !strings.Contains(err.Error(), `"gw.cluster-a.example.com" is not an IPv4 address`) {
		t.Errorf("as a file of pods: %v", err)
	}
	for entry, want := range map[string]string{
		`{name: a, address: "GW.example.com", port: 443}`:   `"GW.example.com" is neither a host name`,
		`{name: a, address: "gw_1.example", port: 443}`:     `"gw_1.example" is neither a host name`,
		`{name: a, address: "-gw.example", port: 443}`:      `is neither a host name`,
		`{name: a, address: "gw.example.com:443", port: 1}`: `is neither a host name`,
		`{name: a, address: "gw.example.com", port: 0}`:     `port: "0" is not a port`,
	} {
		if _, err := ParseClusters("p", []byte("endpoints:\n  - "+entry+"\n")); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", entry, err, want)
		}
	}
}
