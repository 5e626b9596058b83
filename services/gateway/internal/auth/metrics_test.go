package auth

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A scrape names no API key: rate-limited requests are counted by the
// key's label, a hash of its name.
func TestMetricsNameNoKey(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := NewGuard([]Key{{Name: "team-secret-project", Secret: "sk-x", RPS: 0.001, Burst: 1}}, reg)
	h := g.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for range 2 {
		r := httptest.NewRequest(http.MethodPost, "/v1/completions", nil)
		r.Header.Set("Authorization", "Bearer sk-x")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	if got := testutil.ToFloat64(g.limited.WithLabelValues(KeyLabel("team-secret-project"))); got != 1 {
		t.Fatalf("rate-limited count under the key's label = %v, want 1", got)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), "team-secret-project") || strings.Contains(l.GetValue(), "sk-x") {
					t.Errorf("%s{%s=%q} names the key", mf.GetName(), l.GetName(), l.GetValue())
				}
			}
		}
	}
	if l := KeyLabel("team-secret-project"); len(l) != 8 || strings.Trim(l, "0123456789abcdef") != "" {
		t.Errorf("KeyLabel = %q, want 8 hex digits", l)
	}
}
