package standard_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/plugins/datalayer"
	"github.com/hermod/hermod/libs/plugins/standard"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

// modelServer is a model server whose /v1/models (or path) lists models.
func modelServer(t *testing.T, tlsServer bool, path string, models ...string) *scheduling.Endpoint {
	t.Helper()
	var entries []string
	for _, m := range models {
		entries = append(entries, fmt.Sprintf(`{"id":%q,"object":"model"}`, m))
	}
	body := `{"object":"list","data":[` + strings.Join(entries, ",") + `]}`
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+path, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, body) })
	var srv *httptest.Server
	if tlsServer {
		srv = httptest.NewTLSServer(mux)
	} else {
		srv = httptest.NewServer(mux)
	}
	t.Cleanup(srv.Close)
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	return scheduling.NewEndpoint("pod-"+port, host, p, nil)
}

// dataPlugins returns the models source and extractor the scheduler's data
// section wires, by the names it gives.
func dataPlugins(t *testing.T, s *scheduling.Scheduler) (*datalayer.ModelsSource, *datalayer.ModelsExtractor) {
	t.Helper()
	d := s.Describe().Data
	if d == nil || len(d.Sources) != 1 || len(d.Sources[0].Extractors) != 1 {
		t.Fatalf("data section %+v", d)
	}
	var src *datalayer.ModelsSource
	var ex *datalayer.ModelsExtractor
	for _, p := range s.Plugins() {
		switch p.TypedName().Name {
		case d.Sources[0].PluginRef:
			src, _ = p.(*datalayer.ModelsSource)
		case d.Sources[0].Extractors[0]:
			ex, _ = p.(*datalayer.ModelsExtractor)
		}
	}
	if src == nil || ex == nil {
		t.Fatalf("source %v, extractor %v", src, ex)
	}
	return src, ex
}

// The data-layer config of reference/001 builds, its plugins fetch and
// extract the served models of real model servers, and a request for an
// adapter only one endpoint serves goes there, as the picker routes with
// the served models the collector publishes.
func TestDataLayerConfigSchedules(t *testing.T) {
	s, err := load(t, filepath.Join("testdata/reference", "001-data-layer.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	d := s.Describe()
	if len(d.Warnings) != 0 {
		t.Errorf("warnings %q", d.Warnings)
	}
	points := map[string]string{}
	params := map[string]any{}
	for _, p := range d.Plugins {
		points[p.Name] = strings.Join(p.ExtensionPoints, ",")
		params[p.Name] = p.Parameters
	}
	if points["models-data-source"] != "DataSource" || points["model-server-protocol-models"] != "DataExtractor" {
		t.Errorf("extension points %v", points)
	}
	want := datalayer.DefaultModelsParams()
	want.InsecureSkipVerify = true // the reference's config spells it out
	if got := params["models-data-source"]; got != want {
		t.Errorf("effective parameters %+v, want %+v", got, want)
	}

	src, ex := dataPlugins(t, s)
	// The data layer: fetch and extract into each endpoint's own copy.
	var eps []*scheduling.Endpoint
	for _, models := range [][]string{{"base"}, {"base", "sql-lora"}, {"base"}} {
		ep := modelServer(t, false, "/v1/models", models...)
		data, err := src.Fetch(context.Background(), ep)
		if err != nil {
			t.Fatal(err)
		}
		if err := ex.Extract(context.Background(), data, ep); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ep.Models, models) {
			t.Errorf("%s serves %v, want %v", ep.Name, ep.Models, models)
		}
		eps = append(eps, ep)
	}
	// The picker leaves out the endpoints that do not serve the model.
	for i := range 3 {
		var candidates []*scheduling.Endpoint
		for _, ep := range eps {
			if ep.Serves("sql-lora") {
				candidates = append(candidates, ep)
			}
		}
		res, err := s.Schedule(context.Background(), schedulingtest.Completion(fmt.Sprint("r", i), "sql-lora", "hello"), candidates)
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Target().Endpoint; got != eps[1] {
			t.Errorf("request %d routed to %s, want %s (the only one serving sql-lora)", i, got.Name, eps[1].Name)
		}
		res.Release()
	}
}

func buildConfig(t *testing.T, yaml string) (*scheduling.Scheduler, error) {
	t.Helper()
	cfg, err := scheduling.ParseConfig([]byte(yaml))
	if err != nil {
		return nil, err
	}
	return scheduling.New(cfg, append(standard.ValidationOptions(), scheduling.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))...)
}

