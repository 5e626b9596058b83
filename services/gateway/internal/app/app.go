// Package app runs the gateway: the OpenAI-compatible front door of a pool.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/prometheus/client_golang/prometheus"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	responsesv1 "github.com/hermod/hermod/libs/api/hermod/responses/v1"
	"github.com/hermod/hermod/libs/bootstrap"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/libs/telemetry"
	"github.com/hermod/hermod/libs/tlsconfig"
	"github.com/hermod/hermod/services/gateway/internal/auth"
	"github.com/hermod/hermod/services/gateway/internal/concurrency"
	"github.com/hermod/hermod/services/gateway/internal/models"
	"github.com/hermod/hermod/services/gateway/internal/pickerclient"
	"github.com/hermod/hermod/services/gateway/internal/proxy"
	"github.com/hermod/hermod/services/gateway/internal/report"
	"github.com/hermod/hermod/services/gateway/internal/reqbody"
	"github.com/hermod/hermod/services/gateway/internal/responses"
)

// Config is the gateway's configuration (its flags).
type Config struct {
	// Config is the pool, the replica, etcd, NATS and tracing.
	bootstrap.Config
	Listen string
	// MetricsListen is the ops address (/metrics, /health, /ready);
	// empty: no ops listener.
	MetricsListen string
	// MetricsOnAPI also serves /metrics on the API address (off: only
	// /health and /ready are there, for probes and load balancers).
	MetricsOnAPI bool
	// BodyReadTimeout bounds the arrival of a request body.
	BodyReadTimeout time.Duration
	// FirstByteTimeout bounds the wait for a model server's answer to
	// begin (0: proxy.DefaultFirstByteTimeout).
	FirstByteTimeout time.Duration
	// MaxBufferedBodyBytes bounds the request-body bytes every request
	// holds at once (0: no bound).
	MaxBufferedBodyBytes int64
	// MaxInFlight bounds the API requests served at once; past it a
	// request gets 503 server_busy before its body is read (0: no bound).
	MaxInFlight int
	// APITLS serves the API over HTTPS (HTTP/2 and HTTP/1.1) when it names
	// a certificate and key; the files are read again when they change. A
	// CA file with ClientAuth asks clients for certificates.
	APITLS tlsconfig.Options
	// ForwardHeaders are the client headers for the gateway's hop
	// (Cookie, Proxy-*) that are forwarded to model servers anyway.
	ForwardHeaders []string
	PickerAddrs    []string
	APIKeysFile    string
	// TrustedProxies (addresses and CIDR prefixes, comma-separated) are
	// the proxies whose TenantHeader names a request's principal on a
	// gateway without API keys; empty: no one's (one principal).
	TrustedProxies string
	// TenantHeader renames the tenant header ("": auth.TenantHeader).
	TenantHeader string
	MaxBodyBytes int64
	MaxAttempts  int
	PickTimeout  time.Duration
	// PickAttemptTimeout bounds a Pick on one picker replica while others
	// remain (pickerclient.Options.AttemptTimeout).
	PickAttemptTimeout time.Duration
	// FlowControlFile, when set, is the flow-control configuration
	// (shedding, queueing by priority; flowcontrol.FileConfig).
	FlowControlFile string
	// ResponsesAddr is the responses service (gRPC host:port) behind
	// /v1/responses; empty answers those requests 503.
	ResponsesAddr string
	// MaxChain bounds a Responses API conversation (responses).
	MaxChain int
	// Ready, when set, is called with the listen address once the gateway
	// serves (tests).
	Ready func(addr string)
}

// Default addresses: loopback, so that a gateway started by hand serves
// nobody else; a deployment passes the pod's address (the Helm chart
// does).
const (
	DefaultListen        = "127.0.0.1:8080"
	DefaultMetricsListen = "127.0.0.1:9092"
)

// DefaultPublishQueue is the gateway's --publish-queue: it publishes two
// events per request (the decision a picker handed over, and the
// completion), and holds them while NATS is away: 64 Ki events are about
// 30 s of an outage at 1000 requests/s, some 60 MB with decisions over 10
// endpoints (about 1.5 KB each; 8.5 KB over 100).
const DefaultPublishQueue = 1 << 16

