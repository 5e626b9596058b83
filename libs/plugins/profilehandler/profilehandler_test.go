package profilehandler_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/libs/plugins/profilehandler"
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

var (
	decodePod  = ep("decode-0", "10.2.0.1", 8000, "decode")
	prefillPod = ep("prefill-0", "10.2.0.2", 8001, "prefill")
	encodePod  = ep("encode-0", "10.2.0.3", 8002, "encode")
)

func buildErr(t *testing.T, yaml string) error {
	t.Helper()
	cfg, err := scheduling.ParseConfig([]byte(yaml))
	if err != nil {
		t.Fatalf("parse config: %v", err)
	}
	s, err := scheduling.New(cfg, scheduling.WithRandSeed(1))
	if err == nil {
		_ = s.Close()
	}
	return err
}

func wantLoadError(t *testing.T, yaml string, substrings ...string) {
	t.Helper()
	err := buildErr(t, yaml)
	if err == nil {
		t.Fatalf("config loaded; want an error mentioning %q", substrings)
	}
	for _, s := range substrings {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}

func schedule(t *testing.T, s *scheduling.Scheduler, req *scheduling.Request, eps ...*scheduling.Endpoint) *scheduling.Result {
	t.Helper()
	res, err := s.Schedule(context.Background(), req, eps)
	if err != nil {
		t.Fatalf("Schedule: %v", err)
	}
	return res
}

func profileNames(res *scheduling.Result) []string {
	out := make([]string, len(res.Profiles))
	for i, p := range res.Profiles {
		out[i] = p.Profile
	}
	return out
}

func hasWarning(warnings []string, parts ...string) bool {
	for _, w := range warnings {
		all := true
		for _, p := range parts {
			if !strings.Contains(w, p) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

func imageChat(id string) *scheduling.Request {
	req := schedulingtest.Chat(id, "m", "what is in this picture?")
	req.Body.Messages[0].Media = openai.MediaImage
	return req
}

// checkNoMatch says that err is the failure of a profile whose filters left
// no endpoint: 503, not shedding (429).
func checkNoMatch(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("Schedule succeeded; want a no-match error")
	}
	var se *scheduling.Error
	if !errors.As(err, &se) || se.Kind != scheduling.KindNoMatch {
		t.Errorf("error %v (%T), want a *scheduling.Error of kind KindNoMatch", err, err)
	}
	if !errors.Is(err, scheduling.ErrNoMatch) || errors.Is(err, scheduling.ErrShed) {
		t.Errorf("errors.Is(%v, ErrNoMatch) = false or errors.Is(ErrShed) = true", err)
	}
	if got := scheduling.HTTPStatus(err); got != http.StatusServiceUnavailable {
		t.Errorf("HTTPStatus = %d, want 503", got)
	}
}

// ---- single-profile-handler ----

func TestSingleProfileHandler(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
  - type: single-profile-handler
  - type: queue-scorer
  - type: max-score-picker
schedulingProfiles:
  - name: only
    plugins:
      - pluginRef: queue-scorer
      - pluginRef: max-score-picker
`)
	if got := s.Describe().ProfileHandler; got != profilehandler.SingleType {
		t.Errorf("profile handler %q, want %s", got, profilehandler.SingleType)
	}
	eps := schedulingtest.Waiting(4, 1, 9)
	res := schedule(t, s, schedulingtest.Completion("r1", "m", "hi"), eps...)
	if len(res.Profiles) != 1 || res.Primary != res.Profiles[0] || res.Primary.Profile != "only" {
		t.Fatalf("profiles %v, primary %+v; want the one profile as primary", profileNames(res), res.Primary)
	}
	if got := res.Target().Endpoint.Name; got != "pod-1" {
		t.Errorf("target %s, want pod-1 (shortest queue)", got)
	}
	if res.Prefill != nil || res.Encode != nil {
		t.Errorf("single profile set prefill %v / encode %v", res.Prefill, res.Encode)
	}
}

func TestSingleProfileHandlerAddedByDefault(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
  - type: max-score-picker
`)
	if got := s.Describe().ProfileHandler; got != profilehandler.SingleType {
		t.Errorf("profile handler %q, want %s added by default", got, profilehandler.SingleType)
	}
	res := schedule(t, s, schedulingtest.Completion("r1", "m", "hi"), schedulingtest.Endpoints(3)...)
	if res.Primary == nil || res.Primary.Profile != scheduling.DefaultProfileName {
		t.Errorf("primary %+v, want profile %q", res.Primary, scheduling.DefaultProfileName)
	}
}

func TestSingleProfileHandlerRejectsSeveralProfiles(t *testing.T) {
	wantLoadError(t, `
plugins:
  - type: single-profile-handler
  - type: prefill-filter
  - type: decode-filter
  - type: max-score-picker
schedulingProfiles:
  - name: prefill
    plugins:
      - pluginRef: prefill-filter
  - name: decode
    plugins:
      - pluginRef: decode-filter
`, "single-profile-handler")
}

func TestSingleProfileHandlerNoMatch(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
  - type: single-profile-handler
  - type: prefill-filter
schedulingProfiles:
  - name: only
    plugins:
      - pluginRef: prefill-filter
`)
	_, err := s.Schedule(context.Background(), schedulingtest.Completion("r1", "m", "hi"), []*scheduling.Endpoint{decodePod})
	checkNoMatch(t, err)
}

// ---- disagg-profile-handler ----

const disaggAll = `
plugins:
  - type: disagg-headers-handler
  - type: always-disagg-pd-decider
  - type: always-disagg-multimodal-decider
  - type: prefill-filter
  - type: decode-filter
  - type: encode-filter
  - type: max-score-picker
  - type: disagg-profile-handler
    parameters:
      deciders:
        prefill: always-disagg-pd-decider
        encode: always-disagg-multimodal-decider
schedulingProfiles:
  - name: prefill
    plugins:
      - pluginRef: prefill-filter
      - pluginRef: max-score-picker
  - name: encode
    plugins:
      - pluginRef: encode-filter
      - pluginRef: max-score-picker
  - name: decode
    plugins:
      - pluginRef: decode-filter
      - pluginRef: max-score-picker
`

func TestDisaggDecodeFirstThenEncodeThenPrefill(t *testing.T) {
	s := schedulingtest.Scheduler(t, disaggAll)
	res := schedule(t, s, imageChat("r1"), prefillPod, encodePod, decodePod)
	if got := strings.Join(profileNames(res), ","); got != "decode,encode,prefill" {
		t.Fatalf("profiles ran in order %s, want decode,encode,prefill", got)
	}
	if res.Primary == nil || res.Primary.Profile != "decode" || res.Primary != res.Profiles[0] {
		t.Fatalf("primary %+v, want the decode result", res.Primary)
	}
	if got := res.Target().Endpoint; got != decodePod {
		t.Errorf("target %s, want %s", got.Name, decodePod.Name)
	}
	if res.Encode == nil || res.Encode.Profile != "encode" {
		t.Fatalf("Encode = %+v, want the encode result", res.Encode)
	}
	if tg, _ := res.Encode.Target(); tg.Endpoint != encodePod {
		t.Errorf("encode target %v, want %s", tg.Endpoint, encodePod.Name)
	}
	if res.Prefill == nil || res.Prefill.Profile != "prefill" {
		t.Fatalf("Prefill = %+v, want the prefill result", res.Prefill)
	}
	if tg, _ := res.Prefill.Target(); tg.Endpoint != prefillPod {
		t.Errorf("prefill target %v, want %s", tg.Endpoint, prefillPod.Name)
	}
	if got := res.Headers["mif-prefill-endpoint"]; got != "10.2.0.2:8001" {
		t.Errorf("mif-prefill-endpoint = %q, want 10.2.0.2:8001", got)
	}
	if got := res.Headers["mif-encode-endpoints"]; got != "10.2.0.3:8002" {
		t.Errorf("mif-encode-endpoints = %q, want 10.2.0.3:8002", got)
	}
}

func TestDisaggEncodeForParsedImageContent(t *testing.T) {
	s := schedulingtest.Scheduler(t, disaggAll)
	body := `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}`
	req, err := schedulingtest.ParseRequest(openai.APIChatCompletions, []byte(body))
	if err != nil {
		t.Fatalf("ParseRequest: %v", err)
	}
	req.ID = "r1"
	res := schedule(t, s, req, prefillPod, encodePod, decodePod)
	if res.Encode == nil {
		t.Fatalf("a request with an image_url content block did not run encode; profiles %v", profileNames(res))
	}
	if got := res.Headers["mif-encode-endpoints"]; got != "10.2.0.3:8002" {
		t.Errorf("mif-encode-endpoints = %q, want 10.2.0.3:8002", got)
	}
}

func TestDisaggEncodeOnlyWhenDeciderSays(t *testing.T) {
	s := schedulingtest.Scheduler(t, disaggAll)
	res := schedule(t, s, schedulingtest.Chat("r1", "m", "text only"), prefillPod, encodePod, decodePod)
	if got := strings.Join(profileNames(res), ","); got != "decode,prefill" {
		t.Errorf("profiles %s, want decode,prefill (no encode for a text request)", got)
	}
	if res.Encode != nil || res.Result("encode") != nil {
		t.Errorf("encode ran for a text-only request")
	}
	if res.Prefill == nil {
		t.Errorf("prefill did not run although always-disagg-pd-decider says so")
	}
}

func TestDisaggFailedOptionalStagesServeDecodeOnly(t *testing.T) {
	s := schedulingtest.Scheduler(t, disaggAll)
	res, err := s.Schedule(context.Background(), imageChat("r1"), []*scheduling.Endpoint{decodePod})
	if err != nil {
		t.Fatalf("Schedule with no prefill or encode pods: %v; want decode-only", err)
	}
	if got := res.Target().Endpoint; got != decodePod {
		t.Errorf("target %v, want %s", got, decodePod.Name)
	}
	if res.Prefill != nil || res.Encode != nil {
		t.Errorf("failed stages left prefill %+v / encode %+v", res.Prefill, res.Encode)
	}
	for _, name := range []string{"prefill", "encode"} {
		if pr := res.Result(name); pr != nil && pr.Err == nil {
			t.Errorf("failed %s stage recorded without error: %+v", name, pr)
		}
	}
	if _, ok := res.Headers["mif-prefill-endpoint"]; ok {
		t.Errorf("mif-prefill-endpoint set although prefill failed")
	}
}

func TestDisaggFailedPrefillOnly(t *testing.T) {
	s := schedulingtest.Scheduler(t, disaggAll)
	res := schedule(t, s, imageChat("r1"), decodePod, encodePod)
	if res.Prefill != nil {
		t.Errorf("Prefill = %+v with no prefill pods", res.Prefill)
	}
	if res.Encode == nil {
		t.Errorf("encode did not run although an encode pod exists")
	}
}

func TestDisaggDecodeFailureIsNoMatch(t *testing.T) {
	s := schedulingtest.Scheduler(t, disaggAll)
	_, err := s.Schedule(context.Background(), imageChat("r1"), []*scheduling.Endpoint{prefillPod, encodePod})
	checkNoMatch(t, err)
}

func TestDisaggWithoutDecidersIsDecodeOnly(t *testing.T) {
	// no deciders: both stages disabled, no headers handler needed, and
	// only the decode profile has to exist.
	s := schedulingtest.Scheduler(t, `
plugins:
  - type: decode-filter
  - type: max-score-picker
  - type: disagg-profile-handler
schedulingProfiles:
  - name: decode
    plugins:
      - pluginRef: decode-filter
`)
	res := schedule(t, s, imageChat("r1"), prefillPod, encodePod, decodePod)
	if got := strings.Join(profileNames(res), ","); got != "decode" {
		t.Errorf("profiles %s, want decode only", got)
	}
	if res.Target().Endpoint != decodePod {
		t.Errorf("target %v, want %s", res.Target().Endpoint, decodePod.Name)
	}
}

func TestDisaggDefaultProfileNames(t *testing.T) {
	s := schedulingtest.Scheduler(t, disaggAll)
	for _, p := range s.Describe().Plugins {
		if p.Type != profilehandler.DisaggType {
			continue
		}
		got, ok := p.Parameters.(profilehandler.DisaggParams)
		if !ok {
			t.Fatalf("parameters %#v", p.Parameters)
		}
		if got.Profiles.Decode != "decode" || got.Profiles.Prefill != "prefill" || got.Profiles.Encode != "encode" {
			t.Errorf("profiles %+v, want decode/prefill/encode", got.Profiles)
		}
		if got.Deciders.Prefill != "always-disagg-pd-decider" || got.Deciders.Encode != "always-disagg-multimodal-decider" {
			t.Errorf("deciders %+v", got.Deciders)
		}
		return
	}
	t.Fatalf("disagg-profile-handler not in Describe().Plugins")
}

func TestDisaggCanonicalReference001(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
  - type: disagg-headers-handler
  - type: prefix-based-pd-decider
    parameters:
      nonCachedTokens: 16
  - type: prefill-filter
  - type: decode-filter
  - type: max-score-picker
  - type: disagg-profile-handler
    parameters:
      deciders:
        prefill: prefix-based-pd-decider
schedulingProfiles:
  - name: prefill
    plugins:
      - pluginRef: prefill-filter
      - pluginRef: max-score-picker
  - name: decode
    plugins:
      - pluginRef: decode-filter
      - pluginRef: max-score-picker
`)
	// 60 characters = 15 tokens < 16: decode only
	res := schedule(t, s, schedulingtest.Completion("r1", "m", strings.Repeat("s", 60)), prefillPod, decodePod)
	if res.Prefill != nil {
		t.Errorf("15-token prompt disaggregated with nonCachedTokens 16")
	}
	// 64 characters = 16 tokens: disaggregated
	res = schedule(t, s, schedulingtest.Completion("r2", "m", strings.Repeat("l", 64)), prefillPod, decodePod)
	if res.Prefill == nil {
		t.Fatalf("16-token prompt not disaggregated with nonCachedTokens 16")
	}
	if got := res.Headers["mif-prefill-endpoint"]; got != "10.2.0.2:8001" {
		t.Errorf("mif-prefill-endpoint = %q, want 10.2.0.2:8001", got)
	}
}

