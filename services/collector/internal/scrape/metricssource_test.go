package scrape

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
)

// SetMetricsSource moves every endpoint's scrapes to the source's scheme
// and path (https with a self-signed certificate too); the zero source
// brings back http://<endpoint>/metrics.
func TestSetMetricsSource(t *testing.T) {
	p := newPod(t, vllmBody(1, 4, 0.5, 100))
	p.mux.HandleFunc("GET /engine/metrics", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(vllmBody(1, 7, 0.5, 100)))
	})
	tlsSrv := httptest.NewTLSServer(p.mux)
	t.Cleanup(tlsSrv.Close)
	h := newHarness(t, Config{})
	h.s.SetEndpoints([]*registryv1.Endpoint{p.endpoint("pool-a", "pod-0")})
	h.rec.waitFor(t, "pod-0", "the default scrape", func(m *eventsv1.PodMetrics) bool { return m.GetWaitingRequests() == 4 })

	h.s.SetMetricsSource(MetricsSource{Path: "/engine/metrics"})
	h.rec.waitFor(t, "pod-0", "the configured path", func(m *eventsv1.PodMetrics) bool { return m.GetWaitingRequests() == 7 })

	// the same mux behind TLS, as another endpoint
	addr := tlsSrv.Listener.Addr().(*net.TCPAddr)
	tlsEndpoint := &registryv1.Endpoint{Pool: "pool-a", Name: "pod-tls", Address: addr.IP.String(), Port: int32(addr.Port)}
	h.s.SetMetricsSource(MetricsSource{Scheme: "https", Path: "/engine/metrics", InsecureSkipVerify: false})
	h.s.SetEndpoints([]*registryv1.Endpoint{tlsEndpoint})
	h.rec.waitFor(t, "pod-tls", "a certificate that does not verify", func(m *eventsv1.PodMetrics) bool {
		return strings.Contains(m.GetError(), "certificate")
	})
	h.s.SetMetricsSource(MetricsSource{Scheme: "https", Path: "/engine/metrics", InsecureSkipVerify: true})
	h.rec.waitFor(t, "pod-tls", "https without verification", func(m *eventsv1.PodMetrics) bool {
		return m.GetError() == "" && m.GetWaitingRequests() == 7
	})

	h.s.SetMetricsSource(MetricsSource{})
	h.s.SetEndpoints([]*registryv1.Endpoint{p.endpoint("pool-a", "pod-1")})
	h.rec.waitFor(t, "pod-1", "the default again", func(m *eventsv1.PodMetrics) bool { return m.GetWaitingRequests() == 4 })
}
