package flowcontrol

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestParseAndClassify(t *testing.T) {
	s, err := Parse([]byte("queueing: true\nmaxConcurrency: 64\ndefaultRequestTTL: 20s\nobjectives: {critical: 10, batch: -1}\nbandShares: {\"0\": 0.2}\nsaturation: {queueDepthThreshold: 3, kvCacheUtilThreshold: 0.9}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Config.Queueing || s.MaxConcurrency != 64 || s.Config.DefaultTTL != 20*time.Second || s.Config.Shares[0] != 0.2 || s.QueueDepth != 3 || s.KVCacheUtil != 0.9 {
		t.Fatalf("%+v", s)
	}
	h := http.Header{}
	h.Set(ObjectiveHeader, "batch")
	h.Set(FairnessHeader, "tenant-a")
	if p, f, err := s.Classify(h); p != -1 || f != "tenant-a" || err != nil {
		t.Fatalf("objective: %d %q %v", p, f, err)
	}
	h = http.Header{}
	h.Set(PriorityHeader, "7")
	if p, _, err := s.Classify(h); p != 7 || err != nil {
		t.Fatalf("numeric: %d %v", p, err)
	}
	h.Set(PriorityHeader, "high")
	if _, _, err := s.Classify(h); err == nil {
		t.Fatal("a non-numeric priority passed")
	}
	if p, _, err := s.Classify(http.Header{}); p != 0 || err != nil {
		t.Fatalf("default: %d %v", p, err)
	}
}

func TestBadConfigsNameTheField(t *testing.T) {
	for in, want := range map[string]string{
		"defaultRequestTTL: soon":               "defaultRequestTTL",
		"maxConcurrency: -1":                    "maxConcurrency",
		"bandShares: {low: 0.2}":                "bandShares.low",
		"bandShares: {\"0\": 1.5}":              "bandShares.0",
		"bandShares: {\"0\": 0.6, \"1\": 0.5}":  "add up",
		"saturation: {kvCacheUtilThreshold: 2}": "kvCacheUtilThreshold",
		"saturation: {queueDepthThreshold: -4}": "queueDepthThreshold",
		"queueing: yes please":                  "flow control",
		"queuing: true":                         `unknown field "queuing"`,
	} {
		if _, err := Parse([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming %q", in, err, want)
		}
	}
}

func TestPoolSaturationByTheQueueKVRule(t *testing.T) {
	p := NewPoolSaturation()
	now := time.Unix(1000, 0)
	p.now = func() time.Time { return now }
	if p.Saturated() {
		t.Fatal("no metrics: not saturated")
	}
	p.Update("a", 5, 0.1)
	p.Update("b", 0, 0.85)
	if !p.Saturated() {
		t.Fatal("a waits 5, b at 85% KV: saturated")
	}
	if !p.Update("b", 0, 0.5) || p.Saturated() {
		t.Fatal("b has room: not saturated, and the change reported")
	}
	now = now.Add(10 * time.Second)
	p.Update("a", 9, 0)
	if !p.Saturated() {
		t.Fatal("b's metrics are stale: a alone decides")
	}
}

func TestPoolSaturationHoldsWhenEmpty(t *testing.T) {
	p := NewPoolSaturation()
	now := time.Unix(1000, 0)
	p.now = func() time.Time { return now }
	p.HoldWhenEmpty = true
	if !p.Saturated() {
		t.Fatal("no endpoint, holdWhenEmpty: saturated (requests wait for a pod)")
	}
	p.Update("a", 0, 0.1)
	if p.Saturated() {
		t.Fatal("a pod with room: not saturated")
	}
	now = now.Add(10 * time.Second)
	if !p.Saturated() {
		t.Fatal("the only pod's metrics are stale: the pool is empty again")
	}
	p.Update("b", 0, 0.1)
	if p.Retain(map[string]bool{"a": true, "b": true}) || p.Saturated() {
		t.Fatal("b is registered and has room")
	}
	if !p.Retain(map[string]bool{}) || !p.Saturated() {
		t.Fatal("b left the registry: the pool is empty at once")
	}
	// A late sample of a pod that left does not bring it back.
	if p.Update("b", 0, 0.1) || !p.Saturated() {
		t.Fatal("a departed pod's late metrics made the pool look served")
	}
	s, err := Parse([]byte("queueing: true\nholdWhenEmpty: true\n"))
	if err != nil || !s.HoldWhenEmpty {
		t.Fatalf("Parse holdWhenEmpty = %+v, %v", s, err)
	}
}

// FuzzParse: any flow-control file parses or fails with an error.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"queueing: true\nmaxConcurrency: 8\n", "objectives: {a: 1}\nbandShares: {\"-1\": 0.1}\n", "{", "defaultRequestTTL: 1h\n", pickerConfig,
		"kind: EndpointPickerConfig\nfeatureGates: [flowControl]\nflowControl: {maxRequests: 2k, priorityBands: [{priority: -1, maxBytes: 1Mi}]}\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err == nil && (s.MaxConcurrency < 0 || s.Config.DefaultTTL < 0 || s.Config.MaxQueued < 0 || s.Config.MaxBytes < 0) {
			t.Fatalf("accepted %+v", s)
		}
		if err == nil && s.Config.Band != nil {
			for _, p := range []int{-1, 0, 1} {
				if b := s.Config.Band(p); b.MaxRequests < 0 || b.MaxBytes < 0 {
					t.Fatalf("band %d: %+v", p, b)
				}
			}
		}
	})
}
