package reservedheaders_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/hermod/hermod/libs/reservedheaders"
)

func TestIs(t *testing.T) {
	cases := []struct {
		name     string
		reserved bool
	}{
		{"x-gateway-destination-endpoint", true},
		{"X-Gateway-Destination-Endpoint", true},
		{"x-gateway-destination-endpoint-subset", true},
		{"x-gateway-destination-endpoint-served", true},
		{"Mif-Prefill-Endpoint", true},
		{"mif-encode-endpoints", true},
		{"mif-anything-new", true},
		{"x-decoder-host-port", true},
		{"X-Prefiller-Host-Port", true},
		{"x-prefiller-url", true},
		{"x-encoder-hosts-ports", true},
		{"x-data-parallel-host-port", true},
		{"x-llm-d-request-dropped-reason", true},
		// a client's own inputs
		{"x-session-token", false},
		{"x-request-id", false},
		{"x-gateway-inference-objective", false},
		{"x-gateway-inference-priority", false},
		{"x-gateway-inference-fairness-id", false},
		{"x-llm-d-slo-ttft-ms", false},
		{"x-slo-tpot-ms", false},
		{"authorization", false},
		{"content-type", false},
		{"mif", false},
	}
	for _, c := range cases {
		if got := reservedheaders.Is(c.name); got != c.reserved {
			t.Errorf("Is(%q) = %v, want %v", c.name, got, c.reserved)
		}
	}
}

func TestStrip(t *testing.T) {
	h := http.Header{}
	h.Set("Mif-Prefill-Endpoint", "10.0.0.9:8000")
	h.Set("X-Gateway-Destination-Endpoint", "10.0.0.9:8000")
	h.Set("X-Gateway-Destination-Endpoint-Subset", "10.0.0.9:8000")
	h.Set("X-Prefiller-Host-Port", "169.254.169.254:80")
	h.Set("X-Session-Token", "cG9kLTE=")
	h.Set("Content-Type", "application/json")
	reservedheaders.Strip(h)
	var left []string
	for k := range h {
		left = append(left, k)
	}
	slices.Sort(left)
	if want := []string{"Content-Type", "X-Session-Token"}; !slices.Equal(left, want) {
		t.Fatalf("left %v, want %v", left, want)
	}
}

func TestIn(t *testing.T) {
	got := reservedheaders.In(map[string]string{"mif-prefill-endpoint": "a", "x-gateway-destination-endpoint": "b", "x-request-id": "c", "MIF-X": "d"})
	if want := []string{"mif-prefill-endpoint", "mif-x", "x-gateway-destination-endpoint"}; !slices.Equal(got, want) {
		t.Fatalf("In = %v, want %v", got, want)
	}
	if got := reservedheaders.In(map[string]string{"x-request-id": "c"}); got != nil {
		t.Fatalf("In = %v, want nil", got)
	}
}

func TestUnseen(t *testing.T) {
	for _, name := range []string{"Authorization", "authorization", "X-Api-Key", "x-api-key", "Cookie", "Proxy-Authorization", "Content-Length", "Host"} {
		if !reservedheaders.Unseen(name) {
			t.Errorf("%s reaches the picker", name)
		}
	}
	for _, name := range []string{"x-session-token", "Anthropic-Version", "X-Request-Id", "x-api-key-id"} {
		if reservedheaders.Unseen(name) {
			t.Errorf("%s is kept from the picker", name)
		}
	}
}
