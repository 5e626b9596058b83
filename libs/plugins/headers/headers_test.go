package headers_test

import (
	"context"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/libs/plugins/headers"
	_ "github.com/hermod/hermod/libs/plugins/standard"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

const roleLabel = "mif.moreh.io/role"

// ep builds an endpoint with a role label ("" for none).
func ep(name, addr string, port int, role string) *scheduling.Endpoint {
	var labels map[string]string
	if role != "" {
		labels = map[string]string{roleLabel: role}
	}
	e := scheduling.NewEndpoint(name, addr, port, labels)
	e.Metrics = &scheduling.Metrics{}
	return e
}

// disaggConfig prefills every request and encodes multimodal ones; the
// encode profile returns up to two endpoints. headersType is the type the
// headers handler is declared with.
func disaggConfig(headersType string) string {
	return `
plugins:
  - type: ` + headersType + `
  - type: response-header-handler
  - type: always-disagg-pd-decider
  - type: always-disagg-multimodal-decider
  - type: prefill-filter
  - type: decode-filter
  - type: encode-filter
  - type: max-score-picker
  - type: max-score-picker
    name: encode-picker
    parameters:
      maxNumOfEndpoints: 2
  - type: disagg-profile-handler
    parameters:
      deciders:
        prefill: always-disagg-pd-decider
        encode: always-disagg-multimodal-decider
schedulingProfiles:
  - name: decode
    plugins:
      - pluginRef: decode-filter
      - pluginRef: max-score-picker
  - name: prefill
    plugins:
      - pluginRef: prefill-filter
      - pluginRef: max-score-picker
  - name: encode
    plugins:
      - pluginRef: encode-filter
      - pluginRef: encode-picker
`
}

var (
	decodePod  = ep("decode-0", "10.1.0.1", 8000, "decode")
	prefillPod = ep("prefill-0", "10.1.0.2", 8001, "prefill")
	encodePodA = ep("encode-0", "10.1.0.3", 8002, "encode")
	encodePodB = ep("encode-1", "10.1.0.4", 8003, "encode")
)

// clientHeaders are routing headers a client tried to set itself.
func clientHeaders() map[string]string {
	return map[string]string{
		headers.PrefillEndpoint:     "6.6.6.6:1",
		headers.EncodeEndpoints:     "6.6.6.6:2",
		headers.DestinationEndpoint: "6.6.6.6:3",
	}
}

func imageChat(id string) *scheduling.Request {
	req := schedulingtest.Chat(id, "m", "what is in this picture?")
	req.Body.Messages[0].Media = openai.MediaImage
	req.Headers = clientHeaders()
	return req
}

func textChat(id string) *scheduling.Request {
	req := schedulingtest.Chat(id, "m", "hello there")
	req.Headers = clientHeaders()
	return req
}

func schedule(t *testing.T, s *scheduling.Scheduler, req *scheduling.Request, eps ...*scheduling.Endpoint) *scheduling.Result {
	t.Helper()
	res, err := s.Schedule(context.Background(), req, eps)
	if err != nil {
		t.Fatalf("Schedule: %v", err)
	}
	return res
}

func checkRemoved(t *testing.T, res *scheduling.Result) {
	t.Helper()
	for _, h := range []string{headers.PrefillEndpoint, headers.EncodeEndpoints, headers.DestinationEndpoint} {
		if !slices.Contains(res.RemoveHeaders, h) {
			t.Errorf("RemoveHeaders = %v, missing client-supplied %s", res.RemoveHeaders, h)
		}
	}
}

func splitSorted(s string) []string {
	parts := strings.Split(s, ",")
	sort.Strings(parts)
	return parts
}

func TestHeaderNames(t *testing.T) {
	for got, want := range map[string]string{
		headers.PrefillEndpoint:     "mif-prefill-endpoint",
		headers.EncodeEndpoints:     "mif-encode-endpoints",
		headers.DestinationEndpoint: "x-gateway-destination-endpoint",
		headers.DecoderHostPort:     "x-decoder-host-port",
		headers.PrefillerHostPort:   "x-prefiller-host-port",
	} {
		if got != want {
			t.Errorf("header constant %q, want %q", got, want)
		}
	}
}

func TestDisaggHeadersPrefillAndEncode(t *testing.T) {
	s := schedulingtest.Scheduler(t, disaggConfig("disagg-headers-handler"))
	res := schedule(t, s, imageChat("r1"), decodePod, prefillPod, encodePodA, encodePodB)
	checkRemoved(t, res)
	if got := res.Target().HostPort(); got != "10.1.0.1:8000" {
		t.Fatalf("primary target %s, want the decode pod 10.1.0.1:8000", got)
	}
	if got := res.Headers[headers.PrefillEndpoint]; got != "10.1.0.2:8001" {
		t.Errorf("%s = %q, want the prefill target 10.1.0.2:8001", headers.PrefillEndpoint, got)
	}
	got, ok := res.Headers[headers.EncodeEndpoints]
	if !ok {
		t.Fatalf("%s not set; headers %v", headers.EncodeEndpoints, res.Headers)
	}
	if parts := splitSorted(got); !slices.Equal(parts, []string{"10.1.0.3:8002", "10.1.0.4:8003"}) {
		t.Errorf("%s = %q, want both encode targets comma-separated", headers.EncodeEndpoints, got)
	}
	// the list is in the encode profile's target order
	var want []string
	for _, tg := range res.Encode.Targets {
		want = append(want, tg.HostPort())
	}
	if got != strings.Join(want, ",") {
		t.Errorf("%s = %q, want the encode targets in order %q", headers.EncodeEndpoints, got, strings.Join(want, ","))
	}
	if _, ok := res.Headers[headers.DestinationEndpoint]; ok {
		t.Errorf("%s set on the forwarded request: %v", headers.DestinationEndpoint, res.Headers)
	}
}

func TestDisaggHeadersSingleEncodeEndpoint(t *testing.T) {
	s := schedulingtest.Scheduler(t, disaggConfig("disagg-headers-handler"))
	res := schedule(t, s, imageChat("r1"), decodePod, prefillPod, encodePodA)
	if got := res.Headers[headers.EncodeEndpoints]; got != "10.1.0.3:8002" {
		t.Errorf("%s = %q, want 10.1.0.3:8002", headers.EncodeEndpoints, got)
	}
}

func TestDisaggHeadersNoEncodeForTextRequest(t *testing.T) {
	s := schedulingtest.Scheduler(t, disaggConfig("disagg-headers-handler"))
	res := schedule(t, s, textChat("r1"), decodePod, prefillPod, encodePodA)
	checkRemoved(t, res)
	if got, ok := res.Headers[headers.EncodeEndpoints]; ok {
		t.Errorf("%s = %q for a text-only request, want unset", headers.EncodeEndpoints, got)
	}
	if got := res.Headers[headers.PrefillEndpoint]; got != "10.1.0.2:8001" {
		t.Errorf("%s = %q, want 10.1.0.2:8001", headers.PrefillEndpoint, got)
	}
}

func TestDisaggHeadersFailedStagesSetNothing(t *testing.T) {
	// no prefill and no encode pods: both stages fail, the request is
	// decode-only, and the client's copies are still stripped.
	s := schedulingtest.Scheduler(t, disaggConfig("disagg-headers-handler"))
	res := schedule(t, s, imageChat("r1"), decodePod)
	checkRemoved(t, res)
	for _, h := range []string{headers.PrefillEndpoint, headers.EncodeEndpoints, headers.DestinationEndpoint} {
		if got, ok := res.Headers[h]; ok {
			t.Errorf("%s = %q although no stage picked an endpoint", h, got)
		}
	}
}

func TestPrefillHeaderHandlerAlias(t *testing.T) {
	reg, ok := scheduling.DefaultRegistry.Lookup(headers.DisaggAliasType)
	if !ok || reg.New == nil {
		t.Fatalf("%s is not registered", headers.DisaggAliasType)
	}
	s := schedulingtest.Scheduler(t, disaggConfig("prefill-header-handler"))
	res := schedule(t, s, imageChat("r1"), decodePod, prefillPod, encodePodA)
	checkRemoved(t, res)
	if got := res.Headers[headers.PrefillEndpoint]; got != "10.1.0.2:8001" {
		t.Errorf("%s = %q, want 10.1.0.2:8001", headers.PrefillEndpoint, got)
	}
	if got := res.Headers[headers.EncodeEndpoints]; got != "10.1.0.3:8002" {
		t.Errorf("%s = %q, want 10.1.0.3:8002", headers.EncodeEndpoints, got)
	}
}

const customProfilesConfig = `
plugins:
  - type: disagg-headers-handler
    parameters:
      prefillProfile: pf
      encodeProfile: enc
  - type: always-disagg-pd-decider
  - type: always-disagg-multimodal-decider
  - type: prefill-filter
  - type: decode-filter
  - type: encode-filter
  - type: max-score-picker
  - type: disagg-profile-handler
    parameters:
      profiles:
        decode: dec
        prefill: pf
        encode: enc
      deciders:
        prefill: always-disagg-pd-decider
        encode: always-disagg-multimodal-decider
schedulingProfiles:
  - name: dec
    plugins:
      - pluginRef: decode-filter
  - name: pf
    plugins:
      - pluginRef: prefill-filter
  - name: enc
    plugins:
      - pluginRef: encode-filter
`

func TestDisaggHeadersCustomProfiles(t *testing.T) {
	s := schedulingtest.Scheduler(t, customProfilesConfig)
	res := schedule(t, s, imageChat("r1"), decodePod, prefillPod, encodePodA)
	checkRemoved(t, res)
	if got := res.Headers[headers.PrefillEndpoint]; got != "10.1.0.2:8001" {
		t.Errorf("%s = %q, want 10.1.0.2:8001 from profile pf", headers.PrefillEndpoint, got)
	}
	if got := res.Headers[headers.EncodeEndpoints]; got != "10.1.0.3:8002" {
		t.Errorf("%s = %q, want 10.1.0.3:8002 from profile enc", headers.EncodeEndpoints, got)
	}
}

func TestDisaggHeadersFollowTheRecordedStages(t *testing.T) {
	// The handler's stages are named pf and enc while the headers plugin
	// keeps its default names: it publishes the stages the profile handler
	// recorded, so the decode pod still learns where they ran.
	cfg := strings.Replace(customProfilesConfig, `    parameters:
      prefillProfile: pf
      encodeProfile: enc
`, "", 1)
	s := schedulingtest.Scheduler(t, cfg)
	res := schedule(t, s, imageChat("r1"), decodePod, prefillPod, encodePodA)
	checkRemoved(t, res)
	if res.Prefill == nil || res.Encode == nil {
		t.Fatalf("test setup: prefill %v / encode %v did not run", res.Prefill, res.Encode)
	}
	if got := res.Headers[headers.PrefillEndpoint]; got != prefillPod.HostPort() {
		t.Errorf("%s = %q, want %s", headers.PrefillEndpoint, got, prefillPod.HostPort())
	}
	if got := res.Headers[headers.EncodeEndpoints]; got != encodePodA.HostPort() {
		t.Errorf("%s = %q, want %s", headers.EncodeEndpoints, got, encodePodA.HostPort())
	}
}

func TestDisaggHeadersEffectiveParameters(t *testing.T) {
	h := schedulingtest.NewHandle()
	p := schedulingtest.New[scheduling.Plugin](t, h, headers.DisaggType, "", "")
	if _, ok := p.(scheduling.PreRequest); !ok {
		t.Fatalf("%T is not a PreRequest plugin", p)
	}
	rep, ok := p.(scheduling.ParameterReporter)
	if !ok {
		t.Fatalf("%T does not report parameters", p)
	}
	if got, ok := rep.Parameters().(headers.DisaggParams); !ok || got.PrefillProfile != "prefill" || got.EncodeProfile != "encode" {
		t.Errorf("default parameters %#v, want prefillProfile prefill, encodeProfile encode", rep.Parameters())
	}
	alias := schedulingtest.New[scheduling.Plugin](t, h, headers.DisaggAliasType, "", `{"prefillProfile":"p2","encodeProfile":"e2"}`)
	if got := alias.(scheduling.ParameterReporter).Parameters().(headers.DisaggParams); got.PrefillProfile != "p2" || got.EncodeProfile != "e2" {
		t.Errorf("alias parameters %#v, want p2 / e2", got)
	}
	if _, ok := alias.(scheduling.PreRequest); !ok {
		t.Errorf("alias %T is not a PreRequest plugin", alias)
	}
}

func TestDisaggHeadersInvalidParams(t *testing.T) {
	for params, field := range map[string]string{
		`{"prefillProfile": 3}`:   "parameters.prefillProfile",
		`{"encodeProfile": true}`: "parameters.encodeProfile",
		`{"prefillProfile": ""}`:  "parameters.prefillProfile",
		`{"encodeProfile": ""}`:   "parameters.encodeProfile",
	} {
		_, err := schedulingtest.NewErr(schedulingtest.NewHandle(), headers.DisaggType, "", params)
		if err == nil {
			t.Errorf("%s: no error", params)
			continue
		}
		if !strings.Contains(err.Error(), field) {
			t.Errorf("%s: error %q does not name %s", params, err, field)
		}
	}
}

func TestDisaggHeadersSingleProfileOnlyStrips(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
  - type: disagg-headers-handler
  - type: max-score-picker
`)
	res := schedule(t, s, textChat("r1"), schedulingtest.Endpoints(2)...)
	checkRemoved(t, res)
	if len(res.Headers) != 0 {
		t.Errorf("headers %v set without disaggregation", res.Headers)
	}
}

func TestResponseHeadersWithPrefill(t *testing.T) {
	s := schedulingtest.Scheduler(t, disaggConfig("disagg-headers-handler"))
	req := textChat("r1")
	res := schedule(t, s, req, decodePod, prefillPod)
	if res.Prefill == nil {
		t.Fatalf("test setup: prefill did not run")
	}
	resp := scheduling.NewResponse(res, 200)
	s.ResponseReceived(context.Background(), req, resp)
	if got := resp.Headers[headers.DecoderHostPort]; got != "10.1.0.1:8000" {
		t.Errorf("%s = %q, want 10.1.0.1:8000", headers.DecoderHostPort, got)
	}
	if got := resp.Headers[headers.PrefillerHostPort]; got != "10.1.0.2:8001" {
		t.Errorf("%s = %q, want 10.1.0.2:8001", headers.PrefillerHostPort, got)
	}
}

func TestResponseHeadersWithoutPrefill(t *testing.T) {
	s := schedulingtest.Scheduler(t, disaggConfig("disagg-headers-handler"))
	req := textChat("r1")
	res := schedule(t, s, req, decodePod) // no prefill pod: decode only
	if res.Prefill != nil {
		t.Fatalf("test setup: prefill ran")
	}
	resp := scheduling.NewResponse(res, 200)
	s.ResponseReceived(context.Background(), req, resp)
	if got := resp.Headers[headers.DecoderHostPort]; got != "10.1.0.1:8000" {
		t.Errorf("%s = %q, want 10.1.0.1:8000", headers.DecoderHostPort, got)
	}
	if got, ok := resp.Headers[headers.PrefillerHostPort]; ok {
		t.Errorf("%s = %q although no prefill pod was used", headers.PrefillerHostPort, got)
	}
}

func TestResponseHeadersSingleProfile(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
  - type: response-header-handler
  - type: queue-scorer
  - type: max-score-picker
`)
	eps := schedulingtest.Waiting(5, 0, 7)
	req := schedulingtest.Completion("r1", "m", "hello")
	res := schedule(t, s, req, eps...)
	resp := scheduling.NewResponse(res, 200)
	s.ResponseReceived(context.Background(), req, resp)
	if got := resp.Headers[headers.DecoderHostPort]; got != eps[1].HostPort() {
		t.Errorf("%s = %q, want %s", headers.DecoderHostPort, got, eps[1].HostPort())
	}
	if _, ok := resp.Headers[headers.PrefillerHostPort]; ok {
		t.Errorf("%s set without disaggregation: %v", headers.PrefillerHostPort, resp.Headers)
	}
}