// Run runs the gateway until ctx ends.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	svc, err := bootstrap.Start(ctx, bootstrap.Options{Name: "hermod-gateway", Config: cfg.Config, Logger: log})
	if err != nil {
		return err
	}
	defer svc.Close()
	cfg.Replica = svc.Replica
	g := &gateway{cfg: cfg, svc: svc, log: svc.Log, reg: svc.Registry}
	proxies, err := auth.ParseTrustedProxies(cfg.TrustedProxies)
	if err != nil {
		return fmt.Errorf("--trusted-proxies: %w", err)
	}
	trust := auth.TenantTrust{Header: cfg.TenantHeader, Proxies: proxies}
	if cfg.APIKeysFile == "" && len(proxies) == 0 {
		g.log.Info("no API keys and no trusted proxies: every request acts for one anonymous principal (stored responses and conversations are shared)")
	}
	var guard *auth.Guard
	if cfg.APIKeysFile != "" {
		keys, err := auth.LoadKeys(cfg.APIKeysFile)
		if err != nil {
			return err
		}
		guard = auth.NewGuard(keys, g.reg)
		g.log.Info("API keys required", "keys", len(keys))
	}
	h, err := g.requestPath(ctx)
	if err != nil {
		return err
	}
	var store responsesv1.ResponsesStoreClient
	if cfg.ResponsesAddr != "" {
		conn, err := grpc.NewClient(cfg.ResponsesAddr, svc.GRPCDialOptions()...)
		if err != nil {
			return fmt.Errorf("--responses-address: %w", err)
		}
		svc.OnClose(func() { _ = conn.Close() })
		store = responsesv1.NewResponsesStoreClient(conn)
	}
	rh := responses.New(responses.Options{Store: store, Chat: h.Completions(openai.APIChatCompletions), MaxChain: cfg.MaxChain,
		MaxBodyBytes: cfg.MaxBodyBytes, Logger: g.log, Registerer: g.reg})
	g.log.Info("gateway routing", "pickers", cfg.PickerAddrs)
	ops := svc.Ops(telemetry.OpsHandler(g.reg, g.ready)) // the ops token, if any, guards /metrics
	// requests in flight, streams included, may finish for a while
	api := apiServer(routes(h, rh, g.models, guard, trust, g.inFlightLimit(), ops, cfg.MetricsOnAPI), cfg.BodyReadTimeout, g.bodyBudget())
	if err := g.serveTLS(api); err != nil {
		return err
	}
	servers := []bootstrap.Server{{Name: "api", Addr: cfg.Listen, HTTP: api, Grace: 30 * time.Second}}
	if cfg.MetricsListen != "" {
		servers = append(servers, bootstrap.Server{Name: "ops", Addr: cfg.MetricsListen, HTTP: telemetry.OpsServer(ops)})
	}
	return svc.Serve(ctx, bootstrap.Run{
		Servers: servers,
		OnReady: func(addrs map[string]string) {
			if cfg.Ready != nil {
				cfg.Ready(addrs["api"])
			}
		},
	})
}

// gateway is a running gateway's state.
type gateway struct {
	cfg Config
	svc *bootstrap.Service
	log *slog.Logger
	reg *prometheus.Registry

	picker       *pickerclient.Client
	models       *models.List
	modelsListed atomic.Bool
}

// ready: the endpoints are listed and a picker answers.
func (g *gateway) ready() error {
	if !g.modelsListed.Load() {
		return errors.New("endpoints not listed yet")
	}
	return g.picker.Ready()
}

