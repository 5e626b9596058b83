// Package app runs the autoscaler service: it follows the pool's input
// events and its autoscaler objects in etcd, campaigns for the leadership,
// and while leader scales the variants through the configured actuator,
// with /metrics, /health and /ready.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/bootstrap"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/libs/telemetry"
	"github.com/hermod/hermod/services/autoscaler/internal/actuator"
	"github.com/hermod/hermod/services/autoscaler/internal/actuator/kube"
	"github.com/hermod/hermod/services/autoscaler/internal/actuator/local"
	actmetrics "github.com/hermod/hermod/services/autoscaler/internal/actuator/metrics"
	"github.com/hermod/hermod/services/autoscaler/internal/config"
	"github.com/hermod/hermod/services/autoscaler/internal/engine"
	"github.com/hermod/hermod/services/autoscaler/internal/store"
)

// DefaultMetricsListen is the ops address: loopback, so that an
// autoscaler started by hand serves nobody else; a deployment passes the
// pod's address (the Helm chart does).
const DefaultMetricsListen = "127.0.0.1:9099"

// Config is the service's configuration.
type Config struct {
	// Config is the pool, the replica, etcd, NATS and tracing.
	bootstrap.Config
	MetricsListen string
	// Actuator is "local", "kubernetes" or "metrics".
	Actuator   string
	Kubeconfig string
	LeaseTTL   time.Duration
	Interval   time.Duration
	Resync     time.Duration
	// ConfigFile is applied objects' YAML read at start, under the ones
	// in etcd (flags > env > file > stored config > defaults: a stored
	// object of the same name wins over the file's).
	ConfigFile string
	// VASource says where the VariantAutoscaling objects come from:
	// VASourceEtcd (etcd and ConfigFile), VASourceKubernetes (the API
	// server, whose objects get their status written) or VASourceBoth (an
	// object of the API wins over a stored one of the same namespace and
	// name). The analyzer ConfigMaps come from etcd and ConfigFile either
	// way.
	VASource string
	// VANamespace is the namespace of the API's VariantAutoscaling
	// objects: "" the autoscaler's own (the kubeconfig context's, or in a
	// cluster POD_NAMESPACE or the service account's), AllNamespaces every
	// namespace.
	VANamespace string
	// VASelector, when set, is the label selector of the API's objects.
	VASelector string
	// DynamicClient, when set, is the client of the API's objects instead
	// of one built from Kubeconfig (tests).
	DynamicClient dynamic.Interface
}

// The values of Config.VASource.
const (
	VASourceEtcd       = "etcd"
	VASourceKubernetes = "kubernetes"
	VASourceBoth       = "both"
)

// AllNamespaces as Config.VANamespace follows every namespace.
const AllNamespaces = "*"

// kubeVAs says whether VariantAutoscaling objects come from the API.
func (c *Config) kubeVAs() bool {
	return c.VASource == VASourceKubernetes || c.VASource == VASourceBoth
}

// storedVAs says whether VariantAutoscaling objects come from etcd and
// the --config file.
func (c *Config) storedVAs() bool {
	return c.VASource == "" || c.VASource == VASourceEtcd || c.VASource == VASourceBoth
}

// Validate checks the configuration; errors name the flag.
func (c *Config) Validate() error {
	var errs []error
	if err := coord.ValidatePoolName(c.Pool); err != nil {
		errs = append(errs, fmt.Errorf("--pool: %w", err))
	}
	if len(c.EtcdEndpoints) == 0 {
		errs = append(errs, errors.New("--etcd-endpoints: required (the objects, the leader election and the state live in etcd)"))
	}
	if c.NATSURL == "" {
		errs = append(errs, errors.New("--nats-url: required (the inputs are events)"))
	}
	switch c.Actuator {
	case "local", "kubernetes", "metrics":
	default:
		errs = append(errs, fmt.Errorf("--actuator: %q is not local, kubernetes or metrics", c.Actuator))
	}
	if c.LeaseTTL < time.Second {
		errs = append(errs, fmt.Errorf("--lease-ttl: at least 1s (got %v)", c.LeaseTTL))
	}
	switch c.VASource {
	case "", VASourceEtcd, VASourceKubernetes, VASourceBoth:
	default:
		errs = append(errs, fmt.Errorf("--va-source: %q is not etcd, kubernetes or both", c.VASource))
	}
	if c.VASelector != "" {
		if _, err := labels.Parse(c.VASelector); err != nil {
			errs = append(errs, fmt.Errorf("--va-selector: %w", err))
		}
	}
	if c.VANamespace != "" && c.VANamespace != AllNamespaces {
		if msgs := validation.IsDNS1123Label(c.VANamespace); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--va-namespace: %q is not a namespace (or %s for all): %s", c.VANamespace, AllNamespaces, strings.Join(msgs, "; ")))
		}
	}
	return errors.Join(errs...)
}

