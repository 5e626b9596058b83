package bench

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/hermod/hermod/tools/devstack/stackstate"
)

// The peer runs the config unchanged but for the file discovery the
// bench adds; a config with a discovery of its own is refused.
func TestPeerConfig(t *testing.T) {
	cfg := `apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: queue-scorer
- type: prefix-cache-scorer
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: queue-scorer
    weight: 2
`
	out, err := PeerConfig(cfg, "/tmp/run/epp-endpoints.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		APIVersion string `yaml:"apiVersion"`
		Plugins    []struct {
			Name, Type string
			Parameters map[string]any
		}
		SchedulingProfiles []struct {
			Name    string
			Plugins []struct {
				PluginRef string `yaml:"pluginRef"`
				Weight    int
			}
		} `yaml:"schedulingProfiles"`
		DataLayer struct {
			Discovery struct {
				PluginRef string `yaml:"pluginRef"`
			}
		} `yaml:"dataLayer"`
	}
	if err := yaml.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	last := doc.Plugins[len(doc.Plugins)-1]
	if doc.APIVersion != "llm-d.ai/v1alpha1" || len(doc.Plugins) != 3 || doc.Plugins[0].Type != "queue-scorer" ||
		last.Type != "file-discovery" || last.Parameters["path"] != "/tmp/run/epp-endpoints.yaml" || doc.DataLayer.Discovery.PluginRef != last.Name ||
		len(doc.SchedulingProfiles) != 1 || doc.SchedulingProfiles[0].Plugins[0].Weight != 2 {
		t.Fatalf("peer config:\n%s", out)
	}
	if _, err := PeerConfig(cfg+"dataLayer:\n  discovery:\n    pluginRef: mine\n", "x"); err == nil || !strings.Contains(err.Error(), "discovery") {
		t.Fatalf("a config with its own discovery: %v", err)
	}
	if _, err := PeerConfig("", "x"); err == nil {
		t.Fatal("an empty config passed")
	}
}

// The endpoints file lists the stack's pods as file-discovery reads them.
func TestEPPEndpoints(t *testing.T) {
	st := &stack{state: stackstate.State{Pods: []stackstate.Pod{{Name: "vllm-sim-0", Address: "127.0.0.1:21000"}, {Name: "vllm-sim-1", Address: "127.0.0.1:21001"}}}}
	var doc struct {
		Endpoints []struct{ Name, Address, Port string }
	}
	if err := yaml.Unmarshal(eppEndpoints(st), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Endpoints) != 2 || doc.Endpoints[1].Name != "vllm-sim-1" || doc.Endpoints[1].Address != "127.0.0.1" || doc.Endpoints[1].Port != "21001" {
		t.Fatalf("endpoints %+v", doc.Endpoints)
	}
}