// requestPath connects what the completions path needs (the pickers, the
// completion reporter, flow control, the endpoint list) and returns it.
func (g *gateway) requestPath(ctx context.Context) (*proxy.Handler, error) {
	cfg, svc := g.cfg, g.svc
	etcd, err := svc.Etcd(ctx)
	if err != nil {
		return nil, err
	}
	nc, err := svc.NATS(ctx)
	if err != nil {
		return nil, err
	}
	publisher, err := svc.Publisher(nc, "decision and completion events")
	if err != nil {
		return nil, err
	}
	g.picker, err = pickerclient.New(cfg.PickerAddrs, pickerclient.Options{PickTimeout: cfg.PickTimeout, AttemptTimeout: cfg.PickAttemptTimeout,
		DialOptions: svc.GRPCDialOptions(), Logger: g.log, Metrics: g.reg})
	if err != nil {
		return nil, err
	}
	svc.OnClose(func() { _ = g.picker.Close() })
	completions, err := bus.CompletionsSubject(cfg.Pool)
	if err != nil {
		return nil, err
	}
	decisions, err := bus.DecisionsSubject(cfg.Pool)
	if err != nil {
		return nil, err
	}
	reporter := report.New(report.Options{Publisher: publisher, Subject: completions, DecisionSubject: decisions,
		Completer: g.picker, Logger: g.log, Metrics: g.reg})
	svc.OnClose(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		reporter.Close(cctx)
	})
	var flow *proxy.Flow
	if cfg.FlowControlFile != "" {
		f, stop, err := startFlowControl(ctx, cfg, nc, g.reg, g.log)
		if err != nil {
			return nil, err
		}
		svc.OnClose(stop)
		flow = f
	}
	g.models = models.New()
	w, err := coord.WatchEndpoints(ctx, etcd, cfg.Pool, func(s coord.Snapshot) {
		g.models.Update(s)
		g.modelsListed.Store(true)
		if flow != nil && flow.Retain != nil {
			names := make(map[string]bool, len(s.Endpoints))
			for name := range s.Endpoints {
				names[name] = true
			}
			flow.Retain(names)
		}
	}, coord.WithLogger(g.log))
	if err != nil {
		return nil, err
	}
	svc.OnClose(w.Close)
	return proxy.New(proxy.Options{Pool: cfg.Pool, Replica: cfg.Replica, Picker: g.picker, Reporter: reporter, Transport: proxy.NewTransport(telemetry.Tracing(), cfg.FirstByteTimeout),
		MaxBodyBytes: cfg.MaxBodyBytes, BodyReadTimeout: cfg.BodyReadTimeout, MaxAttempts: cfg.MaxAttempts, ForwardHeaders: cfg.ForwardHeaders,
		Flow: flow, Logger: g.log, Metrics: proxy.NewMetrics(g.reg)}), nil
}

// apiServer is the server of the API address: every request body is
// read under one deadline, bodyTimeout from the request's arrival
// (reqbody.Bound).
func apiServer(h http.Handler, bodyTimeout time.Duration, budget *reqbody.Budget) *http.Server {
	return &http.Server{Handler: reqbody.Bound(h, bodyTimeout, budget), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
}

// serveTLS makes the API server HTTPS when a certificate is configured.
func (g *gateway) serveTLS(api *http.Server) error {
	o := g.cfg.APITLS
	if o.CertFile == "" && o.KeyFile == "" {
		if o.CAFile != "" || (o.ClientAuth != "" && o.ClientAuth != tlsconfig.ClientAuthNone) {
			return errors.New("--api-tls-ca-file and --api-tls-client-auth need --api-tls-cert-file and --api-tls-key-file")
		}
		return nil
	}
	o.Name, o.Logger, o.Registerer = "api", g.log, g.reg
	src, err := tlsconfig.New(o)
	if err != nil {
		return fmt.Errorf("api tls: %w", err)
	}
	g.svc.OnClose(src.Close)
	if api.TLSConfig, err = src.HTTPServerConfig(); err != nil {
		return fmt.Errorf("api tls: %w", err)
	}
	g.log.Info("the API is served over HTTPS", "cert_file", o.CertFile, "client_auth", string(src.ClientAuth()))
	return nil
}

// bodyBudget is the API server's budget of buffered request bytes, with
// its gauge.
func (g *gateway) bodyBudget() *reqbody.Budget {
	b := reqbody.NewBudget(g.cfg.MaxBufferedBodyBytes)
	g.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "hermod_gateway_buffered_body_bytes",
		Help: "Request-body bytes the gateway's requests hold now (bounded by --max-buffered-body-bytes; past it a request gets 503 server_busy)."},
		func() float64 { return float64(b.Used()) }))
	return b
}

