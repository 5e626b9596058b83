// Command hermod-gateway is Hermod's OpenAI-compatible front door: it asks
// the picker where each request goes, proxies it (streams pass through),
// falls back to other endpoints before the first byte, and reports every
// request's completion.
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"

	"github.com/hermod/hermod/libs/cmdline"
	"github.com/hermod/hermod/services/gateway/internal/app"
	"github.com/hermod/hermod/services/gateway/internal/pickerclient"
	"github.com/hermod/hermod/services/gateway/internal/proxy"
)

func main() { cmdline.Main("hermod-gateway", run) }

func run() error {
	fs := flag.NewFlagSet("hermod-gateway", flag.ContinueOnError)
	var (
		cfg     app.Config
		common  cmdline.Common
		etcd    cmdline.List
		pickers cmdline.List
	)
	fs.StringVar(&cfg.Pool, "pool", "default", "the inference pool this gateway serves")
	fs.StringVar(&cfg.Listen, "listen", app.DefaultListen, "HTTP address of the OpenAI API (and /health, /ready, /metrics)")
	fs.Var(&pickers, "picker-addrs", "picker replicas (host:port), comma-separated (default 127.0.0.1:9002)")
	fs.Var(&etcd, "etcd-endpoints", "etcd endpoints, comma-separated (default 127.0.0.1:2379)")
	fs.StringVar(&cfg.NATSURL, "nats-url", "nats://127.0.0.1:4222", "NATS server URL(s)")
	fs.StringVar(&cfg.ResponsesAddr, "responses-address", "", "the responses service (gRPC host:port) behind /v1/responses; empty: those requests get 503")
	fs.IntVar(&cfg.MaxChain, "max-conversation", 100, "most responses a /v1/responses conversation may chain (previous_response_id); longer gets 400")
	fs.StringVar(&cfg.FlowControlFile, "flow-control", "", "flow-control file (YAML): queueing, maxConcurrency, defaultRequestTTL, maxQueued, objectives (x-gateway-inference-objective -> priority), bandShares, saturation thresholds; empty: every request goes straight to the picker")
	fs.StringVar(&cfg.APIKeysFile, "api-keys-file", "", "file of API keys (`name secret [rps [burst]]` per line); empty: no keys required")
	fs.Int64Var(&cfg.MaxBodyBytes, "max-body-bytes", proxy.DefaultMaxBodyBytes, "largest request body accepted")
	fs.IntVar(&cfg.MaxAttempts, "max-attempts", proxy.DefaultMaxAttempts, "endpoints tried per request (the picked one and its fallbacks)")
	fs.DurationVar(&cfg.PickTimeout, "pick-timeout", pickerclient.DefaultPickTimeout, "deadline of a Pick call")
	fs.StringVar(&cfg.Replica, "replica", "", "this replica's id (default: host name and a random suffix)")
	common.Register(fs)
	return cmdline.Run(fs, os.Args[1:], &common, func(ctx context.Context, log *slog.Logger) error {
		cfg.EtcdEndpoints = etcd.Or("127.0.0.1:2379")
		cfg.PickerAddrs = pickers.Or("127.0.0.1:9002")
		cfg.OTLPEndpoint = common.OTLPEndpoint
		return app.Run(ctx, cfg, log)
	})
}
