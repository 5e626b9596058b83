package telemetry

import (
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

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

// OpsTimeouts bound a client of an ops listener: it reads a request's
// headers within ReadHeader and the whole request within Read, gets its
// answer written within Write (a CPU profile of up to a minute fits) and
// keeps an idle connection for Idle. Header bytes are bounded by
// MaxHeaderBytes.
type OpsTimeouts struct {
	ReadHeader, Read, Write, Idle time.Duration
	MaxHeaderBytes                int
}

// DefaultOpsTimeouts are every service's ops listener's bounds.
var DefaultOpsTimeouts = OpsTimeouts{ReadHeader: 5 * time.Second, Read: 10 * time.Second, Write: 90 * time.Second, Idle: 2 * time.Minute, MaxHeaderBytes: 16 << 10}

// OpsServer is the HTTP server of a service's ops listener (h is
// OpsHandler's, guarded): a slow or idle client holds a connection for
// a bounded time only.
func OpsServer(h http.Handler) *http.Server { return DefaultOpsTimeouts.Server(h) }

// Server is an HTTP server serving h within t's bounds.
func (t OpsTimeouts) Server(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: t.ReadHeader, ReadTimeout: t.Read, WriteTimeout: t.Write, IdleTimeout: t.Idle, MaxHeaderBytes: t.MaxHeaderBytes}
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
