package flowcontrol

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hermod/hermod/libs/plugins/flowpolicy"
)

const pickerConfig = `
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
featureGates: [flowControl]
plugins:
- type: queue-scorer
- type: max-score-picker
- {type: utilization-detector, name: util, parameters: {queueDepthThreshold: 8, kvCacheUtilThreshold: 0.9, metricsStalenessThreshold: 30s}}
- {type: round-robin-fairness-policy, name: tenants}
- {type: priority-holdback-policy, name: holdback, parameters: {minCeiling: 0.5, maxCeiling: 0.9}}
schedulingProfiles:
- name: default
  plugins: [{pluginRef: queue-scorer}, {pluginRef: max-score-picker}]
flowControl:
  maxRequests: 1k
  maxBytes: 1Mi
  defaultRequestTTL: 0s
  usageLimitPolicyPluginRef: holdback
  defaultPriorityBand: {maxRequests: 300}
  defaultNegativePriorityBand: {maxRequests: 20, maxBytes: 64Ki}
  priorityBands:
  - {priority: 10, maxRequests: 50, fairnessPolicyRef: tenants, orderingPolicyRef: edf-ordering-policy}
  saturationDetector: {pluginRef: util}
`

func TestParseEndpointPickerConfig(t *testing.T) {
	s, err := Parse([]byte(pickerConfig))
	if err != nil {
		t.Fatal(err)
	}
	c := s.Config
	switch {
	case s.Source != "EndpointPickerConfig" || !c.Queueing || !c.QueueSheddable || !s.HoldWhenEmpty || !s.DefaultObjective:
		t.Errorf("flow control from a picker config queues everything, sheddable too, and waits for endpoints: %+v", s)
	case !c.NoTTL:
		t.Error("defaultRequestTTL: 0s is no TTL")
	case c.MaxQueued != 1000 || c.MaxBytes != 1<<20:
		t.Errorf("global bounds %d requests, %d bytes", c.MaxQueued, c.MaxBytes)
	case s.Detector != DetectUtilization || s.QueueDepth != 8 || s.KVCacheUtil != 0.9 || s.Staleness != 30*time.Second:
		t.Errorf("detector %v %d %v %v", s.Detector, s.QueueDepth, s.KVCacheUtil, s.Staleness)
	case c.UsageLimit == nil:
		t.Error("no usage limit")
	}
	for prio, want := range map[int]Band{
		10: {MaxRequests: 50, Fairness: FairRoundRobin},
		0:  {MaxRequests: 300, Fairness: FairGlobalStrict},
		7:  {MaxRequests: 300, Fairness: FairGlobalStrict},
		-1: {MaxRequests: 20, MaxBytes: 64 << 10, Fairness: FairGlobalStrict},
	} {
		if got := c.Band(prio); got != want {
			t.Errorf("band %d: %+v, want %+v", prio, got, want)
		}
	}
	ceil := make([]float64, 2)
	c.UsageLimit.Ceilings(0.6, []int{10, 0}, ceil)
	if ceil[0] != 0.9 || ceil[1] != 0.5 {
		t.Errorf("holdback ceilings %v", ceil)
	}
	// an objective no InferenceObjective names gets the default priority
	if p, _, err := s.Classify(map[string][]string{"X-Gateway-Inference-Objective": {"unknown"}}); err != nil || p != 0 {
		t.Errorf("unknown objective: %d, %v", p, err)
	}
}

