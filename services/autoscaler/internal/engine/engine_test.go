package engine

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/services/autoscaler/internal/actuator"
	"github.com/hermod/hermod/services/autoscaler/internal/actuator/local"
	"github.com/hermod/hermod/services/autoscaler/internal/config"
	"github.com/hermod/hermod/services/autoscaler/internal/observe"
	"github.com/hermod/hermod/services/autoscaler/internal/store"
	"github.com/hermod/hermod/testkit/coordtest"
)

const variantsYAML = `apiVersion: llmd.ai/v1alpha1
kind: VariantAutoscaling
metadata: {name: cheap}
spec:
  scaleTargetRef: {kind: DevstackFleet, name: cheap}
  modelID: m
  minReplicas: 0
  maxReplicas: 4
  variantCost: "5"
---
apiVersion: v1
kind: ConfigMap
metadata: {name: wva-model-scale-to-zero-config}
data:
  default: |
    enable_scale_to_zero: true
    retention_period: "2s"
`

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

type recorder struct {
	mu  sync.Mutex
	evs []*eventsv1.ScalingDecision
	ch  chan *eventsv1.ScalingDecision
}

func newRecorder() *recorder { return &recorder{ch: make(chan *eventsv1.ScalingDecision, 64)} }

func (r *recorder) publish(_ context.Context, d *eventsv1.ScalingDecision) error {
	r.mu.Lock()
	r.evs = append(r.evs, d)
	r.mu.Unlock()
	r.ch <- d
	return nil
}

func (r *recorder) next(t *testing.T, within time.Duration) *eventsv1.ScalingDecision {
	t.Helper()
	select {
	case d := <-r.ch:
		return d
	case <-time.After(within):
		t.Fatalf("no decision within %v", within)
		return nil
	}
}