// The upstream shapes of the same wiring load too: llm-d's draft README
// (https, verified, named plugins) and the later one (the dataLayer key,
// models-data-extractor, interval).
func TestDataLayerUpstreamConfigs(t *testing.T) {
	tests := []struct {
		name, yaml string
		params     datalayer.ModelsParams
		extractor  string // its type as described
	}{
		{"llm-d draft", `featureGates: [dataLayer]
plugins:
- type: models-data-source
  name: vllm-models-source
  parameters: {scheme: https, insecureSkipVerify: false}
- type: model-server-protocol-models
  name: vllm-models-extractor
- type: queue-scorer
data:
  sources:
  - pluginRef: vllm-models-source
    extractors:
    - pluginRef: vllm-models-extractor
`, datalayer.ModelsParams{Scheme: "https", Path: "/v1/models"}, "model-server-protocol-models"},
		{"llm-d later", `apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
featureGates: [dataLayer]
plugins:
- type: models-data-source
  parameters: {interval: 5s, path: /custom/models}
- type: models-data-extractor
- type: queue-scorer
dataLayer:
  sources:
  - pluginRef: models-data-source
    extractors:
    - pluginRef: models-data-extractor
`, datalayer.ModelsParams{Scheme: "http", Path: "/custom/models", Interval: scheduling.Duration(5e9)}, "model-server-protocol-models"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := buildConfig(t, tc.yaml)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			src, ex := dataPlugins(t, s)
			if src.Params() != tc.params {
				t.Errorf("params %+v, want %+v", src.Params(), tc.params)
			}
			if ex.TypedName().Type != tc.extractor {
				t.Errorf("extractor type %s", ex.TypedName().Type)
			}
			if _, err := s.Schedule(context.Background(), schedulingtest.Completion("r", "m", "hello"), []*scheduling.Endpoint{scheduling.NewEndpoint("a", "10.0.0.1", 8000, nil)}); err != nil {
				t.Errorf("schedule: %v", err)
			}
		})
	}
}

// The data layer is on without the dataLayer gate (upstream deprecated
// it); errors name the plugin, the field or the data reference.
func TestDataLayerWarningsAndErrors(t *testing.T) {
	s, err := buildConfig(t, `plugins:
- type: models-data-source
  parameters: {scheme: https, caCertPath: /etc/ca.pem}
- type: model-server-protocol-models
- type: queue-scorer
data:
  sources: [{pluginRef: models-data-source, extractors: [{pluginRef: model-server-protocol-models}]}]
`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"plugins[0] (models-data-source): parameters.caCertPath: unknown parameter, ignored",
	}
	if got := s.Describe().Warnings; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	_ = s.Close()

	s, err = buildConfig(t, `featureGates: [dataLayer]
plugins:
- type: models-data-source
  parameters: {caCertPath: /etc/ca.pem}
- type: model-server-protocol-models
  parameters: {verbose: true}
data:
  sources: [{pluginRef: models-data-source, extractors: [{pluginRef: model-server-protocol-models}]}]
`)
	if err != nil {
		t.Fatal(err)
	}
	want = []string{
		"plugins[0] (models-data-source): parameters.caCertPath: unknown parameter, ignored",
		"plugins[1] (model-server-protocol-models): parameters.verbose: unknown parameter, ignored",
	}
	if got := s.Describe().Warnings; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	_ = s.Close()

	for _, tc := range []struct{ name, yaml, want string }{
		{"bad scheme", `featureGates: [dataLayer]
plugins: [{type: models-data-source, parameters: {scheme: tcp}}, {type: queue-scorer}]`,
			`plugins[0] (models-data-source): parameters.scheme: must be "http" or "https" (got "tcp")`},
		{"bad path", `featureGates: [dataLayer]
plugins: [{type: models-data-source, name: src, parameters: {path: "/v1/models?x=1"}}, {type: queue-scorer}]`,
			`plugins[0] (src, type models-data-source): parameters.path: must be a URL path, without query or fragment`},
		{"extractor as source", `featureGates: [dataLayer]
plugins: [{type: model-server-protocol-models}, {type: queue-scorer}]
data: {sources: [{pluginRef: model-server-protocol-models}]}`,
			`data.sources[0].pluginRef: "model-server-protocol-models" (type model-server-protocol-models) is not a data source`},
		{"source as extractor", `featureGates: [dataLayer]
plugins: [{type: models-data-source}, {type: queue-scorer}]
data: {sources: [{pluginRef: models-data-source, extractors: [{pluginRef: models-data-source}]}]}`,
			`data.sources[0].extractors[0].pluginRef: "models-data-source" (type models-data-source) is not a data extractor`},
		{"undeclared extractor", `featureGates: [dataLayer]
plugins: [{type: models-data-source}, {type: queue-scorer}]
data: {sources: [{pluginRef: models-data-source, extractors: [{pluginRef: models-data-extractor}]}]}`,
			`data.sources[0].extractors[0].pluginRef: no plugin named "models-data-extractor" is declared in plugins`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := buildConfig(t, tc.yaml)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v\nwant %s", err, tc.want)
			}
		})
	}
}

