package cli

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/coord"
)

// The flags and arguments of endpoints register become a registry entry
// through coord.EndpointSpec; its errors name the flag or argument at
// fault, one a line.
func TestSpecEndpoint(t *testing.T) {
	good := coord.EndpointSpec{Name: "vm-a", Address: "10.0.0.5:8000", Model: "llama"}
	with := func(f func(*coord.EndpointSpec)) coord.EndpointSpec {
		s := good
		f(&s)
		return s
	}
	for _, tc := range []struct {
		name   string
		spec   coord.EndpointSpec
		labels []string
		want   *registryv1.Endpoint
		errs   []string // the lines of the error, in order
	}{
		{
			name: "defaults",
			spec: good,
			want: &registryv1.Endpoint{Name: "vm-a", Pool: "p", Address: "10.0.0.5", Port: 8000, Model: "llama", ServedModels: []string{"llama"}},
		},
		{
			name: "every flag",
			spec: with(func(s *coord.EndpointSpec) {
				s.ServedModels = []string{"llama", "sql-lora"}
				s.KVEvents, s.KVReplay, s.DataParallelRank = "tcp://10.0.0.5:5557", "tcp://10.0.0.5:5558", 3
			}),
			labels: []string{"mif.moreh.io/role=decode", "zone=a", "empty="},
			want: &registryv1.Endpoint{
				Name: "vm-a", Pool: "p", Address: "10.0.0.5", Port: 8000, Model: "llama", ServedModels: []string{"llama", "sql-lora"},
				Labels:           map[string]string{"mif.moreh.io/role": "decode", "zone": "a", "empty": ""},
				KvEventsEndpoint: "tcp://10.0.0.5:5557", KvReplayEndpoint: "tcp://10.0.0.5:5558", DataParallelRank: 3,
			},
		},
		{
			name: "the model added to served-models",
			spec: with(func(s *coord.EndpointSpec) { s.ServedModels = []string{"sql-lora"} }),
			want: &registryv1.Endpoint{Name: "vm-a", Pool: "p", Address: "10.0.0.5", Port: 8000, Model: "llama", ServedModels: []string{"llama", "sql-lora"}},
		},
		{name: "no model", spec: with(func(s *coord.EndpointSpec) { s.Model = "" }), errs: []string{"--model: required"}},
		{name: "a name with a slash", spec: with(func(s *coord.EndpointSpec) { s.Name = "a/b" }), errs: []string{"NAME: "}},
		{name: "no port", spec: with(func(s *coord.EndpointSpec) { s.Address = "10.0.0.6" }), errs: []string{`HOST:PORT: "10.0.0.6" is not host:port`}},
		{name: "no host", spec: with(func(s *coord.EndpointSpec) { s.Address = ":8000" }), errs: []string{`HOST:PORT: ":8000" has no host`}},
		{name: "port 0", spec: with(func(s *coord.EndpointSpec) { s.Address = "h:0" }), errs: []string{"HOST:PORT: \"h:0\": the port must be 1 to 65535"}},
		{name: "a label without =", spec: good, labels: []string{"novalue"}, errs: []string{`--labels: "novalue" is not key=value`}},
		{name: "a label without a key", spec: good, labels: []string{"=v"}, errs: []string{`--labels: "" is not a label key`}},
		{name: "kv-events not tcp://", spec: with(func(s *coord.EndpointSpec) { s.KVEvents = "10.0.0.6:1" }), errs: []string{`--kv-events: "10.0.0.6:1" is not tcp://host:port`}},
		{name: "kv-replay without a port", spec: with(func(s *coord.EndpointSpec) { s.KVReplay = "tcp://10.0.0.6" }), errs: []string{`--kv-replay: "tcp://10.0.0.6" is not tcp://host:port`}},
		{name: "a negative rank", spec: with(func(s *coord.EndpointSpec) { s.DataParallelRank = -1 }), errs: []string{"--data-parallel-rank: -1 is not a rank"}},
		{
			name: "several at once",
			spec: coord.EndpointSpec{Name: "a/b", Address: ":1", KVEvents: "udp://h:1"},
			// in the order of coord.EndpointSpec's field names: address, kv-events, model, name
			errs: []string{`HOST:PORT: ":1" has no host`, `--kv-events: "udp://h:1"`, "--model: required", "NAME: "},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep, err := specEndpoint(tc.spec, tc.labels, "p")
			if tc.errs == nil {
				if err != nil || !proto.Equal(ep, tc.want) {
					t.Fatalf("got %v, %v; want %v", ep, err, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("got %v, want errors %q", ep, tc.errs)
			}
			lines := strings.Split(err.Error(), "\n")
			if !slices.EqualFunc(lines, tc.errs, strings.HasPrefix) {
				t.Fatalf("errors:\n%s\nwant lines starting with %q", err, tc.errs)
			}
		})
	}
}
