// Command hermod-picker is Hermod's stateless endpoint picker: a gRPC
// PickerService that routes each inference request of a pool with the
// pool's EndpointPickerConfig.
package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/hermod/hermod/libs/bootstrap"
	"github.com/hermod/hermod/libs/cmdline"
	"github.com/hermod/hermod/services/picker/internal/app"
	"github.com/hermod/hermod/services/picker/internal/endpoints"
	"github.com/hermod/hermod/services/picker/internal/extproc"
	"github.com/hermod/hermod/services/picker/internal/service"
)

func main() { cmdline.Main("hermod-picker", run) }

func run() error {
	var cfg app.Config
	cmd := bootstrap.NewCommand("hermod-picker", &cfg.Config, bootstrap.Flags{Pool: "the inference pool this picker routes"})
	fs := cmd.FlagSet
	fs.StringVar(&cfg.Listen, "listen", app.DefaultListen, "gRPC address of the PickerService")
	fs.StringVar(&cfg.MetricsListen, "metrics-listen", app.DefaultMetricsListen, "HTTP address of /metrics, /health and /ready")
	fs.StringVar(&cfg.ConfigFile, "config", "", "EndpointPickerConfig file (polled for changes); empty: the pool's config in etcd")
	fs.DurationVar(&cfg.ReplayWindow, "replay-window", app.DefaultReplayWindow, "how much of the decision and completion streams to replay at start")
	fs.IntVar(&cfg.Fallbacks, "fallbacks", service.DefaultFallbacks, "fallback endpoints returned beyond the primary target (0: none)")
	fs.StringVar(&cfg.IndexerAddress, "indexer-address", "", "hermod-indexer's gRPC address, for precise-prefix-cache-scorer (empty: configs using it do not load)")
	fs.StringVar(&cfg.InflightValkeyURL, "inflight-valkey-address", "", "Valkey/Redis URL (valkey://host:6379) of the pool's global in-flight counts, for valkey-least-request-picker (empty: configs using it do not load)")
	cfg.InflightValkey.RegisterFlags(fs, "inflight-valkey", "the in-flight server")
	fs.DurationVar(&cfg.InflightLeaseTTL, "inflight-lease-ttl", 15*time.Minute, "how long a pick counts without its completion before it is repaired (a gateway that died)")
	fs.BoolVar(&cfg.LocalView, "local-view", false, "fold only this replica's own decisions and completions: each replica sees only the requests it routed (the per-proxy view, for comparisons; not for production)")
	fs.StringVar(&cfg.Tokenizer, "tokenizer", "", `override the tokenizer configs name: "builtin" (the simulator's) for vllm-sim fleets; empty: as configured`)
	fs.IntVar(&cfg.MaxFailures, "max-scrape-failures", endpoints.DefaultMaxFailures, "failed scrapes in a row that take an endpoint out of routing (-1: never)")
	extprocMaxBody := cmdline.ByteSize(extproc.DefaultMaxBodyBytes)
	fs.Var(&extprocMaxBody, "extproc-max-body-bytes", "largest request body the Envoy ext_proc server buffers (e.g. 16MiB); larger ones are answered 413")
	return cmd.Run(os.Args[1:], func(ctx context.Context, log *slog.Logger) error {
		cfg.ExtProcMaxBodyBytes = int64(extprocMaxBody)
		return app.Run(ctx, cfg, log)
	})
}