func legacyDisagg(params string) string {
	return `
plugins:
  - type: disagg-headers-handler
  - type: prefix-based-pd-decider
    name: never
  - type: always-disagg-pd-decider
  - type: always-disagg-multimodal-decider
  - type: prefill-filter
  - type: decode-filter
  - type: encode-filter
  - type: max-score-picker
  - type: disagg-profile-handler
    parameters:
` + params + `
schedulingProfiles:
  - name: dec
    plugins:
      - pluginRef: decode-filter
  - name: pre
    plugins:
      - pluginRef: prefill-filter
  - name: enc
    plugins:
      - pluginRef: encode-filter
`
}

func TestDisaggLegacyFlatParams(t *testing.T) {
	s := schedulingtest.Scheduler(t, legacyDisagg(`      decodeProfile: dec
      prefillProfile: pre
      encodeProfile: enc
      deciderPluginName: always-disagg-pd-decider
      encodeDeciderPluginName: always-disagg-multimodal-decider`))
	res := schedule(t, s, imageChat("r1"), prefillPod, encodePod, decodePod)
	if got := strings.Join(profileNames(res), ","); got != "dec,enc,pre" {
		t.Fatalf("profiles %s, want dec,enc,pre", got)
	}
	if res.Primary.Profile != "dec" || res.Prefill == nil || res.Prefill.Profile != "pre" || res.Encode == nil || res.Encode.Profile != "enc" {
		t.Errorf("primary %v, prefill %v, encode %v; want dec / pre / enc", res.Primary.Profile, res.Prefill, res.Encode)
	}
	warnings := s.Describe().Warnings
	for _, key := range []string{"decodeProfile", "prefillProfile", "encodeProfile", "deciderPluginName", "encodeDeciderPluginName"} {
		if !hasWarning(warnings, "parameters."+key, "deprecated") {
			t.Errorf("no deprecation warning for %s in %q", key, warnings)
		}
	}
}