func mustSet(t *testing.T, yaml string) *config.Set {
	t.Helper()
	objs, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	s, err := config.NewSet(objs...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type harness struct {
	e      *Engine
	act    *local.Actuator
	rec    *recorder
	cancel context.CancelFunc
	done   chan error
	// crashes: the engine's etcd client is closed under it (Run ends with
	// an error).
	crashes bool
}

func start(t *testing.T, cli *clientv3.Client, pool, replica string, ttl time.Duration, set *config.Set) *harness {
	t.Helper()
	h := &harness{act: local.New(cli, pool), rec: newRecorder(), done: make(chan error, 1)}
	e, err := New(Options{Pool: pool, Replica: replica, Client: cli, Actuator: h.act, Publish: h.rec.publish,
		LeaseTTL: ttl, Interval: 50 * time.Millisecond, Resync: 200 * time.Millisecond, Persist: 500 * time.Millisecond, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	h.e = e
	e.SetConfig(set)
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- e.Run(ctx) }()
	t.Cleanup(func() { h.stop(t) })
	return h
}

func (h *harness) stop(t *testing.T) {
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.done:
		if err != nil && !h.crashes {
			t.Errorf("engine: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Error("engine did not stop")
	}
}

func (h *harness) isLeader() bool {
	h.e.mu.Lock()
	defer h.e.mu.Unlock()
	return h.e.leader
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func replicas(t *testing.T, cli *clientv3.Client, pool, variant string) int {
	t.Helper()
	data, err := store.Get(context.Background(), cli, store.ReplicasKey(pool, variant))
	if errors.Is(err, store.ErrNotFound) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	n, err := store.ParseReplicas(data)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A queue event for a model at zero brings one pod of its cheapest variant
// at once: the decision is taken on the event, not on a poll.
func TestScaleFromZeroOnTheQueueEvent(t *testing.T) {
	cli, _ := coordtest.Start(t)
	pool := coordtest.PoolName(t)
	h := start(t, cli, pool, "a", 2*time.Second, mustSet(t, variantsYAML))
	waitFor(t, 10*time.Second, "leader", h.isLeader)
	// at zero, idle: no decision (nothing to change)
	select {
	case d := <-h.rec.ch:
		t.Fatalf("decision %v while idle at zero", d)
	case <-time.After(500 * time.Millisecond):
	}
	var lat []time.Duration
	for i := range 5 {
		before := time.Now()
		h.e.OnQueue(&eventsv1.FlowControlQueue{Replica: "gw", Queued: map[string]int64{"m": 1}, Time: timestamppb.Now()})
		d := h.rec.next(t, 2*time.Second)
		lat = append(lat, time.Since(before))
		if d.GetTrigger() != TriggerFromZero || d.GetAnalyzer() != FromZeroAnalyzer || len(d.GetVariants()) != 1 ||
			d.GetVariants()[0].GetDesired() != 1 || !d.GetVariants()[0].GetApplied() {
			t.Fatalf("decision %d: %v", i, d)
		}
		if got := replicas(t, cli, pool, "cheap"); got != 1 {
			t.Fatalf("replica target %d, want 1", got)
		}
		// back to zero by hand for the next round
		if err := h.act.Scale(context.Background(), actuator.Target{Variant: "cheap"}, 0); err != nil {
			t.Fatal(err)
		}
		h.e.mu.Lock()
		h.e.desired["cheap"] = 0
		h.e.mu.Unlock()
		h.e.tracker.ObserveQueue(&eventsv1.FlowControlQueue{Replica: "gw", Queued: map[string]int64{}})
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("queue event -> scale-from-zero decision: %v", lat)
	for _, l := range lat {
		if l > time.Second {
			t.Fatalf("a scale-from-zero decision took %v", l)
		}
	}
}

// A model idle past its retention period goes to zero; one with minReplicas
// kept is held at its minimum.
func TestIdleModelScalesToZeroAfterRetention(t *testing.T) {
	cli, _ := coordtest.Start(t)
	pool := coordtest.PoolName(t)
	ctx := context.Background()
	if _, err := cli.Put(ctx, store.ReplicasKey(pool, "cheap"), "2"); err != nil {
		t.Fatal(err)
	}
	h := start(t, cli, pool, "a", 2*time.Second, mustSet(t, variantsYAML))
	d := h.rec.next(t, 10*time.Second)
	if d.GetVariants()[0].GetDesired() != 0 || d.GetTrigger() == "" {
		t.Fatalf("decision %v, want cheap to 0", d)
	}
	if since := time.Since(h.e.tracker.Since()); since < 2*time.Second {
		t.Fatalf("scaled to zero %v after the start, before the 2s retention", since)
	}
	if got := replicas(t, cli, pool, "cheap"); got != 0 {
		t.Fatalf("replica target %d, want 0", got)
	}
}

// Saturated replicas (queue >= 5 over the last minute) scale the variant
// up by one; the decision carries the inputs and the analyzer's reasons.
func TestSaturationScalesUp(t *testing.T) {
	cli, _ := coordtest.Start(t)
	pool := coordtest.PoolName(t)
	if _, err := cli.Put(context.Background(), store.ReplicasKey(pool, "cheap"), "1"); err != nil {
		t.Fatal(err)
	}
	set := mustSet(t, `apiVersion: llmd.ai/v1alpha1
kind: VariantAutoscaling
metadata: {name: cheap}
spec: {scaleTargetRef: {kind: DevstackFleet, name: cheap}, modelID: m, minReplicas: 1, maxReplicas: 4}
`)
	h := start(t, cli, pool, "a", 2*time.Second, set)
	waitFor(t, 10*time.Second, "leader", h.isLeader)
	h.e.OnEndpoints([]*registryv1.Endpoint{{Name: "cheap-0", Model: "m", Labels: map[string]string{observe.VariantLabel: "cheap"}}})
	h.e.OnMetrics(&eventsv1.PodMetrics{Endpoint: "cheap-0", WaitingRequests: 7, KvCacheUsage: 0.5, Time: timestamppb.Now()})
	d := h.rec.next(t, 5*time.Second)
	v := d.GetVariants()[0]
	if v.GetCurrent() != 1 || v.GetDesired() != 2 || d.GetAnalyzer() != "saturation-percentage-based" || d.GetOptimizer() != OptimizerCostAware {
		t.Fatalf("decision %v", d)
	}
	if len(d.GetInputs().GetReplicas()) != 1 || d.GetInputs().GetReplicas()[0].GetQueue() != 7 || len(d.GetSignals()) != 1 || d.GetSignals()[0].GetRequired() != 1 {
		t.Fatalf("inputs %v signals %v", d.GetInputs(), d.GetSignals())
	}
	// the new pod is pending: no second decision until it serves
	select {
	case d := <-h.rec.ch:
		t.Fatalf("decision %v while a replica is pending", d)
	case <-time.After(500 * time.Millisecond):
	}
	var st config.VariantAutoscalingStatus
	if err := store.GetJSON(context.Background(), cli, store.StatusKey(pool, "cheap"), &st); err != nil {
		t.Fatal(err)
	}
	if st.DesiredOptimizedAlloc.NumReplicas != 2 || !st.Actuation.Applied {
		t.Fatalf("status %+v", st)
	}
}

// Kill the leader (its etcd session dies without resigning): the standby
// takes over within the lease TTL and decides, and the deposed leader's
// fenced writes are refused (no double actuation).
func TestLeaderFailover(t *testing.T) {
	srv, err := coordtest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	pool := coordtest.PoolName(t)
	cliA, cliB, cliC := srv.Client(t), srv.Client(t), srv.Client(t)
	const ttl = 2 * time.Second
	set := mustSet(t, strings.Replace(variantsYAML, `"2s"`, `"1m"`, 1))
	a := start(t, cliA, pool, "a", ttl, set)
	a.crashes = true
	waitFor(t, 10*time.Second, "a leads", a.isLeader)
	b := start(t, cliB, pool, "b", ttl, set)
	a.e.OnQueue(&eventsv1.FlowControlQueue{Replica: "gw", Queued: map[string]int64{"m": 1}, Time: timestamppb.Now()})
	first := a.rec.next(t, 5*time.Second)
	if b.isLeader() {
		t.Fatal("two leaders")
	}
	// a's state is persisted for the next leader
	waitFor(t, 10*time.Second, "state persisted", func() bool {
		var p persisted
		return store.GetJSON(context.Background(), cliC, store.StateKey(pool), &p) == nil && !p.LastSuccess["m"].IsZero()
	})
	killed := time.Now()
	_ = cliA.Close() // a crashes: its lease is neither revoked nor renewed
	waitFor(t, ttl+5*time.Second, "b leads", b.isLeader)
	took := time.Since(killed)
	t.Logf("standby elected %v after the leader died (lease TTL %v)", took, ttl)
	if took > ttl+2*time.Second {
		t.Fatalf("standby took %v, lease TTL %v", took, ttl)
	}
	// the deposed leader's actuator is fenced
	if err := a.act.Scale(context.Background(), actuator.Target{Variant: "cheap"}, 3); err == nil {
		t.Fatal("the deposed leader's write went through")
	}
	// b decides: the pod a started is not serving, the model is not idle
	// (b restored a's activity), so b holds the target a set
	if _, err := cliC.Put(context.Background(), store.ReplicasKey(pool, "cheap"), "0"); err != nil {
		t.Fatal(err)
	}
	b.e.mu.Lock()
	clear(b.e.desired)
	b.e.mu.Unlock()
	b.e.OnQueue(&eventsv1.FlowControlQueue{Replica: "gw", Queued: map[string]int64{"m": 2}, Time: timestamppb.Now()})
	second := b.rec.next(t, 5*time.Second)
	if second.GetReplica() != "b" || second.GetTerm() <= first.GetTerm() {
		t.Fatalf("after failover: replica %s term %d (first term %d)", second.GetReplica(), second.GetTerm(), first.GetTerm())
	}
	if got := replicas(t, cliC, pool, "cheap"); got != 1 {
		t.Fatalf("replica target %d, want 1", got)
	}
	if len(a.rec.evs) != 1 {
		t.Fatalf("the deposed leader published %d decisions, want 1", len(a.rec.evs))
	}
	if got := b.e.tracker.LastSuccess()["m"]; got.IsZero() {
		t.Fatal("the new leader did not restore the model's activity")
	}
}