func TestPickerConfigDefaults(t *testing.T) {
	s, err := Parse([]byte("kind: EndpointPickerConfig\nfeatureGates: [flowControl]\nplugins: [{type: random-picker}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Detector != DetectUtilization || s.QueueDepth != 5 || s.KVCacheUtil != 0.8 || s.Staleness != DefaultStaleness {
		t.Errorf("default detector: %+v", s)
	}
	if s.Config.NoTTL || s.Config.DefaultTTL != 0 || s.Config.UsageLimit != nil || s.Config.Band(3).Fairness != FairGlobalStrict {
		t.Errorf("defaults: %+v", s.Config)
	}
	c, err := Parse([]byte(`kind: EndpointPickerConfig
featureGates: [flowControl]
plugins: [{type: concurrency-detector, name: c, parameters: {maxConcurrency: 12}}]
flowControl: {saturationDetector: {pluginRef: c}}
`))
	if err != nil || c.Detector != DetectConcurrency || c.EndpointConcurrency != 12 {
		t.Fatalf("a declared concurrency detector: %+v, %v", c, err)
	}
	if _, err := Parse([]byte("kind: EndpointPickerConfig\nfeatureGates: [flowControl]\nflowControl: {enableEviction: true}\n")); err != nil {
		t.Fatal(err)
	}
	d, err := Parse([]byte("kind: EndpointPickerConfig\nfeatureGates: [flowControl]\nflowControl: {priorityBands: [{priority: 1, orderingPolicyRef: slo-deadline-ordering-policy}]}\n"))
	if err != nil || d.Config.Band(1).Ordering != OrderSLODeadline || d.Config.Band(0).Ordering != OrderArrival {
		t.Fatalf("slo-deadline-ordering-policy: %v", err)
	}
}

func TestPickerConfigErrorsSayWhatToUse(t *testing.T) {
	const head = "kind: EndpointPickerConfig\nfeatureGates: [flowControl]\n"
	for cfg, want := range map[string]string{
		"kind: EndpointPickerConfig\nplugins: [{type: random-picker}]\n": "does not enable the flowControl feature gate",
		head + "plugins: [{type: program-aware-fairness, name: a}, {type: program-aware-fairness, name: b}]\n" +
			"flowControl: {priorityBands: [{priority: 1, fairnessPolicyRef: a}, {priority: 2, fairnessPolicyRef: b}]}\n": "share one program-aware-fairness",
		head + "flowControl: {defaultPriorityBand: {fairnessPolicyRef: program-aware-fairness}}\n" +
			"plugins: [{type: program-aware-fairness, parameters: {lasDecayFactor: 2}}]\n": "lasDecayFactor",
		head + "plugins: [{type: queue-scorer}]\nflowControl: {defaultPriorityBand: {fairnessPolicyRef: queue-scorer}}\n":                         "is not a fairness policy",
		head + "flowControl: {usageLimitPolicyPluginRef: queue-scorer}\n":                                                                         "is not a usage-limit policy",
		head + "flowControl: {usageLimitPolicyPluginRef: priority-holdback-policy}\n":                                                             "minCeiling",
		head + "plugins: [{type: static-usage-limit-policy, name: s, parameters: {threshold: 2}}]\nflowControl: {usageLimitPolicyPluginRef: s}\n": "threshold",
		head + "plugins: [{type: concurrency-detector, parameters: {concurrencyMode: tokens}}]\n" +
			"flowControl: {saturationDetector: {pluginRef: concurrency-detector}}\n": "counts requests, not tokens: use requests",
		head + "plugins: [{type: queue-scorer}]\nflowControl: {saturationDetector: {pluginRef: queue-scorer}}\n": "is not a saturation detector",
		head + "flowControl: {defaultRequestTTL: -1s}\n":                                                         "defaultRequestTTL",
		head + "flowControl: {priorityBands: [{priority: 1}, {priority: 1}]}\n":                                  "is already",
	} {
		_, err := Parse([]byte(cfg))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", cfg, err, want)
		}
	}
}