func TestDisaggLegacyPrefillDeciderPluginName(t *testing.T) {
	s := schedulingtest.Scheduler(t, legacyDisagg(`      decodeProfile: dec
      prefillProfile: pre
      prefillDeciderPluginName: always-disagg-pd-decider`))
	res := schedule(t, s, schedulingtest.Chat("r1", "m", "hi"), prefillPod, decodePod)
	if res.Prefill == nil {
		t.Errorf("prefillDeciderPluginName: prefill did not run")
	}
	if !hasWarning(s.Describe().Warnings, "prefillDeciderPluginName", "deprecated") {
		t.Errorf("no deprecation warning for prefillDeciderPluginName in %q", s.Describe().Warnings)
	}
}

func TestDisaggLegacyPrefillDeciderBeatsDeciderPluginName(t *testing.T) {
	// deciderPluginName names a decider that never disaggregates,
	// prefillDeciderPluginName one that always does: the latter wins.
	s := schedulingtest.Scheduler(t, legacyDisagg(`      decodeProfile: dec
      prefillProfile: pre
      deciderPluginName: never
      prefillDeciderPluginName: always-disagg-pd-decider`))
	res := schedule(t, s, schedulingtest.Chat("r1", "m", strings.Repeat("x", 1000)), prefillPod, decodePod)
	if res.Prefill == nil {
		t.Errorf("prefillDeciderPluginName did not take priority over deciderPluginName")
	}

	s = schedulingtest.Scheduler(t, legacyDisagg(`      decodeProfile: dec
      prefillProfile: pre
      deciderPluginName: always-disagg-pd-decider
      prefillDeciderPluginName: never`))
	res = schedule(t, s, schedulingtest.Chat("r1", "m", strings.Repeat("x", 1000)), prefillPod, decodePod)
	if res.Prefill != nil {
		t.Errorf("deciderPluginName took priority over prefillDeciderPluginName")
	}
}