// inFlightLimit is the API's bound on requests served at once, with its
// gauge and counter.
func (g *gateway) inFlightLimit() *concurrency.Limiter {
	l := concurrency.New(g.cfg.MaxInFlight)
	g.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "hermod_gateway_api_requests_in_flight",
		Help: "API requests the gateway serves now (bounded by --max-in-flight; past it a request gets 503 server_busy)."},
		func() float64 { return float64(l.InFlight()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "hermod_gateway_api_requests_shed_total",
			Help: "API requests refused 503 server_busy because --max-in-flight were being served."},
			func() float64 { return float64(l.Shed()) }))
	return l
}

// servedPaths are the API paths the gateway serves (with some methods).
var servedPaths = func() map[string]bool {
	m := map[string]bool{
		"/v1/completions": true, "/v1/chat/completions": true, "/v1/messages": true, "/v1/messages/count_tokens": true,
		"/v1/models": true, "/v1/responses": true, "/v1/conversations": true, "/inference/v1/generate": true,
	}
	for _, path := range openai.PassthroughPaths {
		m[path] = true
	}
	return m
}()

// notServed answers a request the API routes do not take: 405 on a path
// served with other methods, else 404; in Anthropic's shape under
// /v1/messages.
func notServed(w http.ResponseWriter, r *http.Request) {
	e := &openai.Error{Status: http.StatusNotFound, Type: openai.TypeNotFound, Code: "unknown_url",
		Message: "Unknown request URL: " + r.Method + " " + r.URL.Path, Anthropic: openai.AnthropicPath(r.URL.Path)}
	if servedPaths[r.URL.Path] {
		e.Status, e.Type, e.Code, e.Message = http.StatusMethodNotAllowed, openai.TypeInvalidRequest, "method_not_allowed", r.Method+" is not allowed on "+r.URL.Path
	}
	e.Write(w)
}

// routes is the gateway's HTTP surface on the API address: the OpenAI
// API, Anthropic's Messages API, vLLM's /inference/v1/generate and its
// other endpoints (openai.PassthroughPaths), /health and /ready; the rest of ops (/metrics) only with
// metricsOnAPI.
func routes(h *proxy.Handler, rh *responses.Handler, list *models.List, guard *auth.Guard, trust auth.TenantTrust, limit *concurrency.Limiter, ops http.Handler, metricsOnAPI bool) http.Handler {
	api := http.NewServeMux()
	rh.Register(api)
	api.Handle("POST /v1/completions", h.Completions(openai.APICompletions))
	api.Handle("POST /v1/chat/completions", h.Completions(openai.APIChatCompletions))
	api.Handle("POST /v1/messages", h.Completions(openai.APIMessages))
	api.Handle("POST /v1/messages/count_tokens", h.Completions(openai.APIMessagesCountTokens))
	api.Handle("POST /inference/v1/generate", h.Completions(openai.APIGenerate))
	for _, path := range openai.PassthroughPaths {
		api.Handle("POST "+path, h.Completions(openai.APIPassthrough))
		if !strings.HasPrefix(path, "/v1/") {
			api.HandleFunc(path, notServed) // under /v1/, its fallback answers
		}
	}
	api.Handle("GET /v1/models", list)
	api.HandleFunc("GET /v1/models/{model...}", list.ServeModel)
	api.HandleFunc("/v1/", notServed)
	api.HandleFunc("/inference/", notServed)
	// who a request acts for: its API key, else a trusted proxy's tenant
	// header; a background run acts for its response's owner
	v1 := auth.Tenants(trust, api)
	if guard != nil {
		v1 = guard.Wrap(api)
	}
	v1 = rh.AuthenticateRuns(v1, api)
	if telemetry.Tracing() {
		v1 = otelhttp.NewHandler(v1, "gateway", otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			return r.Method + " " + r.URL.Path
		}))
	}
	v1 = limit.Wrap(v1) // probes on the API address are not counted
	mux := http.NewServeMux()
	mux.Handle("/v1/", proxy.RequestIDs(v1))
	mux.Handle("/inference/", proxy.RequestIDs(v1))
	for _, path := range openai.PassthroughPaths {
		if !strings.HasPrefix(path, "/v1/") {
			mux.Handle(path, proxy.RequestIDs(v1))
		}
	}
	if metricsOnAPI {
		mux.Handle("/", ops)
	} else {
		mux.Handle("GET /health", ops)
		mux.Handle("GET /ready", ops)
	}
	return mux
}
