package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/bootstrap"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/services/autoscaler/internal/store"
	"github.com/hermod/hermod/testkit/bustest"
	"github.com/hermod/hermod/testkit/coordtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConfigValidateNamesTheFlag(t *testing.T) {
	c := Config{Config: bootstrap.Config{Pool: ""}, Actuator: "helm", LeaseTTL: time.Millisecond}
	err := c.Validate()
	for _, flag := range []string{"--pool", "--etcd-endpoints", "--nats-url", "--actuator", "--lease-ttl"} {
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("Validate() = %v, want it to name %s", err, flag)
		}
	}
}

// The whole service on embedded etcd and NATS: objects applied in etcd,
// a gateway queue event on NATS for a model at zero, the decision on
// HERMOD_SCALING and the replica target in etcd. The reaction time (the
// queue event published -> the decision received) is measured over 100
// models.
func TestQueueEventToScaleFromZeroDecision(t *testing.T) {
	cli, _ := coordtest.Start(t)
	srv := bustest.Start(t)
	nc, js := bustest.Connect(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := bus.EnsureStreams(ctx, js, bus.DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	pool := coordtest.PoolName(t)
	const models = 100
	for i := range models {
		va := fmt.Sprintf("apiVersion: llmd.ai/v1alpha1\nkind: VariantAutoscaling\nmetadata: {name: v-%d}\nspec:\n  scaleTargetRef: {kind: DevstackFleet, name: v-%d}\n  modelID: m-%d\n  minReplicas: 0\n  maxReplicas: 2\n", i, i, i)
		if _, err := cli.Put(ctx, store.VariantKey(pool, fmt.Sprintf("v-%d", i)), va); err != nil {
			t.Fatal(err)
		}
	}
	stz := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: wva-model-scale-to-zero-config}\ndata:\n  default: |\n    enable_scale_to_zero: true\n    retention_period: 1h\n"
	if _, err := cli.Put(ctx, store.ConfigMapKey(pool, "wva-model-scale-to-zero-config"), stz); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[string]time.Time{}
	decided := make(chan string, models*2)
	subj, _ := bus.ScalingSubject(pool)
	c, err := bus.Consume(ctx, js, bus.ConsumeOptions{Stream: bus.ScalingStream, FilterSubject: subj}, func(d *eventsv1.ScalingDecision, _ bus.Meta) {
		mu.Lock()
		if _, ok := got[d.GetModelId()]; !ok {
			got[d.GetModelId()] = time.Now()
		}
		mu.Unlock()
		decided <- d.GetModelId()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	rctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(rctx, Config{Config: bootstrap.Config{Pool: pool, Replica: "as-0", EtcdEndpoints: cli.Endpoints(), NATSURL: srv.ClientURL()}, MetricsListen: "127.0.0.1:0", Actuator: "local", LeaseTTL: 2 * time.Second, Interval: 100 * time.Millisecond, Resync: time.Second},
			slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if id, err := coord.Leader(ctx, cli, "autoscaler-"+pool); err == nil && id != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no leader")
		}
		time.Sleep(20 * time.Millisecond)
	}
	subject, _ := bus.FlowControlSubject(pool, "gw-0")
	var lat []time.Duration
	for i := range models {
		model := fmt.Sprintf("m-%d", i)
		for attempt := 0; ; attempt++ { // the first may come before the objects are loaded
			sent := time.Now()
			if err := bus.PublishCore(nc, subject, &eventsv1.FlowControlQueue{Pool: pool, Replica: "gw-0",
				Queued: map[string]int64{model: 1}, Time: timestamppb.New(sent)}); err != nil {
				t.Fatal(err)
			}
			select {
			case m := <-decided:
				if m != model {
					t.Fatalf("a decision for %s after %s's queue event", m, model)
				}
				mu.Lock()
				lat = append(lat, got[model].Sub(sent))
				mu.Unlock()
			case <-time.After(time.Second):
				if attempt < 5 && i == 0 {
					continue
				}
				t.Fatalf("no decision for %s", model)
			}
			break
		}
		data, err := store.Get(ctx, cli, store.ReplicasKey(pool, fmt.Sprintf("v-%d", i)))
		if err != nil || string(data) != "1" {
			t.Fatalf("replica target of v-%d = %q, %v; want 1", i, data, err)
		}
		// the gateway's next report: nothing waits any more
		if err := bus.PublishCore(nc, subject, &eventsv1.FlowControlQueue{Pool: pool, Replica: "gw-0", Time: timestamppb.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	lat = lat[1:] // the first waited for the objects
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
	t.Logf("queue event published -> scale-from-zero decision received (NATS, etcd write, JetStream): p50 %v p99 %v max %v over %d models",
		p50, p99, lat[len(lat)-1], len(lat))
	if p99 > time.Second {
		t.Fatalf("p99 %v", p99)
	}
}