func TestDisaggLegacyDeciderPluginNameAlone(t *testing.T) {
	s := schedulingtest.Scheduler(t, legacyDisagg(`      decodeProfile: dec
      prefillProfile: pre
      deciderPluginName: never`))
	res := schedule(t, s, schedulingtest.Chat("r1", "m", strings.Repeat("x", 1000)), prefillPod, decodePod)
	if res.Prefill != nil {
		t.Errorf("deciderPluginName never (nonCachedTokens 0): prefill ran")
	}
	if !hasWarning(s.Describe().Warnings, "parameters.deciderPluginName", "deprecated") {
		t.Errorf("no deprecation warning for deciderPluginName in %q", s.Describe().Warnings)
	}
}

func TestDisaggNestedParamsHaveNoWarnings(t *testing.T) {
	s := schedulingtest.Scheduler(t, disaggAll)
	for _, w := range s.Describe().Warnings {
		if strings.Contains(w, "deprecated") {
			t.Errorf("nested parameters produced a deprecation warning: %q", w)
		}
	}
}

func TestDisaggDeciderDeclaredLater(t *testing.T) {
	wantLoadError(t, `
plugins:
  - type: disagg-headers-handler
  - type: prefill-filter
  - type: decode-filter
  - type: disagg-profile-handler
    parameters:
      deciders:
        prefill: always-disagg-pd-decider
  - type: always-disagg-pd-decider
schedulingProfiles:
  - name: prefill
    plugins:
      - pluginRef: prefill-filter
  - name: decode
    plugins:
      - pluginRef: decode-filter
`, "declared later", "always-disagg-pd-decider", "deciders.prefill")
}

func TestDisaggEncodeDeciderDeclaredLater(t *testing.T) {
	wantLoadError(t, `
plugins:
  - type: disagg-headers-handler
  - type: encode-filter
  - type: decode-filter
  - type: disagg-profile-handler
    parameters:
      deciders:
        encode: always-disagg-multimodal-decider
  - type: always-disagg-multimodal-decider
schedulingProfiles:
  - name: encode
    plugins:
      - pluginRef: encode-filter
  - name: decode
    plugins:
      - pluginRef: decode-filter
`, "declared later", "always-disagg-multimodal-decider", "deciders.encode")
}

func TestDisaggDeciderMissing(t *testing.T) {
	wantLoadError(t, `
plugins:
  - type: disagg-headers-handler
  - type: prefill-filter
  - type: decode-filter
  - type: disagg-profile-handler
    parameters:
      deciders:
        prefill: no-such-decider
schedulingProfiles:
  - name: prefill
    plugins:
      - pluginRef: prefill-filter
  - name: decode
    plugins:
      - pluginRef: decode-filter
`, "no-such-decider", "deciders.prefill")
}

func TestDisaggDeciderOfWrongKind(t *testing.T) {
	wantLoadError(t, `
plugins:
  - type: disagg-headers-handler
  - type: always-disagg-pd-decider
  - type: encode-filter
  - type: decode-filter
  - type: disagg-profile-handler
    parameters:
      deciders:
        encode: always-disagg-pd-decider
schedulingProfiles:
  - name: encode
    plugins:
      - pluginRef: encode-filter
  - name: decode
    plugins:
      - pluginRef: decode-filter
`, "deciders.encode")
}

// Without disagg-headers-handler (upstream's disagg handler sets the
// headers itself) the handler adds one: the decode pod still learns where
// prefill ran.
func TestDisaggDeciderWithoutHeadersHandler(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
  - type: always-disagg-pd-decider
  - type: prefill-filter
  - type: decode-filter
  - type: disagg-profile-handler
    parameters:
      deciders:
        prefill: always-disagg-pd-decider
schedulingProfiles:
  - name: prefill
    plugins:
      - pluginRef: prefill-filter
  - name: decode
    plugins:
      - pluginRef: decode-filter
`)
	res := schedule(t, s, schedulingtest.Chat("r1", "m", "hi"), prefillPod, decodePod)
	if got := res.Headers["mif-prefill-endpoint"]; got != "10.2.0.2:8001" {
		t.Errorf("mif-prefill-endpoint = %q, want 10.2.0.2:8001", got)
	}
	if len(s.Describe().Warnings) != 0 {
		t.Errorf("warnings %q", s.Describe().Warnings)
	}
}

// Declared after the handler (Heimdall's order rule) it loads with a
// warning and sets the headers.
func TestDisaggHeadersHandlerDeclaredAfterHandler(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
  - type: always-disagg-multimodal-decider
  - type: encode-filter
  - type: decode-filter
  - type: disagg-profile-handler
    parameters:
      deciders:
        encode: always-disagg-multimodal-decider
  - type: disagg-headers-handler
schedulingProfiles:
  - name: encode
    plugins:
      - pluginRef: encode-filter
  - name: decode
    plugins:
      - pluginRef: decode-filter
`)
	if w := strings.Join(s.Describe().Warnings, "; "); !strings.Contains(w, "declared after the profile handler") {
		t.Fatalf("warnings %q, want the order rule", w)
	}
	res := schedule(t, s, imageChat("r1"), encodePod, decodePod)
	if got := res.Headers["mif-encode-endpoints"]; got == "" {
		t.Errorf("no mif-encode-endpoints header: %v", res.Headers)
	}
}

func TestDisaggAcceptsPrefillHeaderHandlerAlias(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
  - type: prefill-header-handler
  - type: always-disagg-pd-decider
  - type: prefill-filter
  - type: decode-filter
  - type: disagg-profile-handler
    parameters:
      deciders:
        prefill: always-disagg-pd-decider
schedulingProfiles:
  - name: prefill
    plugins:
      - pluginRef: prefill-filter
  - name: decode
    plugins:
      - pluginRef: decode-filter
`)
	res := schedule(t, s, schedulingtest.Chat("r1", "m", "hi"), prefillPod, decodePod)
	if got := res.Headers["mif-prefill-endpoint"]; got != "10.2.0.2:8001" {
		t.Errorf("mif-prefill-endpoint = %q, want 10.2.0.2:8001", got)
	}
}

func TestDisaggMissingProfiles(t *testing.T) {
	cases := []struct {
		name   string
		params string
		field  string
		value  string
	}{
		{"decode", `
      profiles:
        decode: nope`, "parameters.profiles.decode", `"nope"`},
		{"prefill", `
      profiles:
        prefill: nope
      deciders:
        prefill: always-disagg-pd-decider`, "parameters.profiles.prefill", `"nope"`},
		{"encode", `
      profiles:
        encode: nope
      deciders:
        encode: always-disagg-multimodal-decider`, "parameters.profiles.encode", `"nope"`},
		{"default prefill name", `
      deciders:
        prefill: always-disagg-pd-decider`, "parameters.profiles.prefill", `"prefill"`},
		{"legacy decodeProfile", `
      decodeProfile: nope`, "parameters.profiles.decode", `"nope"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			yaml := `
plugins:
  - type: disagg-headers-handler
  - type: always-disagg-pd-decider
  - type: always-disagg-multimodal-decider
  - type: prefill-filter
  - type: decode-filter
  - type: encode-filter
  - type: disagg-profile-handler
    parameters:` + c.params + `
schedulingProfiles:
  - name: decode
    plugins:
      - pluginRef: decode-filter
  - name: encode
    plugins:
      - pluginRef: encode-filter
`
			if c.name != "default prefill name" {
				yaml += `  - name: prefill
    plugins:
      - pluginRef: prefill-filter
`
			}
			wantLoadError(t, yaml, c.field, c.value)
		})
	}
}

