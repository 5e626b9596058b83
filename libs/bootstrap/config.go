package bootstrap

import (
	"cmp"
	"context"
	"flag"
	"log/slog"

	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/cmdline"
)

// Config is what every service is told at start: its pool and replica,
// where etcd and NATS are and where its traces go. A service's own
// configuration embeds it; NewCommand binds it to the shared flags.
type Config struct {
	// Pool is the inference pool the service serves.
	Pool string
	// Replica names this process; empty makes one (ReplicaID).
	Replica string
	// EtcdEndpoints and NATSURL locate the backends Connect, Etcd and
	// NATS reach.
	EtcdEndpoints []string
	NATSURL       string
	// Etcd and NATS are the TLS and credentials of those connections
	// (--etcd-ca-file ..., --nats-ca-file ...; secrets from files or the
	// environment, never flags).
	Etcd EtcdSecurity
	NATS NATSSecurity
	// StreamReplicas is the replica count JetStream gives Hermod's streams
	// and metrics bucket (--stream-replicas; bus.Limits.Replicas): 3 on a
	// cluster of 3 or more JetStream servers keeps them through the loss of
	// any one; 0 keeps the count the streams have (1 when creating them).
	StreamReplicas int
	// PublishQueue bounds the events the service's stream publisher holds
	// while NATS is slow or away (--publish-queue; bus.WithQueueSize):
	// what does not fit is dropped and counted.
	PublishQueue int
	// OTLPEndpoint is where traces go (host:port); empty: nowhere.
	OTLPEndpoint string
	// OpsTokenFile holds the bearer token the ops port's /metrics and
	// /debug/ require (/health and /ready stay open); HERMOD_OPS_TOKEN may
	// hold the token instead. Neither: the ops port is open.
	OpsTokenFile string
	// GRPC is the TLS, mutual TLS and authorisation of the service's gRPC
	// servers and clients (--grpc-tls-*, --grpc-authz-file; grpc.go).
	GRPC GRPCSecurity
}

// DefaultEtcd and DefaultNATSURL are the backends a service reaches when
// its command line names none.
const (
	DefaultEtcd    = "127.0.0.1:2379"
	DefaultNATSURL = "nats://127.0.0.1:4222"
)

// Flags say how a service takes the shared flags. The zero value registers
// every one with the default usage, etcd defaulting to DefaultEtcd.
type Flags struct {
	// Pool and Replica replace the default usage of --pool and --replica.
	Pool, Replica string
	// EtcdOptional: no --etcd-endpoints means no etcd (Etcd explains what
	// the service does then).
	EtcdOptional bool
	Etcd         string
	// NoNATS: the service does not use NATS (no --nats-url).
	NoNATS bool
	// NoStreams: the service uses NATS but not Hermod's streams, so it
	// does not create them (no --stream-replicas).
	NoStreams bool
	// NoGRPC: the service neither serves nor calls gRPC (no --grpc-tls-*
	// or --grpc-authz-file).
	NoGRPC bool
	// PublishQueue is --publish-queue's default (0: bus.DefaultQueueSize).
	PublishQueue int
}

// Command is a service's command line: the shared flags, registered on its
// FlagSet and bound to a Config; the service adds its own to the FlagSet.
type Command struct {
	*flag.FlagSet
	cfg         *Config
	common      cmdline.Common
	etcd        cmdline.List
	defaultEtcd []string
}

// NewCommand registers the shared flags of the service name on a new flag
// set, bound to cfg: --pool, --replica, --etcd-endpoints, --nats-url and
// the common ones (-v, --log-format, --otlp-endpoint).
func NewCommand(name string, cfg *Config, f Flags) *Command {
	c := &Command{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), cfg: cfg}
	fs := c.FlagSet
	fs.StringVar(&cfg.Pool, "pool", "default", cmp.Or(f.Pool, "the inference pool"))
	fs.StringVar(&cfg.Replica, "replica", "", cmp.Or(f.Replica, "this replica's id (default: host name and a random suffix)"))
	etcdUsage := "etcd endpoints, comma-separated (default " + DefaultEtcd + ")"
	if f.EtcdOptional {
		etcdUsage = "etcd endpoints, comma-separated (" + cmp.Or(f.Etcd, "none: no etcd") + ")"
	} else {
		c.defaultEtcd = []string{DefaultEtcd}
	}
	fs.Var(&c.etcd, "etcd-endpoints", etcdUsage)
	cfg.Etcd.RegisterFlags(fs)
	if !f.NoNATS {
		fs.StringVar(&cfg.NATSURL, "nats-url", DefaultNATSURL, "NATS server URL(s)")
		cfg.NATS.RegisterFlags(fs)
		fs.IntVar(&cfg.PublishQueue, "publish-queue", cmp.Or(f.PublishQueue, bus.DefaultQueueSize),
			"events the stream publisher holds while NATS is slow or away; more are dropped (counted in hermod_bus_publish_dropped_total)")
		if !f.NoStreams {
			fs.IntVar(&cfg.StreamReplicas, "stream-replicas", 0,
				"replicas of Hermod's JetStream streams, 1 to 5 (at most the cluster's JetStream servers; 3 survives the loss of one); 0 keeps what they have (1 when created)")
		}
	}
	if !f.NoGRPC {
		cfg.GRPC.RegisterFlags(fs)
	}
	fs.StringVar(&cfg.OpsTokenFile, "ops-token-file", "", "file holding the bearer token /metrics and /debug/ on the ops port require (or the token in HERMOD_OPS_TOKEN); none: open")
	c.common.Register(fs)
	return c
}

// Run parses args (then the HERMOD_* environment) into the flags and runs
// run with the logger they ask for, under a context SIGINT and SIGTERM
// cancel.
func (c *Command) Run(args []string, run func(ctx context.Context, log *slog.Logger) error) error {
	return cmdline.Run(c.FlagSet, args, &c.common, func(ctx context.Context, log *slog.Logger) error {
		c.cfg.EtcdEndpoints = c.etcd.Or(c.defaultEtcd...)
		c.cfg.OTLPEndpoint = c.common.OTLPEndpoint
		return run(ctx, log)
	})
}
