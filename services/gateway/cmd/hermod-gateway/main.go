// Command hermod-gateway is Hermod's OpenAI-compatible front door: it asks
// the picker where each request goes, proxies it (streams pass through),
// falls back to other endpoints before the first byte, and reports every
// request's completion.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/hermod/hermod/libs/bootstrap"
	"github.com/hermod/hermod/libs/cmdline"
	"github.com/hermod/hermod/libs/tlsconfig"
	"github.com/hermod/hermod/services/gateway/internal/app"
	"github.com/hermod/hermod/services/gateway/internal/auth"
	"github.com/hermod/hermod/services/gateway/internal/pickerclient"
	"github.com/hermod/hermod/services/gateway/internal/proxy"
)

func main() { cmdline.Main("hermod-gateway", run) }

func run() error {
	var cfg app.Config
	var pickers, forward cmdline.List
	cmd := bootstrap.NewCommand("hermod-gateway", &cfg.Config, bootstrap.Flags{Pool: "the inference pool this gateway serves", NoStreams: true, PublishQueue: app.DefaultPublishQueue})
	fs := cmd.FlagSet
	fs.StringVar(&cfg.Listen, "listen", app.DefaultListen, "HTTP address of the OpenAI API (and /health, /ready); a deployment gives the pod's address, e.g. 0.0.0.0:8080")
	fs.StringVar(&cfg.MetricsListen, "metrics-listen", app.DefaultMetricsListen, "HTTP address of /metrics, /health and /ready; empty: none")
	fs.BoolVar(&cfg.MetricsOnAPI, "metrics-on-api", false, "also serve /metrics on the API address (--listen), where API clients reach it")
	fs.DurationVar(&cfg.FirstByteTimeout, "first-byte-timeout", proxy.DefaultFirstByteTimeout, "longest wait for a model server's answer to begin (its response headers; a non-streamed generation answers at its end); past it the next endpoint the picker chose is tried, and the client gets 502 when none answers")
	fs.DurationVar(&cfg.BodyReadTimeout, "body-read-timeout", proxy.DefaultBodyReadTimeout, "deadline of a request body's arrival, from the request's; a slower body gets 408 and its connection is closed")
	fs.Var(&forward, "forward-headers", "client headers for the gateway's hop to forward to model servers anyway (Cookie, Proxy-*), comma-separated; routing headers only Hermod sets are never forwarded")
	fs.Var(&pickers, "picker-addrs", "picker replicas (host:port), comma-separated (default 127.0.0.1:9002)")
	fs.StringVar(&cfg.ResponsesAddr, "responses-address", "", "the responses service (gRPC host:port) behind /v1/responses; empty: those requests get 503")
	fs.IntVar(&cfg.MaxChain, "max-conversation", 100, "most responses a /v1/responses conversation may chain (previous_response_id); longer gets 400")
	fs.StringVar(&cfg.FlowControlFile, "flow-control", "", "flow-control file (YAML): queueing, maxConcurrency, defaultRequestTTL, maxQueued, objectives (x-gateway-inference-objective -> priority), bandShares, saturation thresholds; or an EndpointPickerConfig with featureGates [flowControl], whose flowControl section is applied; empty: every request goes straight to the picker")
	fs.StringVar(&cfg.APIKeysFile, "api-keys-file", "", "file of API keys (`name secret [rps [burst]]` per line); empty: no keys required")
	fs.StringVar(&cfg.TrustedProxies, "trusted-proxies", "", "without API keys: the proxies (addresses and CIDR prefixes, comma-separated) whose tenant header names who a request acts for (the owner of its stored responses); empty: the header is ignored and every request is one anonymous principal")
	fs.StringVar(&cfg.TenantHeader, "tenant-header", auth.TenantHeader, "the header a trusted proxy names the tenant in (with --trusted-proxies)")
	fs.Int64Var(&cfg.MaxBodyBytes, "max-body-bytes", proxy.DefaultMaxBodyBytes, "largest request body accepted")
	fs.StringVar(&cfg.APITLS.CertFile, "api-tls-cert-file", "", "serve the API over HTTPS (HTTP/2 and HTTP/1.1) with this PEM certificate (chain); read again when it changes")
	fs.StringVar(&cfg.APITLS.KeyFile, "api-tls-key-file", "", "the key of --api-tls-cert-file")
	fs.StringVar(&cfg.APITLS.CAFile, "api-tls-ca-file", "", "PEM CA bundle that client certificates are verified with (with --api-tls-client-auth)")
	fs.Func("api-tls-client-auth", "client certificates on the API: none, optional or require (default none)", func(v string) error {
		mode, err := tlsconfig.ParseClientAuth(v)
		cfg.APITLS.ClientAuth = mode
		return err
	})
	fs.IntVar(&cfg.MaxInFlight, "max-in-flight", 10000, "most API requests served at once, streams included; a request past it gets 503 server_busy before its body is read (size it to the memory and file descriptors the gateway has); 0: no bound")
	fs.Int64Var(&cfg.MaxBufferedBodyBytes, "max-buffered-body-bytes", 1<<30, "most request-body bytes all requests hold at once (memory bounded whatever the number of connections); a request past it gets 503 server_busy; 0: no bound")
	fs.IntVar(&cfg.MaxAttempts, "max-attempts", proxy.DefaultMaxAttempts, "endpoints tried per request (the picked one and its fallbacks)")
	fs.DurationVar(&cfg.PickTimeout, "pick-timeout", pickerclient.DefaultPickTimeout, "deadline of a Pick call")
	fs.DurationVar(&cfg.PickAttemptTimeout, "pick-attempt-timeout", pickerclient.DefaultAttemptTimeout,
		"deadline of a Pick on one picker replica while others remain; one that misses it is passed over for 1s, doubling to 30s while it keeps missing")
	return cmd.Run(os.Args[1:], func(ctx context.Context, log *slog.Logger) error {
		cfg.PickerAddrs = pickers.Or("127.0.0.1:9002")
		if err := proxy.CheckForwardHeaders(forward); err != nil {
			return fmt.Errorf("--forward-headers: %w", err)
		}
		cfg.ForwardHeaders = forward
		return app.Run(ctx, cfg, log)
	})
}