func TestDisaggEmptyProfileName(t *testing.T) {
	wantLoadError(t, `
plugins:
  - type: decode-filter
  - type: disagg-profile-handler
    parameters:
      profiles:
        decode: ""
schedulingProfiles:
  - name: decode
    plugins:
      - pluginRef: decode-filter
`, "parameters.profiles.decode")
}

func TestDisaggWithSingleProfileHandlerIsError(t *testing.T) {
	wantLoadError(t, `
plugins:
  - type: single-profile-handler
  - type: decode-filter
  - type: disagg-profile-handler
schedulingProfiles:
  - name: decode
    plugins:
      - pluginRef: decode-filter
`, "profile handler")
}

// ---- pd-profile-handler ----

const reference003 = `
apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
plugins:
  - type: pd-profile-handler
  - type: prefill-filter
  - type: decode-filter
  - type: context-length-aware
    parameters:
      enableFiltering: false
      charToTokenMultiplier: 0.25
  - type: max-score-picker
schedulingProfiles:
  - name: prefill
    plugins:
      - pluginRef: prefill-filter
      - pluginRef: context-length-aware
      - pluginRef: max-score-picker
  - name: decode
    plugins:
      - pluginRef: decode-filter
      - pluginRef: context-length-aware
      - pluginRef: max-score-picker
`

func TestPDReference003LoadsWithDefaultDecider(t *testing.T) {
	s := schedulingtest.Scheduler(t, reference003)
	d := s.Describe()
	if d.ProfileHandler != profilehandler.PDType {
		t.Errorf("profile handler %q, want %s", d.ProfileHandler, profilehandler.PDType)
	}
	if !hasWarning(d.Warnings, "prefix-based-pd-decider") {
		t.Errorf("no warning about the default prefix-based-pd-decider in %q", d.Warnings)
	}
	found := false
	for _, p := range d.Plugins {
		if p.Type == "prefix-based-pd-decider" {
			found = true
		}
	}
	if !found {
		t.Errorf("the default decider does not show in Describe().Plugins")
	}
	// the default decider (nonCachedTokens 0) never disaggregates
	res := schedule(t, s, schedulingtest.Completion("r1", "m", strings.Repeat("x", 8000)), prefillPod, decodePod)
	if res.Primary.Profile != "decode" || res.Target().Endpoint != decodePod {
		t.Errorf("primary %s on %v, want decode on %s", res.Primary.Profile, res.Target().Endpoint, decodePod.Name)
	}
	if res.Prefill != nil {
		t.Errorf("default decider disaggregated a request")
	}
}

func TestPDReference001StyleLoads(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
  - type: disagg-headers-handler
  - type: prefix-based-pd-decider
    parameters:
      nonCachedTokens: 16
  - type: prefill-filter
  - type: decode-filter
  - type: max-score-picker
  - type: pd-profile-handler
    parameters:
      deciderPluginName: prefix-based-pd-decider
schedulingProfiles:
  - name: prefill
    plugins:
      - pluginRef: prefill-filter
      - pluginRef: max-score-picker
  - name: decode
    plugins:
      - pluginRef: decode-filter
      - pluginRef: max-score-picker
`)
	if hasWarning(s.Describe().Warnings, "default") {
		t.Errorf("declared decider but a default-decider warning: %q", s.Describe().Warnings)
	}
	res := schedule(t, s, schedulingtest.Completion("r1", "m", strings.Repeat("x", 400)), prefillPod, decodePod)
	if res.Prefill == nil {
		t.Fatalf("100-token prompt, nothing cached, nonCachedTokens 16: not disaggregated")
	}
	if got := res.Headers["mif-prefill-endpoint"]; got != "10.2.0.2:8001" {
		t.Errorf("mif-prefill-endpoint = %q, want 10.2.0.2:8001", got)
	}
}

func TestPDDeclaredDefaultDeciderIsUsed(t *testing.T) {
	// deciderPluginName left at its default, and a plugin of that name is
	// declared earlier: the handler uses it rather than making one.
	s := schedulingtest.Scheduler(t, `
plugins:
  - type: disagg-headers-handler
  - type: prefix-based-pd-decider
    parameters:
      nonCachedTokens: 8
  - type: prefill-filter
  - type: decode-filter
  - type: pd-profile-handler
schedulingProfiles:
  - name: prefill
    plugins:
      - pluginRef: prefill-filter
  - name: decode
    plugins:
      - pluginRef: decode-filter
`)
	res := schedule(t, s, schedulingtest.Completion("r1", "m", strings.Repeat("x", 400)), prefillPod, decodePod)
	if res.Prefill == nil {
		t.Errorf("the declared prefix-based-pd-decider (nonCachedTokens 8) was not used")
	}
}

func TestPDExplicitDeciderMissing(t *testing.T) {
	wantLoadError(t, `
plugins:
  - type: disagg-headers-handler
  - type: prefill-filter
  - type: decode-filter
  - type: pd-profile-handler
    parameters:
      deciderPluginName: my-decider
schedulingProfiles:
  - name: prefill
    plugins:
      - pluginRef: prefill-filter
  - name: decode
    plugins:
      - pluginRef: decode-filter
`, "deciderPluginName", "my-decider")
}

func TestPDExplicitDeciderDeclaredLater(t *testing.T) {
	wantLoadError(t, `
plugins:
  - type: disagg-headers-handler
  - type: prefill-filter
  - type: decode-filter
  - type: pd-profile-handler
    parameters:
      deciderPluginName: prefix-based-pd-decider
  - type: prefix-based-pd-decider
schedulingProfiles:
  - name: prefill
    plugins:
      - pluginRef: prefill-filter
  - name: decode
    plugins:
      - pluginRef: decode-filter
`, "deciderPluginName", "declared later")
}

// pd-profile-handler without disagg-headers-handler adds one too.
func TestPDExplicitDeciderWithoutHeadersHandler(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
  - type: always-disagg-pd-decider
  - type: prefill-filter
  - type: decode-filter
  - type: pd-profile-handler
    parameters:
      deciderPluginName: always-disagg-pd-decider
schedulingProfiles:
  - name: prefill
    plugins:
      - pluginRef: prefill-filter
  - name: decode
    plugins:
      - pluginRef: decode-filter
`)
	res := schedule(t, s, schedulingtest.Chat("r1", "m", "hi"), prefillPod, decodePod)
	if got := res.Headers["mif-prefill-endpoint"]; got != "10.2.0.2:8001" {
		t.Errorf("mif-prefill-endpoint = %q, want 10.2.0.2:8001", got)
	}
}