func TestResponseHeaderHandlerDirect(t *testing.T) {
	p := schedulingtest.New[scheduling.ResponseReceived](t, schedulingtest.NewHandle(), headers.ResponseHeaderType, "", "")
	req := schedulingtest.Completion("r1", "m", "hello")

	resp := &scheduling.Response{Target: scheduling.Target{Endpoint: decodePod, Port: decodePod.Port}, StatusCode: 200}
	p.ResponseReceived(context.Background(), req, resp)
	if got := resp.Headers[headers.DecoderHostPort]; got != "10.1.0.1:8000" {
		t.Errorf("%s = %q, want 10.1.0.1:8000", headers.DecoderHostPort, got)
	}
	if _, ok := resp.Headers[headers.PrefillerHostPort]; ok {
		t.Errorf("%s set with Prefill.Endpoint nil", headers.PrefillerHostPort)
	}

	resp = &scheduling.Response{
		Target:     scheduling.Target{Endpoint: decodePod, Port: 9000}, // rewritten port
		Prefill:    scheduling.Target{Endpoint: prefillPod, Port: prefillPod.Port},
		StatusCode: 200,
	}
	p.ResponseReceived(context.Background(), req, resp)
	if got := resp.Headers[headers.DecoderHostPort]; got != "10.1.0.1:9000" {
		t.Errorf("%s = %q, want the target's port 10.1.0.1:9000", headers.DecoderHostPort, got)
	}
	if got := resp.Headers[headers.PrefillerHostPort]; got != "10.1.0.2:8001" {
		t.Errorf("%s = %q, want 10.1.0.2:8001", headers.PrefillerHostPort, got)
	}
}
