package coord

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
)

func TestKeyLayout(t *testing.T) {
	if got, want := EndpointsPrefix("pool-a"), "/hermod/pools/pool-a/endpoints/"; got != want {
		t.Errorf("EndpointsPrefix = %q, want %q", got, want)
	}
	if got, want := EndpointKey("pool-a", "pod-1"), "/hermod/pools/pool-a/endpoints/pod-1"; got != want {
		t.Errorf("EndpointKey = %q, want %q", got, want)
	}
}

func TestValidateNames(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pool    string
		ep      string
		wantErr bool
	}{
		{name: "valid", pool: "default", ep: "vllm-0"},
		{name: "dots and colons", pool: "p.1", ep: "10.0.0.5:8000"},
		{name: "empty pool", pool: "", ep: "vllm-0", wantErr: true},
		{name: "slash in pool", pool: "a/b", ep: "vllm-0", wantErr: true},
		{name: "empty endpoint", pool: "default", ep: "", wantErr: true},
		{name: "slash in endpoint", pool: "default", ep: "x/y", wantErr: true},
		{name: "lone slash", pool: "default", ep: "/", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := errors.Join(ValidatePoolName(tc.pool), ValidateEndpointName(tc.ep))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalidName) {
				t.Fatalf("err = %v, not ErrInvalidName", err)
			}
		})
	}
}

func TestParseEndpointKey(t *testing.T) {
	for _, tc := range []struct {
		key        string
		pool, name string
		wantErr    bool
	}{
		{key: "/hermod/pools/default/endpoints/vllm-0", pool: "default", name: "vllm-0"},
		{key: "/hermod/pools/default/endpoints/", wantErr: true},
		{key: "/hermod/pools/default/endpoints/a/b", wantErr: true},
		{key: "/hermod/pools//endpoints/a", wantErr: true},
		{key: "/hermod/pools/default/config", wantErr: true},
		{key: "/other/pools/default/endpoints/a", wantErr: true},
		{key: "", wantErr: true},
	} {
		t.Run(tc.key, func(t *testing.T) {
			pool, name, err := ParseEndpointKey(tc.key)
			if tc.wantErr {
				if !errors.Is(err, ErrInvalidName) {
					t.Fatalf("err = %v, want ErrInvalidName", err)
				}
				return
			}
			if err != nil || pool != tc.pool || name != tc.name {
				t.Fatalf("ParseEndpointKey = %q, %q, %v; want %q, %q", pool, name, err, tc.pool, tc.name)
			}
		})
	}
}

func testEndpoint(pool, name string) *registryv1.Endpoint {
	return &registryv1.Endpoint{
		Name:             name,
		Pool:             pool,
		Address:          "10.0.0.5",
		Port:             8000,
		Labels:           map[string]string{"app": "vllm", "role": "decode"},
		Model:            "meta-llama/Llama-3.1-8B-Instruct",
		ServedModels:     []string{"meta-llama/Llama-3.1-8B-Instruct", "sql-lora"},
		KvEventsEndpoint: "tcp://10.0.0.5:5557",
		KvReplayEndpoint: "tcp://10.0.0.5:5558",
		DataParallelRank: 1,
		KvEventsTopic:    "kv@10.0.0.5@meta-llama/Llama-3.1-8B-Instruct",
		RegisteredAt:     timestamppb.New(time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)),
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	ep := testEndpoint("default", "vllm-0")
	b, err := EncodeEndpoint(ep)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeEndpoint(EndpointKey("default", "vllm-0"), b)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, ep) {
		t.Fatalf("round trip: got %v, want %v", got, ep)
	}
}

func TestDecodeEndpointErrors(t *testing.T) {
	good, err := EncodeEndpoint(testEndpoint("default", "vllm-0"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		key   string
		value string
	}{
		{name: "not json", key: EndpointKey("default", "vllm-0"), value: "not json"},
		{name: "wrong type", key: EndpointKey("default", "vllm-0"), value: `{"port":"eighty"}`},
		{name: "empty value", key: EndpointKey("default", "vllm-0"), value: ""},
		{name: "name differs", key: EndpointKey("default", "vllm-1"), value: string(good)},
		{name: "pool differs", key: EndpointKey("other", "vllm-0"), value: string(good)},
		{name: "nested key", key: EndpointKey("default", "vllm-0/x"), value: string(good)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep, err := DecodeEndpoint(tc.key, []byte(tc.value))
			if ep != nil || !errors.Is(err, ErrMalformed) {
				t.Fatalf("DecodeEndpoint = %v, %v; want ErrMalformed", ep, err)
			}
			var ke KeyError
			if !errors.As(err, &ke) || ke.Key != tc.key {
				t.Fatalf("err %v is not a KeyError for %q", err, tc.key)
			}
		})
	}
}

func TestDecodeEndpointIgnoresUnknownFields(t *testing.T) {
	value := `{"name":"vllm-0","pool":"default","port":8000,"field_from_the_future":true}`
	ep, err := DecodeEndpoint(EndpointKey("default", "vllm-0"), []byte(value))
	if err != nil {
		t.Fatal(err)
	}
	if ep.GetPort() != 8000 {
		t.Fatalf("port = %d, want 8000", ep.GetPort())
	}
}

func FuzzDecodeEndpoint(f *testing.F) {
	good, err := EncodeEndpoint(testEndpoint("default", "vllm-0"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(EndpointKey("default", "vllm-0"), good)
	f.Add(EndpointKey("default", "vllm-0"), []byte(`{"name":"vllm-0","pool":"default"}`))
	f.Add("/hermod/pools/x/endpoints/a/b", []byte("{}"))
	f.Add("", []byte(nil))
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		ep, err := DecodeEndpoint(key, value)
		if err != nil {
			if ep != nil || !errors.Is(err, ErrMalformed) {
				t.Fatalf("DecodeEndpoint = %v, %v", ep, err)
			}
			return
		}
		// A decoded endpoint encodes and decodes to itself.
		b, err := EncodeEndpoint(ep)
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeEndpoint(key, b)
		if err != nil || !proto.Equal(ep, again) {
			t.Fatalf("re-decode = %v, %v; want %v", again, err, ep)
		}
	})
}
