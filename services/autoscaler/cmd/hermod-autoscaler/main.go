// Command hermod-autoscaler scales a pool's model-server variants by cost
// and SLO (the Workload Variant Autoscaler's analyzers, optimizers and
// enforcer), fed by events: the collector's metrics, the gateways' queues
// and the completions. One replica leads (an etcd election); each decision
// is an event on hermod.scaling.<pool>. The VariantAutoscaling objects
// come from etcd, or with --va-source from the Kubernetes API, where the
// leader writes their status.
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
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig of the kubernetes actuator and of --va-source kubernetes or both (empty: in-cluster)")
	fs.DurationVar(&cfg.LeaseTTL, "lease-ttl", 15*time.Second, "leader lease TTL: a standby takes over within it")
	fs.DurationVar(&cfg.Interval, "interval", 250*time.Millisecond, "least time between two evaluations started by metrics (scale from zero does not wait)")
	fs.DurationVar(&cfg.Resync, "resync", 5*time.Second, "evaluate at least this often")
	fs.StringVar(&cfg.ConfigFile, "config", "", "VariantAutoscaling objects and analyzer ConfigMaps (YAML) applied under the ones stored in etcd")
	fs.StringVar(&cfg.VASource, "va-source", app.VASourceEtcd,
		"where VariantAutoscaling objects come from: etcd (and --config), kubernetes (the API server's llmd.ai/v1alpha1 objects, whose status the leader writes) or both (the API's win over stored ones of the same namespace and name)")
	fs.StringVar(&cfg.VANamespace, "va-namespace", "",
		"namespace of the API's VariantAutoscaling objects (empty: the autoscaler's own, from the kubeconfig context or POD_NAMESPACE; "+app.AllNamespaces+": every namespace)")
	fs.StringVar(&cfg.VASelector, "va-selector", "", "label selector of the API's VariantAutoscaling objects, e.g. hermod.io/pool=default (empty: all)")
	return cmd.Run(os.Args[1:], func(ctx context.Context, log *slog.Logger) error {
		return app.Run(ctx, cfg, log)
	})
}