func TestPDDeciderNotAPrefillDecider(t *testing.T) {
	wantLoadError(t, `
plugins:
  - type: disagg-headers-handler
  - type: always-disagg-multimodal-decider
  - type: prefill-filter
  - type: decode-filter
  - type: pd-profile-handler
    parameters:
      deciderPluginName: always-disagg-multimodal-decider
schedulingProfiles:
  - name: prefill
    plugins:
      - pluginRef: prefill-filter
  - name: decode
    plugins:
      - pluginRef: decode-filter
`, "deciderPluginName")
}

func pdConfig(params string, extra string) string {
	return `
plugins:
  - type: disagg-headers-handler
  - type: response-header-handler
  - type: always-disagg-pd-decider
  - type: prefill-filter
  - type: decode-filter` + extra + `
  - type: pd-profile-handler
    parameters:
      deciderPluginName: always-disagg-pd-decider` + params + `
schedulingProfiles:
  - name: prefill
    plugins:
      - pluginRef: prefill-filter
  - name: decode
    plugins:
      - pluginRef: decode-filter
`
}

func TestPDAlwaysDisaggregates(t *testing.T) {
	s := schedulingtest.Scheduler(t, pdConfig("", ""))
	req := schedulingtest.Chat("r1", "m", "hi")
	res := schedule(t, s, req, prefillPod, decodePod)
	if got := strings.Join(profileNames(res), ","); got != "decode,prefill" {
		t.Errorf("profiles %s, want decode,prefill", got)
	}
	if res.Primary.Profile != "decode" || res.Target().Endpoint != decodePod {
		t.Errorf("primary %s on %v, want decode on %s", res.Primary.Profile, res.Target().Endpoint, decodePod.Name)
	}
	if res.Prefill == nil || res.Prefill.Profile != "prefill" {
		t.Fatalf("Prefill = %+v, want the prefill result", res.Prefill)
	}
	if got := res.Headers["mif-prefill-endpoint"]; got != "10.2.0.2:8001" {
		t.Errorf("mif-prefill-endpoint = %q, want 10.2.0.2:8001", got)
	}
	if _, ok := res.Headers[profilehandler.HeaderDataParallelHostPort]; ok {
		t.Errorf("%s set without primaryPort", profilehandler.HeaderDataParallelHostPort)
	}
	resp := scheduling.NewResponse(res, 200)
	s.ResponseReceived(context.Background(), req, resp)
	if got := resp.Headers["x-prefiller-host-port"]; got != "10.2.0.2:8001" {
		t.Errorf("x-prefiller-host-port = %q, want 10.2.0.2:8001", got)
	}
}

func TestPDFailedPrefillServesDecodeOnly(t *testing.T) {
	s := schedulingtest.Scheduler(t, pdConfig("", ""))
	res, err := s.Schedule(context.Background(), schedulingtest.Chat("r1", "m", "hi"), []*scheduling.Endpoint{decodePod})
	if err != nil {
		t.Fatalf("no prefill pods: %v; want decode-only", err)
	}
	if res.Prefill != nil || res.Target().Endpoint != decodePod {
		t.Errorf("prefill %+v, target %v; want decode-only on %s", res.Prefill, res.Target().Endpoint, decodePod.Name)
	}
}

func TestPDDecodeFailureIsNoMatch(t *testing.T) {
	s := schedulingtest.Scheduler(t, pdConfig("", ""))
	_, err := s.Schedule(context.Background(), schedulingtest.Chat("r1", "m", "hi"), []*scheduling.Endpoint{prefillPod})
	checkNoMatch(t, err)
}

func TestPDPrimaryPort(t *testing.T) {
	s := schedulingtest.Scheduler(t, pdConfig(`
      primaryPort: 9000`, ""))
	req := schedulingtest.Chat("r1", "m", "hi")
	res := schedule(t, s, req, prefillPod, decodePod)
	tg := res.Target()
	if tg.Endpoint != decodePod {
		t.Fatalf("target %v, want %s", tg.Endpoint, decodePod.Name)
	}
	if tg.Port != 9000 || tg.HostPort() != "10.2.0.1:9000" {
		t.Errorf("target %s (port %d), want 10.2.0.1:9000", tg.HostPort(), tg.Port)
	}
	if got := res.Headers[profilehandler.HeaderDataParallelHostPort]; got != "10.2.0.1:8000" {
		t.Errorf("%s = %q, want the original 10.2.0.1:8000", profilehandler.HeaderDataParallelHostPort, got)
	}
	if profilehandler.HeaderDataParallelHostPort != "x-data-parallel-host-port" {
		t.Errorf("header name %q", profilehandler.HeaderDataParallelHostPort)
	}
	// the prefill target keeps its own port
	if pt, _ := res.Prefill.Target(); pt.HostPort() != "10.2.0.2:8001" {
		t.Errorf("prefill target %s, want 10.2.0.2:8001", pt.HostPort())
	}
	resp := scheduling.NewResponse(res, 200)
	s.ResponseReceived(context.Background(), req, resp)
	if got := resp.Headers["x-decoder-host-port"]; got != "10.2.0.1:9000" {
		t.Errorf("x-decoder-host-port = %q, want the rewritten 10.2.0.1:9000", got)
	}
}

