package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hermod/hermod/libs/bootstrap"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/cmdline"
)

// Defaults of the connection flags: the addresses devstack (`make run`)
// uses.
const (
	defaultEtcd = "127.0.0.1:2379"
	defaultNATS = "nats://127.0.0.1:4222"
	dialTimeout = 5 * time.Second
	// requestTimeout bounds each etcd or JetStream request of a command.
	requestTimeout = 5 * time.Second
)

// target holds the flags naming the pool and where Hermod's state is.
type target struct {
	pool    string
	etcd    cmdline.List
	nats    string
	etcdSec bootstrap.EtcdSecurity
	natsSec bootstrap.NATSSecurity
}

func (t *target) registerPool(fs *flag.FlagSet) {
	fs.StringVar(&t.pool, "pool", "default", "the inference pool")
}

func (t *target) registerEtcd(fs *flag.FlagSet) {
	fs.Var(&t.etcd, "etcd-endpoints", "etcd endpoints, comma-separated (default "+defaultEtcd+")")
	t.etcdSec.RegisterFlags(fs)
}

func (t *target) registerNATS(fs *flag.FlagSet) {
	fs.StringVar(&t.nats, "nats-url", defaultNATS, "NATS server URL")
	t.natsSec.RegisterFlags(fs)
}

func (t *target) etcdClient(ctx context.Context) (*clientv3.Client, error) {
	eps := []string(t.etcd)
	if len(eps) == 0 {
		eps = []string{defaultEtcd}
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	return t.etcdSec.NewClient(ctx, eps)
}

func (t *target) natsConn(ctx context.Context) (*nats.Conn, jetstream.JetStream, error) {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	nc, err := t.natsSec.Connect(ctx, t.nats, "hermodctl", bus.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	return nc, js, nil
}
