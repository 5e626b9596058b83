package coord

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
)

func TestEndpointSpec(t *testing.T) {
	t.Parallel()
	full := EndpointSpec{
		Name: "vm-1", Address: "10.1.2.3:8000", Model: "llama", ServedModels: []string{"sql-lora"},
		Labels:   map[string]string{"llm-d.ai/role": "decode"},
		KVEvents: "tcp://10.1.2.3:5557", KVEventsTopic: "kv@10.1.2.3@llama", KVReplay: "tcp://10.1.2.3:5558",
		DataParallelRank: 1,
	}
	tests := []struct {
		name   string
		spec   EndpointSpec
		want   *registryv1.Endpoint
		fields []string // the fields of the *SpecErrors, in order
	}{
		{
			name: "minimal: served models default to the model",
			spec: EndpointSpec{Name: "a", Address: "host.example:8000", Model: "m"},
			want: &registryv1.Endpoint{Name: "a", Pool: "p", Address: "host.example", Port: 8000, Model: "m", ServedModels: []string{"m"}},
		},
		{
			name: "every field; the model is put first in the served models",
			spec: full,
			want: &registryv1.Endpoint{
				Name: "vm-1", Pool: "p", Address: "10.1.2.3", Port: 8000, Model: "llama", ServedModels: []string{"llama", "sql-lora"},
				Labels:           map[string]string{"llm-d.ai/role": "decode"},
				KvEventsEndpoint: "tcp://10.1.2.3:5557", KvEventsTopic: "kv@10.1.2.3@llama", KvReplayEndpoint: "tcp://10.1.2.3:5558",
				DataParallelRank: 1,
			},
		},
		{
			name: "IPv6",
			spec: EndpointSpec{Name: "a", Address: "[fd00::1]:8000", Model: "m", ServedModels: []string{"x", "m"}, KVEvents: "tcp://[fd00::1]:5557"},
			want: &registryv1.Endpoint{Name: "a", Pool: "p", Address: "fd00::1", Port: 8000, Model: "m", ServedModels: []string{"x", "m"}, KvEventsEndpoint: "tcp://[fd00::1]:5557"},
		},
		{name: "empty", spec: EndpointSpec{}, fields: []string{"address", "model", "name"}},
		{name: "slash in name", spec: EndpointSpec{Name: "a/b", Address: "h:1", Model: "m"}, fields: []string{"name"}},
		{name: "no port", spec: EndpointSpec{Name: "a", Address: "h", Model: "m"}, fields: []string{"address"}},
		{name: "no host", spec: EndpointSpec{Name: "a", Address: ":8000", Model: "m"}, fields: []string{"address"}},
		{name: "port 0", spec: EndpointSpec{Name: "a", Address: "h:0", Model: "m"}, fields: []string{"address"}},
		{name: "port 65536", spec: EndpointSpec{Name: "a", Address: "h:65536", Model: "m"}, fields: []string{"address"}},
		{name: "blank model", spec: EndpointSpec{Name: "a", Address: "h:1", Model: " m"}, fields: []string{"model"}},
		{name: "empty served model", spec: EndpointSpec{Name: "a", Address: "h:1", Model: "m", ServedModels: []string{""}}, fields: []string{"served-models"}},
		{name: "empty label key", spec: EndpointSpec{Name: "a", Address: "h:1", Model: "m", Labels: map[string]string{"": "x"}}, fields: []string{"labels"}},
		{name: "kv events not tcp", spec: EndpointSpec{Name: "a", Address: "h:1", Model: "m", KVEvents: "ipc:///tmp/kv"}, fields: []string{"kv-events"}},
		{name: "kv replay without port", spec: EndpointSpec{Name: "a", Address: "h:1", Model: "m", KVReplay: "tcp://h"}, fields: []string{"kv-replay"}},
		{name: "negative rank", spec: EndpointSpec{Name: "a", Address: "h:1", Model: "m", DataParallelRank: -1}, fields: []string{"data-parallel-rank"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.spec.Endpoint("p")
			if len(tt.fields) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if !proto.Equal(got, tt.want) {
					t.Fatalf("got %v\nwant %v", got, tt.want)
				}
				return
			}
			if got != nil || err == nil {
				t.Fatalf("got %v, %v; want an error", got, err)
			}
			if f := specFields(err); strings.Join(f, ",") != strings.Join(tt.fields, ",") {
				t.Fatalf("error %q names fields %v, want %v", err, f, tt.fields)
			}
		})
	}
}

// The entry does not share the spec's slices and maps.
func TestEndpointSpecCopies(t *testing.T) {
	t.Parallel()
	spec := EndpointSpec{Name: "a", Address: "h:1", Model: "m", ServedModels: []string{"m", "x"}, Labels: map[string]string{"k": "v"}}
	ep, err := spec.Endpoint("p")
	if err != nil {
		t.Fatal(err)
	}
	spec.ServedModels[1], spec.Labels["k"] = "changed", "changed"
	if ep.GetServedModels()[1] != "x" || ep.GetLabels()["k"] != "v" {
		t.Fatalf("the entry shares the spec's memory: %v", ep)
	}
}

// Without the model requirement, the first served model stands for a
// missing base model, and without either both stay empty; the other
// checks are Endpoint's.
func TestEndpointSpecModelOptional(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		spec   EndpointSpec
		want   *registryv1.Endpoint
		fields []string
	}{
		{"no model", EndpointSpec{Name: "a", Address: "10.0.0.1:8000"},
			&registryv1.Endpoint{Name: "a", Pool: "p", Address: "10.0.0.1", Port: 8000}, nil},
		{"served models only", EndpointSpec{Name: "a", Address: "h:1", ServedModels: []string{"base", "lora"}},
			&registryv1.Endpoint{Name: "a", Pool: "p", Address: "h", Port: 1, Model: "base", ServedModels: []string{"base", "lora"}}, nil},
		{"a model", EndpointSpec{Name: "a", Address: "h:1", Model: "m"},
			&registryv1.Endpoint{Name: "a", Pool: "p", Address: "h", Port: 1, Model: "m", ServedModels: []string{"m"}}, nil},
		{"blank model", EndpointSpec{Name: "a", Address: "h:1", Model: " "}, nil, []string{"model"}},
		{"empty", EndpointSpec{}, nil, []string{"address", "name"}},
	} {
		got, err := tc.spec.EndpointModelOptional("p")
		switch {
		case tc.fields == nil && (err != nil || !proto.Equal(got, tc.want)):
			t.Errorf("%s: got %v, %v; want %v", tc.name, got, err, tc.want)
		case tc.fields != nil && (err == nil || strings.Join(specFields(err), ",") != strings.Join(tc.fields, ",")):
			t.Errorf("%s: error %v, want one naming %v", tc.name, err, tc.fields)
		}
	}
	if _, err := (EndpointSpec{Name: "a", Address: "h:1"}).Endpoint("p"); err == nil || !strings.Contains(err.Error(), "model: required") {
		t.Errorf("Endpoint without a model: %v", err)
	}
}

func TestEndpointSpecBadPool(t *testing.T) {
	t.Parallel()
	if _, err := (EndpointSpec{Name: "a", Address: "h:1", Model: "m"}).Endpoint("a/b"); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("got %v, want ErrInvalidName", err)
	}
}

// specFields returns the fields of the *SpecErrors joined in err.
func specFields(err error) []string {
	var out []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var se *SpecError
		if errors.As(e, &se) {
			out = append(out, se.Field)
		}
	}
	return out
}
