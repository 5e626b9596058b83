// Command hermod-collector scrapes every registered endpoint's /metrics and
// /v1/models and publishes them on NATS (hermod.metrics.<pool>.<endpoint>
// and the HERMOD_METRICS bucket). Replicas split the endpoints. With
// --discovery=kubernetes, one replica also writes the Ready pods picked by a
// label selector into the endpoint registry, or, with --inference-pool, the
// pods and ports an InferencePool picks (followed as it changes); with
// --endpoints-file, or a file-discovery plugin in the pool's config, one
// replica keeps the endpoints a file lists registered.
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"

	"github.com/hermod/hermod/libs/bootstrap"
	"github.com/hermod/hermod/libs/cmdline"
	"github.com/hermod/hermod/services/collector/internal/app"
	"github.com/hermod/hermod/services/collector/internal/filediscovery"
	"github.com/hermod/hermod/services/collector/internal/kubediscovery"
	"github.com/hermod/hermod/services/collector/internal/scrape"
)

func main() { cmdline.Main("hermod-collector", run) }

func run() error {
	var cfg app.Config
	cmd := bootstrap.NewCommand("hermod-collector", &cfg.Config, bootstrap.Flags{Pool: "the inference pool whose endpoints are scraped"})
	fs := cmd.FlagSet
	fs.StringVar(&cfg.MetricsListen, "metrics-listen", app.DefaultMetricsListen, "HTTP address of /metrics, /health and /ready")
	fs.DurationVar(&cfg.Interval, "interval", scrape.DefaultInterval, "time between two scrapes of an endpoint's /metrics")
	fs.DurationVar(&cfg.Timeout, "timeout", scrape.DefaultTimeout, "deadline of one scrape")
	fs.DurationVar(&cfg.ModelsInterval, "models-interval", scrape.DefaultModelsInterval, "time between two polls of an endpoint's /v1/models")
	fs.DurationVar(&cfg.KVInterval, "bucket-interval", app.DefaultKVInterval, "at most one write per endpoint per this interval to the latest-metrics bucket")
	fs.DurationVar(&cfg.MemberTTL, "member-ttl", app.DefaultMemberTTL, "lease TTL of this replica's membership (its endpoints move to the others this long after it dies)")
	fs.StringVar(&cfg.Discovery, "discovery", app.DiscoveryNone,
		"where endpoints come from besides their own registration: none, or kubernetes (Ready pods picked by --discovery-selector or --inference-pool, written into the registry by one replica)")
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig of --discovery=kubernetes; empty: the in-cluster service account")
	fs.StringVar(&cfg.DiscoveryNamespace, "discovery-namespace", "",
		"namespace of the pods to discover; empty: the kubeconfig context's, or in a cluster the collector's own (POD_NAMESPACE or the service account's)")
	fs.StringVar(&cfg.DiscoverySelector, "discovery-selector", "", "label selector of the pods to discover, e.g. app=vllm (required with --discovery=kubernetes)")
	fs.IntVar(&cfg.DiscoveryTargetPort, "discovery-target-port", app.DefaultDiscoveryTargetPort, "port of the discovered pods' OpenAI API and /metrics (not used with --inference-pool: its targetPorts)")
	fs.StringVar(&cfg.InferencePool, "inference-pool", "",
		"name of an InferencePool (inference.networking.k8s.io/v1) in --discovery-namespace whose selector and targetPorts pick the pods, followed as it changes; "+
			"turns on --discovery=kubernetes instead of --discovery-selector; its name is the pool (--pool, if given, must match)")
	fs.DurationVar(&cfg.DiscoveryResync, "discovery-resync", kubediscovery.DefaultResync, "period of the full resync of the discovered pods with the registry")
	fs.StringVar(&cfg.EndpointsFile, "endpoints-file", "",
		"YAML or JSON file of endpoints Hermod did not start (VMs, bare metal, Slurm), kept registered by one replica and reloaded on change; "+
			"empty: the file the pool's config names with a file-discovery plugin (dataLayer.discovery), if any; given, it wins over that one")
	fs.DurationVar(&cfg.EndpointsFileInterval, "endpoints-file-interval", filediscovery.DefaultInterval,
		"period of the polls of the endpoints file for changes (--endpoints-file's, or the config's with watchFile: true)")
	return cmd.Run(os.Args[1:], func(ctx context.Context, log *slog.Logger) error {
		fs.Visit(func(f *flag.Flag) { cfg.PoolSet = cfg.PoolSet || f.Name == "pool" })
		return app.Run(ctx, cfg, log)
	})
}