func TestPDPrimaryPortOutOfRange(t *testing.T) {
	for _, port := range []string{"70000", "65536", "-1"} {
		t.Run(port, func(t *testing.T) {
			wantLoadError(t, pdConfig(`
      primaryPort: `+port, ""), "parameters.primaryPort")
		})
	}
}

func TestPDPrimaryPortBounds(t *testing.T) {
	for _, port := range []string{"1", "65535"} {
		s := schedulingtest.Scheduler(t, pdConfig(`
      primaryPort: `+port, ""))
		res := schedule(t, s, schedulingtest.Chat("r1", "m", "hi"), decodePod)
		if got := res.Target().HostPort(); got != "10.2.0.1:"+port {
			t.Errorf("primaryPort %s: target %s", port, got)
		}
	}
}

func TestPDMissingProfiles(t *testing.T) {
	wantLoadError(t, pdConfig(`
      decodeProfile: nope`, ""), "parameters.decodeProfile", "nope")
	wantLoadError(t, pdConfig(`
      prefillProfile: nope`, ""), "parameters.prefillProfile", "nope")
}

func TestPDCustomProfiles(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
  - type: disagg-headers-handler
  - type: always-disagg-pd-decider
  - type: prefill-filter
  - type: decode-filter
  - type: pd-profile-handler
    parameters:
      decodeProfile: d
      prefillProfile: p
      deciderPluginName: always-disagg-pd-decider
schedulingProfiles:
  - name: p
    plugins:
      - pluginRef: prefill-filter
  - name: d
    plugins:
      - pluginRef: decode-filter
`)
	res := schedule(t, s, schedulingtest.Chat("r1", "m", "hi"), prefillPod, decodePod)
	if res.Primary.Profile != "d" || res.Prefill == nil || res.Prefill.Profile != "p" {
		t.Errorf("primary %s, prefill %+v; want d / p", res.Primary.Profile, res.Prefill)
	}
}

func TestPDPrefixPluginNameMissing(t *testing.T) {
	wantLoadError(t, pdConfig(`
      prefixPluginName: my-prefix`, ""), "prefixPluginName", "my-prefix")
}

// prefixPDConfig routes decode by prefix-cache score and disaggregates
// when at least 32 prompt tokens are not cached on the decode pod.
const prefixPDConfig = `
plugins:
  - type: disagg-headers-handler
  - type: prefix-cache-scorer
    parameters:
      autoTune: false
  - type: prefix-based-pd-decider
    parameters:
      nonCachedTokens: 32
  - type: prefill-filter
  - type: decode-filter
  - type: max-score-picker
  - type: pd-profile-handler
    parameters:
      deciderPluginName: prefix-based-pd-decider
schedulingProfiles:
  - name: prefill
    plugins:
      - pluginRef: prefill-filter
      - pluginRef: max-score-picker
  - name: decode
    plugins:
      - pluginRef: decode-filter
      - pluginRef: prefix-cache-scorer
        weight: 3
      - pluginRef: max-score-picker
`

// longPrompt is 40 blocks of 64 characters (16 tokens each): 640 tokens.
func longPrompt(seed string) string {
	var b strings.Builder
	for b.Len() < 40*64 {
		b.WriteString(seed)
	}
	return b.String()[:40*64]
}

func checkPrefixRouting(t *testing.T, s *scheduling.Scheduler) {
	t.Helper()
	eps := []*scheduling.Endpoint{
		prefillPod,
		ep("decode-a", "10.2.1.1", 8000, "decode"),
		ep("decode-b", "10.2.1.2", 8000, ""),
	}
	prompt := longPrompt("the quick brown fox jumps over the lazy dog; ")
	first := schedule(t, s, schedulingtest.Completion("r1", "m", prompt), eps...)
	if first.Prefill == nil {
		t.Fatalf("first request (640 uncached tokens, nonCachedTokens 32) not disaggregated")
	}
	decodeName := first.Target().Endpoint.Name

	second := schedule(t, s, schedulingtest.Completion("r2", "m", prompt), eps...)
	if got := second.Target().Endpoint.Name; got != decodeName {
		t.Fatalf("second identical request routed to %s, want %s (prefix cache)", got, decodeName)
	}
	if second.Prefill != nil {
		t.Errorf("second identical request disaggregated although its prompt is cached on %s", decodeName)
	}
	if _, ok := second.Headers["mif-prefill-endpoint"]; ok {
		t.Errorf("mif-prefill-endpoint set for a request served without prefill")
	}

	other := schedule(t, s, schedulingtest.Completion("r3", "m", longPrompt("lorem ipsum dolor sit amet, consectetur adipiscing; ")), eps...)
	if other.Prefill == nil {
		t.Errorf("a different long prompt was not disaggregated")
	}
}

func TestPDPrefixBasedDeciderSeesCachedTokens(t *testing.T) {
	checkPrefixRouting(t, schedulingtest.Scheduler(t, prefixPDConfig))
}

func TestPDPrefixBasedDeciderWithoutScorerInProfile(t *testing.T) {
	// the prefix plugin is declared but only the handler consults it: the
	// decode pod is chosen by the picker alone, the decider still sees the
	// cached tokens of the chosen pod.
	s := schedulingtest.Scheduler(t, `
plugins:
  - type: disagg-headers-handler
  - type: prefix-cache-scorer
    parameters:
      autoTune: false
  - type: prefix-based-pd-decider
    parameters:
      nonCachedTokens: 32
  - type: prefill-filter
  - type: decode-filter
  - type: pd-profile-handler
    parameters:
      deciderPluginName: prefix-based-pd-decider
schedulingProfiles:
  - name: prefill
    plugins:
      - pluginRef: prefill-filter
  - name: decode
    plugins:
      - pluginRef: decode-filter
`)
	prompt := longPrompt("a long shared system prompt for every request. ")
	eps := []*scheduling.Endpoint{prefillPod, decodePod}
	if res := schedule(t, s, schedulingtest.Completion("r1", "m", prompt), eps...); res.Prefill == nil {
		t.Fatalf("first request not disaggregated")
	}
	if res := schedule(t, s, schedulingtest.Completion("r2", "m", prompt), eps...); res.Prefill != nil {
		t.Errorf("second identical request disaggregated although cached on %s", decodePod.Name)
	}
}

func TestDisaggPrefixBasedDeciderSeesCachedTokens(t *testing.T) {
	cfg := strings.Replace(prefixPDConfig, `  - type: pd-profile-handler
    parameters:
      deciderPluginName: prefix-based-pd-decider`, `  - type: disagg-profile-handler
    parameters:
      deciders:
        prefill: prefix-based-pd-decider`, 1)
	checkPrefixRouting(t, schedulingtest.Scheduler(t, cfg))
}

func TestDisaggPrefixBasedDeciderWithoutScorerInProfile(t *testing.T) {
	// As with pd-profile-handler: the prefix plugin is only declared (before
	// the handler); the handler computes its match so the decider sees the
	// decode pod's cached tokens.
	s := schedulingtest.Scheduler(t, `
plugins:
  - type: disagg-headers-handler
  - type: prefix-cache-scorer
    parameters:
      autoTune: false
  - type: prefix-based-pd-decider
    parameters:
      nonCachedTokens: 32
  - type: prefill-filter
  - type: decode-filter
  - type: disagg-profile-handler
    parameters:
      deciders:
        prefill: prefix-based-pd-decider
schedulingProfiles:
  - name: prefill
    plugins:
      - pluginRef: prefill-filter
  - name: decode
    plugins:
      - pluginRef: decode-filter
`)
	prompt := longPrompt("a long shared system prompt for every request. ")
	eps := []*scheduling.Endpoint{prefillPod, decodePod}
	if res := schedule(t, s, schedulingtest.Completion("r1", "m", prompt), eps...); res.Prefill == nil {
		t.Fatalf("first request not disaggregated")
	}
	if res := schedule(t, s, schedulingtest.Completion("r2", "m", prompt), eps...); res.Prefill != nil {
		t.Errorf("second identical request disaggregated although cached on %s", decodePod.Name)
	}
}

// Nested parameters win over the legacy flat ones; a shadowed legacy key is
// reported as ignored.
func TestDisaggNestedWinsOverLegacy(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
  - type: disagg-headers-handler
  - type: always-disagg-pd-decider
  - type: prefill-filter
  - type: decode-filter
  - type: disagg-profile-handler
    parameters:
      profiles: {decode: dec}
      decodeProfile: old-decode
      deciders: {prefill: always-disagg-pd-decider}
      deciderPluginName: nope
schedulingProfiles:
  - {name: prefill, plugins: [{pluginRef: prefill-filter}]}
  - {name: dec, plugins: [{pluginRef: decode-filter}]}
`)
	w := strings.Join(s.Describe().Warnings, "\n")
	for _, want := range []string{
		"parameters.decodeProfile is deprecated and ignored: parameters.profiles.decode is set",
		"parameters.deciderPluginName is deprecated and ignored: parameters.deciders.prefill is set",
	} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %q:\n%s", want, w)
		}
	}
}