// Run serves until ctx ends.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	svc, err := bootstrap.Start(ctx, bootstrap.Options{Name: "hermod-autoscaler", Config: cfg.Config, Logger: log})
	if err != nil {
		return err
	}
	defer svc.Close()
	cfg.Replica, log = svc.Replica, svc.Log
	reg := svc.Registry
	var fileObjs []config.Object
	if cfg.ConfigFile != "" {
		data, err := os.ReadFile(cfg.ConfigFile)
		if err != nil {
			return fmt.Errorf("--config: %w", err)
		}
		if fileObjs, err = config.Parse(data); err != nil {
			return fmt.Errorf("--config %s: %w", cfg.ConfigFile, err)
		}
	}
	b, err := svc.Connect(ctx)
	if err != nil {
		return err
	}
	cli, nc, js := b.Etcd, b.NATS, b.JetStream
	act, err := newActuator(cfg, cli, reg, log)
	if err != nil {
		return err
	}
	kv, err := newKubeVariants(cfg, reg, log)
	if err != nil {
		return err
	}
	subject, err := bus.ScalingSubject(cfg.Pool)
	if err != nil {
		return err
	}
	e, err := engine.New(engine.Options{
		Pool: cfg.Pool, Replica: cfg.Replica, Client: cli, Actuator: act, LeaseTTL: cfg.LeaseTTL, Interval: cfg.Interval, Resync: cfg.Resync,
		Publish: func(ctx context.Context, d *eventsv1.ScalingDecision) error { return publish(ctx, js, subject, d) },
		Env:     os.Getenv, Log: log, Metrics: engine.NewMetrics(reg), Status: kv.statusSink(),
	})
	if err != nil {
		return err
	}
	stop, err := follow(ctx, cfg, cli, nc, js, e, fileObjs, kv, reg, log)
	if err != nil {
		return err
	}
	svc.OnClose(stop)
	log.Info("autoscaler deciding", "actuator", cfg.Actuator, "va_source", cfg.VASource)
	tasks := []bootstrap.Task{e.Run}
	if kv != nil {
		tasks = append(tasks, kv.writer.Run)
	}
	// The engine persists its state on its way out: Serve waits for it,
	// before the etcd client closes.
	return svc.Serve(ctx, bootstrap.Run{
		Servers: []bootstrap.Server{{Name: "ops", Addr: cfg.MetricsListen, HTTP: telemetry.OpsServer(svc.Ops(telemetry.OpsHandler(reg, func() error { return nil })))}},
		Tasks:   tasks,
	})
}

func newActuator(cfg Config, cli *clientv3.Client, reg prometheus.Registerer, log *slog.Logger) (actuator.Actuator, error) {
	switch cfg.Actuator {
	case "kubernetes":
		a, err := kube.NewFromKubeconfig(cfg.Kubeconfig, kube.WithLogger(log))
		if err != nil {
			return nil, fmt.Errorf("--actuator kubernetes: %w", err)
		}
		return a, nil
	case "metrics":
		return actmetrics.New(reg, log)
	default:
		return local.New(cli, cfg.Pool), nil
	}
}

// publish sends a decision to HERMOD_SCALING, its id as the message id.
func publish(ctx context.Context, js jetstream.JetStream, subject string, d *eventsv1.ScalingDecision) error {
	data, err := proto.Marshal(d)
	if err != nil {
		return fmt.Errorf("marshal decision: %w", err)
	}
	if _, err := js.Publish(ctx, subject, data, jetstream.WithMsgID(d.GetDecisionId())); err != nil {
		return fmt.Errorf("publish %s: %w", subject, err)
	}
	return nil
}

// follow feeds the engine: the pool's metrics and gateway queues (core
// NATS), its completions (HERMOD_COMPLETIONS, from now on), its endpoints
// and the autoscaler objects (etcd watches, and the API's
// VariantAutoscaling objects with kv). stop ends them all.
func follow(ctx context.Context, cfg Config, cli *clientv3.Client, nc *nats.Conn, js jetstream.JetStream, e *engine.Engine,
	fileObjs []config.Object, kv *kubeVariants, reg prometheus.Registerer, log *slog.Logger,
) (stop func(), err error) {
	var closers []func()
	stop = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	filter, err := bus.MetricsFilter(cfg.Pool)
	if err != nil {
		return nil, err
	}
	msub, err := bus.Subscribe(nc, filter, func(m *eventsv1.PodMetrics, _ string) { e.OnMetrics(m) }, bus.WithLogger(log), bus.WithRegisterer(reg))
	if err != nil {
		return nil, err
	}
	closers = append(closers, func() { _ = msub.Close() })
	qfilter, err := bus.FlowControlFilter(cfg.Pool)
	if err != nil {
		return nil, err
	}
	qsub, err := bus.Subscribe(nc, qfilter, func(q *eventsv1.FlowControlQueue, _ string) { e.OnQueue(q) }, bus.WithLogger(log))
	if err != nil {
		return nil, err
	}
	closers = append(closers, func() { _ = qsub.Close() })
	csubject, err := bus.CompletionsSubject(cfg.Pool)
	if err != nil {
		return nil, err
	}
	cons, err := bus.Consume(ctx, js, bus.ConsumeOptions{Stream: bus.CompletionsStream, FilterSubject: csubject, DeliverNew: true, Logger: log},
		func(c *eventsv1.RequestCompleted, _ bus.Meta) { e.OnCompletion(c) })
	if err != nil {
		return nil, err
	}
	closers = append(closers, cons.Close)
	ew, err := coord.WatchEndpoints(ctx, cli, cfg.Pool, func(s coord.Snapshot) { e.OnEndpoints(s.Sorted()) }, coord.WithLogger(log))
	if err != nil {
		return nil, err
	}
	closers = append(closers, ew.Close)
	// One watch over the pool's autoscaler keys: the variants and the
	// ConfigMaps arrive together (two watches could hand the engine the
	// variants without their scale-to-zero config for a moment).
	objs := newObjects(cfg, fileObjs, e.SetConfig, log)
	w, err := coord.WatchPrefix(ctx, cli, store.PoolPrefix(cfg.Pool), objs.update, coord.WithLogger(log))
	if err != nil {
		return nil, err
	}
	closers = append(closers, w.Close)
	if kv != nil {
		src, err := kv.start(ctx, objs.setKube)
		if err != nil {
			return nil, err
		}
		closers = append(closers, src.Close)
	}
	return stop, nil
}
