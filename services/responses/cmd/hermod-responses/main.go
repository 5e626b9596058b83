// Command hermod-responses stores the Responses API's conversations
// (gRPC hermod.responses.v1.ResponsesStore): in memory, or in
// Redis/Valkey with MongoDB as tier 2 kept in sync through a Redis stream,
// as the responses-store plugin's storeConfig selects.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/hermod/hermod/libs/bootstrap"
	"github.com/hermod/hermod/libs/cmdline"
	"github.com/hermod/hermod/services/responses/internal/app"
	"github.com/hermod/hermod/services/responses/internal/service"
)

func main() { cmdline.Main("hermod-responses", run) }

func run() error {
	var cfg app.Config
	cmd := bootstrap.NewCommand("hermod-responses", &cfg.Config, bootstrap.Flags{Pool: "the inference pool whose EndpointPickerConfig names the store", Replica: "this replica's name in the sync consumer group (default: host name and a random suffix)", EtcdOptional: true, Etcd: "none: --store-config or the default store", NoNATS: true})
	fs := cmd.FlagSet
	fs.StringVar(&cfg.Listen, "listen", app.DefaultListen, "gRPC address of ResponsesStore")
	fs.StringVar(&cfg.MetricsListen, "metrics-listen", app.DefaultMetricsListen, "HTTP address of /metrics, /health and /ready")
	fs.StringVar(&cfg.StoreConfig, "store-config", "", "the store as the responses-store plugin's storeConfig, YAML or JSON inline or @file (inMemoryConfig or tieredConfig {redis, mongo, stream}); without it, the pool's EndpointPickerConfig in etcd, else memory with a 24h ttl")
	fs.IntVar(&cfg.ChainLimit, "max-chain", service.DefaultChainLimit, "most responses a conversation chain may hold")
	fs.StringVar(&cfg.GatewayURL, "gateway-url", "", "base URL of a gateway (a Service in front of them all) that background responses are run through; without it, background: true is refused")
	fs.StringVar(&cfg.GatewayCAFile, "gateway-ca-file", "", "PEM CA bundle an https --gateway-url is verified with (default: the system roots)")
	fs.IntVar(&cfg.BackgroundWorkers, "background-workers", 4, "background responses this replica runs at once")
	return cmd.Run(os.Args[1:], func(ctx context.Context, log *slog.Logger) error {
		return app.Run(ctx, cfg, log)
	})
}