// The llm-d router's shipped flow-control configurations run unchanged.
func TestShippedFlowControlConfig(t *testing.T) {
	read := func(name string) Settings {
		t.Helper()
		data, err := os.ReadFile("../../../../libs/plugins/standard/testdata/llmd-v010/" + name)
		if err != nil {
			t.Fatal(err)
		}
		s, err := Parse(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return s
	}
	if s := read("soft-reflective-ceiling-epp-config.yaml"); s.Config.UsageLimit == nil || s.Detector != DetectUtilization {
		t.Fatalf("%+v", s)
	}
	if s := read("sim-program-aware-config.yaml"); s.Config.Band(0).Fairness != FairProgramAware || s.Config.Programs == nil {
		t.Fatalf("%+v", s)
	}
}

// With agent-identity declared, a request naming no fairness id is the
// flow of its agent's session; a fairness header still wins, the llm-d
// router's before GIE's.
func TestAgentIdentityNamesTheFlow(t *testing.T) {
	s, err := Parse([]byte(`kind: EndpointPickerConfig
featureGates: [flowControl]
plugins: [{type: agent-identity, parameters: {additionalSessionHeaders: [x-my-agent]}}]
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		headers map[string]string
		want    string
	}{
		{map[string]string{"X-Claude-Code-Session-Id": "s-1"}, "s-1"},
		{map[string]string{"Session-Id": "codex", "X-My-Agent": "mine"}, "mine"},
		{map[string]string{"Session-Id": "codex", "X-Gateway-Inference-Fairness-Id": "tenant"}, "tenant"},
		{map[string]string{"X-Gateway-Inference-Fairness-Id": "gie", "X-Llm-D-Inference-Fairness-Id": "llmd"}, "llmd"},
		{map[string]string{}, ""},
	} {
		h := http.Header{}
		for k, v := range tc.headers {
			h.Set(k, v)
		}
		if _, flow, err := s.Classify(h); err != nil || flow != tc.want {
			t.Errorf("%v: flow %q, %v, want %q", tc.headers, flow, err, tc.want)
		}
	}
	plain, _ := Parse([]byte("queueing: true\n"))
	if _, flow, _ := plain.Classify(http.Header{"X-Claude-Code-Session-Id": {"s"}}); flow != "" {
		t.Errorf("without agent-identity a session header is no flow: %q", flow)
	}
}

// flowControl.enableEviction switches in-flight eviction on, with the
// llm-d router's one order and filter whether plugins declare them or
// not, and a grace fitting the detector: a scraped reading's, or the
// gateway's own count's. Declared without it, they warn that nothing is
// evicted. The corpus configs written for the two types run.
func TestPickerConfigEviction(t *testing.T) {
	const head = "kind: EndpointPickerConfig\nfeatureGates: [flowControl]\n"
	s, err := Parse([]byte(head + "flowControl: {enableEviction: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := s.Config.Eviction
	if e == nil || e.Order != (flowpolicy.PriorityThenTime{}) || e.Filter != (flowpolicy.Sheddable{}) || e.Grace != DefaultEvictionGrace || len(s.Warnings) != 0 {
		t.Fatalf("eviction %+v, warnings %q", e, s.Warnings)
	}
	s, err = Parse([]byte(head + "plugins: [{type: concurrency-detector, parameters: {maxConcurrency: 8}}]\n" +
		"flowControl: {enableEviction: true, saturationDetector: {pluginRef: concurrency-detector}}\n"))
	if err != nil || s.Config.Eviction == nil || s.Config.Eviction.Grace != CountedEvictionGrace {
		t.Fatalf("with concurrency-detector: %+v, %v", s.Config.Eviction, err)
	}
	s, err = Parse([]byte(head + "plugins: [{type: sheddable-eviction-filter, name: f}, {type: priority-then-time-eviction-order-policy}]\n"))
	if err != nil || s.Config.Eviction != nil || len(s.Warnings) != 2 || !strings.Contains(s.Warnings[0], "plugins f (sheddable-eviction-filter): flowControl.enableEviction is not set") {
		t.Fatalf("declared without enableEviction: %+v, %q, %v", s.Config.Eviction, s.Warnings, err)
	}
	for name, grace := range map[string]time.Duration{
		"priority-then-time-eviction-order-policy.yaml": DefaultEvictionGrace,
		"sheddable-eviction-filter.yaml":                CountedEvictionGrace,
	} {
		data, err := os.ReadFile("../../../../libs/plugins/standard/testdata/upstream/" + name)
		if err != nil {
			t.Fatal(err)
		}
		s, err := Parse(data)
		if err != nil || s.Config.Eviction == nil || s.Config.Eviction.Grace != grace || len(s.Warnings) != 0 {
			t.Errorf("%s: %+v, %q, %v", name, s.Config.Eviction, s.Warnings, err)
		}
	}
}