// An https source verifies the pods' certificates unless told not to;
// with insecureSkipVerify it reads a pod with a self-signed certificate.
func TestDataLayerHTTPS(t *testing.T) {
	verifying, err := buildConfig(t, `featureGates: [dataLayer]
plugins:
- {type: models-data-source, parameters: {scheme: https, path: /custom/models}}
- {type: model-server-protocol-models}
data: {sources: [{pluginRef: models-data-source, extractors: [{pluginRef: model-server-protocol-models}]}]}
`)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = verifying.Close() }()
	vsrc, _ := dataPlugins(t, verifying)
	if _, err := vsrc.Fetch(context.Background(), modelServer(t, true, "/custom/models", "base")); err == nil {
		t.Fatal("a self-signed pod was read without insecureSkipVerify")
	}
	s, err := buildConfig(t, `featureGates: [dataLayer]
plugins:
- {type: models-data-source, parameters: {scheme: https, path: /custom/models, insecureSkipVerify: true}}
- {type: model-server-protocol-models}
data: {sources: [{pluginRef: models-data-source, extractors: [{pluginRef: model-server-protocol-models}]}]}
`)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	src, ex := dataPlugins(t, s)
	ep := modelServer(t, true, "/custom/models", "base", "lora")
	data, err := src.Fetch(context.Background(), ep)
	if err == nil {
		err = ex.Extract(context.Background(), data, ep)
	}
	if err != nil || !reflect.DeepEqual(ep.Models, []string{"base", "lora"}) {
		t.Errorf("models %v, error %v", ep.Models, err)
	}
}

// dataLayer.discovery.pluginRef names a file-discovery, whose file the
// collector follows; a reference to another kind of plugin, to none, or a
// file-discovery without its path does not load.
func TestFileDiscoveryConfig(t *testing.T) {
	s, err := buildConfig(t, `plugins:
- {name: my-endpoints, type: file-discovery, parameters: {path: /etc/epp/endpoints.yaml, watchFile: true}}
- {type: queue-scorer}
dataLayer:
  discovery: {pluginRef: my-endpoints}
`)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	d := s.Describe()
	if d.Data == nil || d.Data.Discovery != "my-endpoints" || len(d.Warnings) != 0 {
		t.Fatalf("data %+v, warnings %v", d.Data, d.Warnings)
	}
	var disc scheduling.EndpointDiscovery
	for _, p := range s.Plugins() {
		if p.TypedName().Name == d.Data.Discovery {
			disc, _ = p.(scheduling.EndpointDiscovery)
		}
	}
	if disc == nil || disc.EndpointsFile() != "/etc/epp/endpoints.yaml" || !disc.WatchFile() {
		t.Fatalf("discovery plugin %#v", disc)
	}
	if _, ok := disc.(*datalayer.FileDiscovery); !ok {
		t.Errorf("discovery plugin %T", disc)
	}

	for _, tc := range []struct{ name, yaml, want string }{
		{"not a discovery plugin", `plugins: [{type: queue-scorer}]
dataLayer: {discovery: {pluginRef: queue-scorer}}`,
			`dataLayer.discovery.pluginRef: "queue-scorer" (type queue-scorer) is not an endpoint discovery plugin`},
		{"undeclared", `plugins: [{type: queue-scorer}]
dataLayer: {discovery: {pluginRef: file-discovery}}`,
			`dataLayer.discovery.pluginRef: no plugin named "file-discovery" is declared in plugins`},
		{"no path", `plugins: [{type: file-discovery}, {type: queue-scorer}]
dataLayer: {discovery: {pluginRef: file-discovery}}`,
			`parameters.path: required`},
		{"misspelt parameter", `plugins: [{type: file-discovery, parameters: {path: /e.yaml, watchfiles: true}}, {type: queue-scorer}]
dataLayer: {discovery: {pluginRef: file-discovery}}`,
			`watchfiles`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := buildConfig(t, tc.yaml)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v\nwant %s", err, tc.want)
			}
		})
	}
}
