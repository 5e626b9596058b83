package bootstrap

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/hermod/hermod/libs/bus"
)

// The shared flags fill the Config: defaults, the command line, and the
// HERMOD_* environment for what the command line left alone.
func TestCommandFillsTheSharedConfig(t *testing.T) {
	t.Setenv("HERMOD_NATS_URL", "nats://env:4222")
	var cfg Config
	cmd := NewCommand("hermod-test", &cfg, Flags{})
	own := cmd.Int("own", 1, "a service flag")
	err := cmd.Run([]string{"--pool", "p1", "--replica", "r1", "--otlp-endpoint", "otel:4317", "--own", "2"}, func(context.Context, *slog.Logger) error {
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Pool: "p1", Replica: "r1", EtcdEndpoints: []string{DefaultEtcd}, NATSURL: "nats://env:4222", OTLPEndpoint: "otel:4317"}
	if cfg.Pool != want.Pool || cfg.Replica != want.Replica || !slices.Equal(cfg.EtcdEndpoints, want.EtcdEndpoints) ||
		cfg.NATSURL != want.NATSURL || cfg.OTLPEndpoint != want.OTLPEndpoint || *own != 2 {
		t.Fatalf("config %+v own %d, want %+v own 2", cfg, *own, want)
	}
}

// An optional etcd has no default, and a service without NATS has no
// --nats-url.
func TestCommandOptionalEtcdAndNoNATS(t *testing.T) {
	var cfg Config
	cmd := NewCommand("hermod-test", &cfg, Flags{EtcdOptional: true, NoNATS: true})
	if cmd.Lookup("nats-url") != nil {
		t.Error("--nats-url is registered with NoNATS")
	}
	if err := cmd.Run(nil, func(context.Context, *slog.Logger) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if cfg.EtcdEndpoints != nil || cfg.Pool != "default" {
		t.Fatalf("config %+v, want no etcd and the default pool", cfg)
	}
	cmd = NewCommand("hermod-test", &cfg, Flags{EtcdOptional: true})
	if err := cmd.Run([]string{"--etcd-endpoints", "a:1,b:2"}, func(context.Context, *slog.Logger) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.EtcdEndpoints, []string{"a:1", "b:2"}) {
		t.Fatalf("etcd %v", cfg.EtcdEndpoints)
	}
}

// --publish-queue defaults to the service's bound, else the bus's, and
// exists only where NATS does.
func TestCommandPublishQueue(t *testing.T) {
	for _, c := range []struct {
		flags Flags
		args  []string
		want  int
	}{
		{Flags{}, nil, bus.DefaultQueueSize},
		{Flags{PublishQueue: 65536}, nil, 65536},
		{Flags{PublishQueue: 65536}, []string{"--publish-queue", "100"}, 100},
	} {
		var cfg Config
		cmd := NewCommand("hermod-test", &cfg, c.flags)
		if err := cmd.Run(c.args, func(context.Context, *slog.Logger) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if cfg.PublishQueue != c.want {
			t.Errorf("flags %+v args %v: publish queue %d, want %d", c.flags, c.args, cfg.PublishQueue, c.want)
		}
	}
	if NewCommand("hermod-test", &Config{}, Flags{NoNATS: true}).Lookup("publish-queue") != nil {
		t.Error("--publish-queue is registered with NoNATS")
	}
}
