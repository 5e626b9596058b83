// Command hermod-indexer ingests the KV-cache events of a pool's engines
// (ZMQ kv@ topics, repaired by replay) into the HERMOD_KV stream, projects
// the stream into a block index and answers which pods hold a prompt's
// blocks (gRPC IndexerService). Replicas split the ingest and each serves
// queries from the whole index.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/hermod/hermod/libs/bootstrap"
	"github.com/hermod/hermod/libs/cmdline"
	"github.com/hermod/hermod/libs/kv/index"
	"github.com/hermod/hermod/services/indexer/internal/app"
	"github.com/hermod/hermod/services/indexer/internal/backend"
	"github.com/hermod/hermod/services/indexer/internal/ingest"
)

func main() { cmdline.Main("hermod-indexer", run) }

func run() error {
	var cfg app.Config
	cmd := bootstrap.NewCommand("hermod-indexer", &cfg.Config, bootstrap.Flags{Pool: "the inference pool whose KV events are indexed"})
	fs := cmd.FlagSet
	fs.StringVar(&cfg.GRPCListen, "listen", app.DefaultGRPCListen, "gRPC address of IndexerService")
	fs.StringVar(&cfg.MetricsListen, "metrics-listen", app.DefaultMetricsListen, "HTTP address of /metrics, /health and /ready")
	fs.DurationVar(&cfg.MemberTTL, "member-ttl", app.DefaultMemberTTL, "lease TTL of this replica's membership (its pods move to the others this long after it dies)")
	fs.StringVar(&cfg.ZMQBind, "zmq-bind", "", "also bind a SUB socket here for pods that connect to the indexer (centralized mode, e.g. tcp://*:5557; their topics kv@<pod>@<model> name them)")
	fs.DurationVar(&cfg.SilentAfter, "pod-silent-after", ingest.DefaultSilentAfter, "report a pod (metric hermod_indexer_silent_pods and a warning) when its live KV events have stopped this long, unless its replay socket answers and shows it idle")
	fs.DurationVar(&cfg.SnapshotInterval, "snapshot-interval", app.DefaultSnapshotInterval, "how often to snapshot the index into the HERMOD_KV_SNAPSHOTS object store (0: never); a starting replica loads the newest and replays only the stream after it")
	fs.IntVar(&cfg.Index.Size, "index-size", index.DefaultSize, "most block keys the index holds (inMemoryConfig.size)")
	var memory cmdline.ByteSize
	fs.Var(&memory, "index-memory", "also bound the index's estimated memory, e.g. 2GiB (costAwareMemoryConfig.size; 0: no bound)")
	fs.IntVar(&cfg.Index.PodCacheSize, "pod-cache-size", index.DefaultPodCacheSize, "most pods listed per block key (inMemoryConfig.podCacheSize)")
	fs.IntVar(&cfg.Index.BlockSize, "block-size", 16, "tokens per index block (tokenProcessorConfig.blockSize); engine blocks must be multiples of it")
	fs.Uint64Var(&cfg.Index.Seed, "key-seed", 0, "seed of the block keys (every indexer and picker of a pool must agree)")
	indexConfig := fs.String("index-config", "", "the index backend as reference/001's kvBlockIndexConfig, YAML or JSON inline or @file: exactly one of inMemoryConfig {size, podCacheSize}, costAwareMemoryConfig {size}, redisConfig or valkeyConfig {address, backendType} (a Valkey/Redis index shared by the pool's replicas); it overrides --index-size, --pod-cache-size and --index-memory")
	cfg.SharedIndex.RegisterFlags(fs, "index-redis", "the shared index's Valkey/Redis server (--index-config redisConfig/valkeyConfig)")
	return cmd.Run(os.Args[1:], func(ctx context.Context, log *slog.Logger) error {
		cfg.Index.MaxBytes = int64(memory)
		if *indexConfig != "" {
			if err := applyIndexConfig(&cfg, *indexConfig, log); err != nil {
				return err
			}
		}
		return app.Run(ctx, cfg, log)
	})
}

// applyIndexConfig applies --index-config over the index flags.
func applyIndexConfig(cfg *app.Config, indexConfig string, log *slog.Logger) error {
	r, err := backend.Read(indexConfig)
	if err != nil {
		return fmt.Errorf("--index-config: %w", err)
	}
	for _, w := range r.Warnings {
		log.Warn(w)
	}
	if r.Size > 0 {
		cfg.Index.Size = r.Size
	}
	if r.PodCacheSize > 0 {
		cfg.Index.PodCacheSize = r.PodCacheSize
	}
	if r.MaxBytes > 0 {
		cfg.Index.MaxBytes = r.MaxBytes
	}
	cfg.SharedIndexURL, cfg.LogInterval = r.RedisURL, r.LogInterval
	return nil
}
