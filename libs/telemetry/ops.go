package telemetry

import (
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// OpsHandler serves a service's operational endpoints: /metrics (the
// registry's metrics in the Prometheus exposition format), /health
// (liveness: 200 while the process serves HTTP) and /ready (readiness: 200
// when ready returns nil, otherwise 503; the error, which may name
// internal addresses, is logged, not answered: /ready is open to probes,
// and the gateway's is on its API address).
func OpsHandler(g prometheus.Gatherer, ready func() error) http.Handler {
	var last atomic.Value // the last reason logged, so a probe loop logs each once
	notReady := func(err error) {
		if msg := err.Error(); last.Swap(msg) != msg {
			slog.Warn("not ready", "reason", msg)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) {
		if ready != nil {
			if err := ready(); err != nil {
				notReady(err)
				http.Error(w, "not ready", http.StatusServiceUnavailable)
				return
			}
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	return mux
}

// NewRegistry returns a Prometheus registry with the Go runtime and
// process collectors, for a service's own metrics.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// RequireBearer guards an ops handler with a bearer token: /health and
// /ready stay open (the kubelet's probes carry no token), everything else
// (/metrics, /debug/...) answers 401 without "Authorization: Bearer
// <token>". An empty token guards nothing.
func RequireBearer(token string, h http.Handler) http.Handler {
	if token == "" {
		return h
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" || r.URL.Path == "/ready" {
			h.ServeHTTP(w, r)
			return
		}
		scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="hermod-ops"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
