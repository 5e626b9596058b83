package scheduling

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzParseConfig: ParseConfig never panics, and what it accepts has only
// JSON parameters.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		minimal,
		"config:\n  plugins: [{type: a}]\n",
		"config: |\n  plugins: [{type: a}]\n",
		"plugins:\n- type: a\n  parameters: &x {a: [1, 2.5, true, null, 0x10]}\n- type: b\n  parameters: {<<: *x, b: *x}\n",
		"schedulingProfiles: [{name: a, plugins: [{pluginRef: b, weight: 2}]}]\n",
		"data: {sources: [{pluginRef: s, extractors: [{pluginRef: e}]}]}\n",
		"featureGates: [prepareDataPlugins]\nsaturationDetector: {a: 1}\n",
		"featureGates: [flowControl=false, dataLayer]\nparser: {pluginRef: p}\nrequestHandler: {parsers: [{pluginRef: q}]}\n",
		"flowControl: {maxBytes: 10Gi, maxRequests: \"1k\", defaultRequestTTL: 60s, saturationDetector: {pluginRef: d}, priorityBands: [{priority: -1, maxRequests: 5}]}\n",
		"dataLayer: {injectDefaults: false, discovery: {pluginRef: file-discovery}}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data)
		if err != nil {
			return
		}
		for _, p := range cfg.Plugins {
			if p.Parameters != nil && !json.Valid(p.Parameters) {
				t.Fatalf("parameters of %s are not JSON: %q", p.Type, p.Parameters)
			}
		}
		// Written in the new layout, it reads back as itself, with nothing
		// deprecated left.
		doc, err := MarshalConfig(cfg)
		if err != nil {
			t.Fatalf("accepted config does not encode: %v", err)
		}
		again, err := ParseConfig(doc)
		if err != nil {
			t.Fatalf("the encoded config does not parse: %v\n%s", err, doc)
		}
		if len(again.Deprecations) > 0 {
			t.Fatalf("the encoded config is deprecated: %q\n%s", again.Deprecations, doc)
		}
		doc2, err := MarshalConfig(again)
		if err != nil || !bytes.Equal(doc, doc2) {
			t.Fatalf("the encoded config reads back differently (%v):\n%s\n---\n%s", err, doc, doc2)
		}
	})
}

// FuzzParseQuantity: no panic; what parses is non-negative and written
// with a number first.
func FuzzParseQuantity(f *testing.F) {
	for _, s := range []string{"0", "1000", "10Gi", "1k", "1.5M", "1500m", "1e3", "2E-2", "+5", "0.1Ki", "9223372036854775807", "8Ei"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := ParseQuantity(s)
		if err != nil {
			return
		}
		if q.Value < 0 || q.Text != s {
			t.Fatalf("%q: %+v", s, q)
		}
	})
}
