// Command hermod-autoscaler scales a pool's model-server variants by cost
// and SLO (the Workload Variant Autoscaler's analyzers, optimizers and
// enforcer), fed by events: the collector's metrics, the gateways' queues
// and the completions. One replica leads (an etcd election); each decision
// is an event on hermod.scaling.<pool>.
package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/hermod/hermod/libs/bootstrap"
	"github.com/hermod/hermod/libs/cmdline"
	"github.com/hermod/hermod/services/autoscaler/internal/app"
)

func main() { cmdline.Main("hermod-autoscaler", run) }

func run() error {
	var cfg app.Config
	cmd := bootstrap.NewCommand("hermod-autoscaler", &cfg.Config, bootstrap.Flags{Replica: "this replica's name in the leader election (default: host name and a random suffix)", EtcdOptional: true, Etcd: "required: the objects, the election and the state"})
	fs := cmd.FlagSet
	fs.StringVar(&cfg.MetricsListen, "metrics-listen", app.DefaultMetricsListen, "HTTP address of /metrics, /health and /ready")
	fs.StringVar(&cfg.Actuator, "actuator", "kubernetes", "how targets are applied: kubernetes (the scale subresource), metrics (the wva_desired_replicas gauge for HPA/KEDA) or local (the devstack's fleet)")
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig of the kubernetes actuator (empty: in-cluster)")
	fs.DurationVar(&cfg.LeaseTTL, "lease-ttl", 15*time.Second, "leader lease TTL: a standby takes over within it")
	fs.DurationVar(&cfg.Interval, "interval", 250*time.Millisecond, "least time between two evaluations started by metrics (scale from zero does not wait)")
	fs.DurationVar(&cfg.Resync, "resync", 5*time.Second, "evaluate at least this often")
	fs.StringVar(&cfg.ConfigFile, "config", "", "VariantAutoscaling objects and analyzer ConfigMaps (YAML) applied under the ones stored in etcd")
	return cmd.Run(os.Args[1:], func(ctx context.Context, log *slog.Logger) error {
		return app.Run(ctx, cfg, log)
	})
}
