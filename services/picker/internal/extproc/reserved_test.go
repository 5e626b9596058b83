package extproc

import (
	"slices"
	"testing"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// clientReserved are routing headers only Hermod sets, as a client may
// send them.
var clientReserved = []string{
	"mif-prefill-endpoint", "169.254.169.254:80",
	"mif-encode-endpoints", "10.6.6.6:1",
	"x-gateway-destination-endpoint", "10.6.6.6:1",
	"x-gateway-destination-endpoint-served", "10.6.6.6:1",
	"x-gateway-destination-endpoint-subset", "10.0.0.1:8000,10.0.0.2:8000",
	"x-decoder-host-port", "10.6.6.6:1",
	"x-prefiller-host-port", "169.254.169.254:80",
	"x-data-parallel-host-port", "10.6.6.6:1",
}

func reservedNames() []string {
	var out []string
	for i := 0; i < len(clientReserved); i += 2 {
		out = append(out, clientReserved[i])
	}
	return out
}

// Every way through the ext_proc server removes the client's copies of
// every reserved routing header (header mutations), and the picker's
// plugins never see them: routed in FULL_DUPLEX_STREAMED and BUFFERED
// mode, and passed through.
func TestClientReservedHeadersAreRemoved(t *testing.T) {
	cases := []struct {
		name string
		pc   *extprocv3.ProtocolConfiguration
		path string
	}{
		{"full duplex", fullDuplex, "/v1/chat/completions"},
		{"buffered", protocol(filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_BUFFERED), "/v1/completions"},
		{"passthrough", fullDuplex, "/v1/embeddings"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newTestEnv(t, nil)
			s := e.open()
			s.send(post(c.pc, c.path, clientReserved...))
			body := []byte(`{"model":"llama","prompt":"hi"}`)
			if c.path == "/v1/chat/completions" {
				body = []byte(chatBody)
			}
			var removed []string
			if c.pc != fullDuplex { // answered at once
				_, r := setOf(s.recv().GetRequestHeaders().GetResponse().GetHeaderMutation())
				removed = append(removed, r...)
			}
			s.send(requestBody(body, true))
			if c.pc == fullDuplex {
				_, r := setOf(s.recv().GetRequestHeaders().GetResponse().GetHeaderMutation())
				removed = append(removed, r...)
				if got, _ := s.readBody(true, 0, true); string(got) != string(body) {
					t.Errorf("body %q", got)
				}
			} else {
				_, r := setOf(s.recv().GetRequestBody().GetResponse().GetHeaderMutation())
				removed = append(removed, r...)
			}
			for _, name := range reservedNames() {
				if !slices.Contains(removed, name) {
					t.Errorf("the client's %s is not removed (removed %v)", name, removed)
				}
			}
			for _, req := range e.picker.requests() {
				for _, name := range reservedNames() {
					if v, ok := req.GetHeaders()[name]; ok {
						t.Errorf("the picker's plugins see the client's %s: %q", name, v)
					}
				}
			}
			s.close()
		})
	}
}