// With stage profiles named other than prefill/encode, the headers plugin
// still reports where prefill ran (it reads the stage the handler recorded).
func TestDisaggHeadersWithCustomProfileNames(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
  - type: disagg-headers-handler
  - type: always-disagg-pd-decider
  - type: prefill-filter
  - type: decode-filter
  - type: disagg-profile-handler
    parameters:
      profiles: {decode: dec, prefill: pf}
      deciders: {prefill: always-disagg-pd-decider}
schedulingProfiles:
  - {name: pf, plugins: [{pluginRef: prefill-filter}]}
  - {name: dec, plugins: [{pluginRef: decode-filter}]}
`)
	res := schedule(t, s, schedulingtest.Completion("r", "m", "x"), prefillPod, decodePod)
	if res.Prefill == nil {
		t.Fatal("no prefill stage")
	}
	if got := res.Headers["mif-prefill-endpoint"]; got != prefillPod.HostPort() {
		t.Errorf("mif-prefill-endpoint = %q, want %s", got, prefillPod.HostPort())
	}
}

// data-parallel-profile-handler runs its one profile and sends the request
// to primaryPort, the pod's own address in x-data-parallel-host-port.
func TestDataParallelRewritesToPrimaryPort(t *testing.T) {
	s := schedulingtest.Scheduler(t, `
plugins:
  - type: max-score-picker
  - type: data-parallel-profile-handler
    parameters:
      primaryPort: 9000
schedulingProfiles:
  - name: default
    plugins:
      - pluginRef: max-score-picker
`)
	res := schedule(t, s, schedulingtest.Chat("r1", "m", "hi"), prefillPod)
	if tg := res.Target(); tg.Endpoint != prefillPod || tg.Port != 9000 {
		t.Errorf("target %s:%d, want %s:9000", tg.Endpoint.Name, tg.Port, prefillPod.Name)
	}
	if got := res.Headers["x-data-parallel-host-port"]; got != "10.2.0.2:8001" {
		t.Errorf("x-data-parallel-host-port = %q, want 10.2.0.2:8001", got)
	}
	if w := s.Describe().Warnings; len(w) != 1 || !strings.Contains(w[0], "deprecated upstream") {
		t.Errorf("warnings %q", w)
	}
	wantLoadError(t, "plugins: [{type: data-parallel-profile-handler, parameters: {primaryPort: 0}}]", "primaryPort")
	wantLoadError(t, `
plugins: [{type: data-parallel-profile-handler}, {type: max-score-picker}]
schedulingProfiles: [{name: a, plugins: [{pluginRef: max-score-picker}]}, {name: b, plugins: [{pluginRef: max-score-picker}]}]
`, "exactly one profile")
}
