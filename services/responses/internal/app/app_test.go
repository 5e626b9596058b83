package app

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hermod/hermod/libs/bootstrap"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/libs/plugins/responsestore"
	"github.com/hermod/hermod/testkit/coordtest"
)

func TestStoreConfigFromFlagPoolConfigOrDefault(t *testing.T) {
	ctx := context.Background()
	srv, err := coordtest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cli := srv.Client(t)
	resolve := func(cfg Config) (*responsestore.StoreConfig, string, error) {
		svc, err := bootstrap.Start(ctx, bootstrap.Options{Name: "hermod-responses", Config: cfg.Config, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		defer svc.Close()
		return resolveStoreConfig(ctx, svc, cfg)
	}
	// no etcd: the default
	sc, from, err := resolve(Config{Config: bootstrap.Config{Pool: "p1"}})
	if err != nil || sc.InMemoryConfig.TTL.Std() != 24*time.Hour || from != "default" {
		t.Fatalf("%+v %s %v", sc, from, err)
	}
	cfg := Config{Config: bootstrap.Config{Pool: "p1", EtcdEndpoints: srv.Endpoints()}}
	// a pool without config: the default
	if sc, _, err := resolve(cfg); err != nil || sc.InMemoryConfig == nil {
		t.Fatalf("no config: %v", err)
	}
	// the pool's responses-store plugin
	yaml := `apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
featureGates: [prepareDataPlugins]
plugins:
- type: responses-store
  parameters:
    storeConfig:
      inMemoryConfig: {ttl: 2h, maxEntries: 7}
`
	if _, err := coord.PutConfig(ctx, cli, "p1", []byte(yaml)); err != nil {
		t.Fatal(err)
	}
	sc, from, err = resolve(cfg)
	if err != nil || sc.InMemoryConfig.TTL.Std() != 2*time.Hour || sc.InMemoryConfig.MaxEntries != 7 || from == "default" {
		t.Fatalf("pool config: %+v %s %v", sc.InMemoryConfig, from, err)
	}
	// the flag wins, YAML inline
	cfg.StoreConfig = "inMemoryConfig:\n  maxEntries: 3\n"
	sc, from, err = resolve(cfg)
	if err != nil || sc.InMemoryConfig.MaxEntries != 3 || from != "--store-config" {
		t.Fatalf("flag: %+v %s %v", sc.InMemoryConfig, from, err)
	}
	// a bad pool config names the field
	cfg.StoreConfig = ""
	bad := `plugins:
- type: responses-store
  parameters:
    storeConfig:
      tieredConfig: {redis: {address: "http://x"}}
`
	if _, err := coord.PutConfig(ctx, cli, "p1", []byte(bad)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := resolve(cfg); err == nil || !strings.Contains(err.Error(), "storeConfig.tieredConfig.redis.address") {
		t.Fatalf("bad config: %v", err)
	}
}
