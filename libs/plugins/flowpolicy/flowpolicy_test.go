package flowpolicy

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestStaticCeilings(t *testing.T) {
	p, err := ParseStatic(nil, nil)
	if err != nil || p.Threshold != 1 {
		t.Fatalf("default: %+v, %v", p, err)
	}
	p, err = ParseStatic(json.RawMessage(`{"threshold": 0.7}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := make([]float64, 3)
	p.Ceilings(0.5, []int{9, 1, -3}, c)
	if fmt.Sprint(c) != "[0.7 0.7 0.7]" {
		t.Errorf("ceilings %v", c)
	}
	for _, bad := range []string{`{"threshold": 0}`, `{"threshold": 1.5}`, `{"threshold": -1}`} {
		if _, err := ParseStatic(json.RawMessage(bad), nil); err == nil || !strings.Contains(err.Error(), "threshold") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func TestHoldbackCeilings(t *testing.T) {
	for _, tc := range []struct {
		params string
		prios  []int
		want   string
	}{
		{`{"minCeiling": 0.4, "maxCeiling": 0.9}`, []int{10, 5, 0}, "[0.9 0.65 0.4]"},
		{`{"minCeiling": 0.4, "maxCeiling": 0.9}`, []int{7}, "[0.9]"},
		{`{"minCeiling": 0, "domain": "value"}`, []int{100, 90, 0}, "[1 0.9 0]"},
		{`{"minCeiling": 0.2, "domain": "value"}`, []int{3, 3}, "[1 1]"},
	} {
		p, err := ParseHoldback(json.RawMessage(tc.params), nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.params, err)
		}
		c := make([]float64, len(tc.prios))
		p.Ceilings(0.5, tc.prios, c)
		for i := range c {
			c[i] = float64(int(c[i]*1000+0.5)) / 1000
		}
		if got := fmt.Sprint(c); got != tc.want {
			t.Errorf("%s over %v: %s, want %s", tc.params, tc.prios, got, tc.want)
		}
	}
}

func TestHoldbackParameterErrors(t *testing.T) {
	for params, field := range map[string]string{
		`{}`:                                     "minCeiling",
		`{"minCeiling": 1}`:                      "minCeiling",
		`{"minCeiling": 0.5, "maxCeiling": 0}`:   "maxCeiling",
		`{"minCeiling": 0.8, "maxCeiling": 0.5}`: "minCeiling",
		`{"minCeiling": 0.1, "shape": "cubic"}`:  "shape",
		`{"minCeiling": 0.1, "domain": "mass"}`:  "domain",
	} {
		if _, err := ParseHoldback(json.RawMessage(params), nil); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v, want an error naming %s", params, err, field)
		}
	}
}

func TestSoftReflectiveCeilings(t *testing.T) {
	p, err := ParseSoftReflective(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseSoftReflective(json.RawMessage(`{"x": 1}`)); err == nil {
		t.Error("parameters accepted")
	}
	c := make([]float64, 3)
	// saturation 0.2: ceilings 1, 0.9, 0.8, all above it: open
	p.Ceilings(0.2, []int{3, 2, 1}, c)
	if fmt.Sprint(c) != "[1 1 1]" {
		t.Errorf("light load: %v", c)
	}
	// saturation 0.75: ceilings 1, 0.625, 0.25: bands 1 and 2 gated, open
	// on one call in round(0.75/0.25) = 3, together
	opened := 0
	for range 300 {
		p.Ceilings(0.75, []int{3, 2, 1}, c)
		if c[0] != 1 || c[1] != c[2] {
			t.Fatalf("ceilings %v: band 0 open, the gated bands alike", c)
		}
		if c[1] == 1 {
			opened++
		}
	}
	if opened != 100 {
		t.Errorf("gated bands opened on %d of 300 calls, want 100", opened)
	}
	p.Ceilings(1, []int{3, 2, 1}, c)
	if c[1] != 0 || c[2] != 0 {
		t.Errorf("saturated: %v", c)
	}
	one := c[:1]
	p.Ceilings(0.9, []int{7}, one)
	if one[0] != 1 {
		t.Errorf("one band: %v", one)
	}
}

func TestProgramAwareParameters(t *testing.T) {
	p, err := ParseProgramAware(nil, nil)
	if err != nil || p.Strategy != "las" || p.LASWeightService != 0.8 || p.LASWeightHeadWait != 0.2 || p.LASDecayFactor != 0.99997 || p.EvictionTTLSeconds != 3600 {
		t.Fatalf("defaults %+v, %v", p, err)
	}
	for params, field := range map[string]string{
		`{"strategy": "wfq"}`:          "strategy",
		`{"lasDecayFactor": 0}`:        "lasDecayFactor",
		`{"lasDecayFactor": 1.5}`:      "lasDecayFactor",
		`{"evictionSweepSeconds": 0}`:  "evictionSweepSeconds",
		`{"lasWeightService": -1}`:     "lasWeightService",
		`{"lasHalfLifeSeconds": -5}`:   "lasHalfLifeSeconds",
		`{"evictionTtlSeconds": -0.5}`: "evictionTtlSeconds",
	} {
		if _, err := ParseProgramAware(json.RawMessage(params), nil); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v, want an error naming %s", params, err, field)
		}
	}
}
