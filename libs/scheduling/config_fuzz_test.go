package scheduling

import (
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
	})
}
