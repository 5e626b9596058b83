package app

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/libs/kv/kvzmq"
	"github.com/hermod/hermod/testkit/bustest"
)

// startConnectingPod is a pod in centralized mode: its PUB connects to the
// indexer's bound socket (bind), it serves replays on a port of its own,
// and it is registered without an event endpoint of its own.
func startConnectingPod(t *testing.T, pool, name, bind string) *pod {
	t.Helper()
	rp := freePort(t)
	pub, err := kvzmq.NewPublisher(kvzmq.PublisherConfig{Endpoint: bind, ReplayEndpoint: fmt.Sprintf("tcp://*:%d", rp), Topic: "kv@" + name + "@" + model})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	reg, err := coord.Register(context.Background(), etcdSrv.Client(t), &registryv1.Endpoint{
		Name: name, Pool: pool, Address: "127.0.0.1", Port: 1, Model: model,
		KvReplayEndpoint: fmt.Sprintf("tcp://127.0.0.1:%d", rp),
	}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = reg.Close(ctx)
	})
	return &pod{name: name, pub: pub, rng: rand.New(rand.NewPCG(uint64(rp), 3)), next: 1}
}

// Centralized mode (--zmq-bind): the pods connect to the indexer. The
// indexer restarts at a new address while the pods publish on, their
// connections left hanging on the old one: the restarted indexer catches
// up every registered pod from its replay socket without a batch arriving
// live (a pod it never heard from as well), keeps the streams whole from
// the replay sockets while the pods publish on, and reports the pods
// whose live events no longer arrive.
func TestCentralRestartCatchesUpEveryPod(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded servers")
	}
	srv := bustest.Start(t)
	pool := "central"
	bind := fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t))
	a := startReplicaWith(t, srv.ClientURL(), pool, "indexer-a", func(cfg *Config) { cfg.ZMQBind = bind })
	p1, p2, p3 := startConnectingPod(t, pool, "pod-1", bind), startConnectingPod(t, pool, "pod-2", bind), startConnectingPod(t, pool, "pod-3", bind)
	ps := prompts(12)
	time.Sleep(300 * time.Millisecond) // the pods' connections settle
	p1.publish(t, 100, ps)
	p2.publish(t, 100, ps)
	waitDigest(t, a, want(t, p1, p2, p3), "before the restart")
	if n := metricOf(t, a, "hermod_indexer_followed_pods"); n != 3 {
		t.Fatalf("hermod_indexer_followed_pods = %v in centralized mode, want 3", n)
	}

	a.stop(t)
	p1.publish(t, 150, ps)
	p2.publish(t, 150, ps)
	p3.publish(t, 40, ps) // never heard before
	start := time.Now()
	a = startReplicaWith(t, srv.ClientURL(), pool, "indexer-a", func(cfg *Config) {
		cfg.ZMQBind = fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t))
		cfg.SilentAfter = 2 * time.Second
	})
	defer a.stop(t)
	s := waitDigest(t, a, want(t, p1, p2, p3), "caught up from replay, nothing live")
	t.Logf("the restarted indexer caught up 3 pods in %v (%d keys)", time.Since(start), s.Keys)
	for _, why := range []string{"unreachable", "live_lost", "unverified"} {
		if n := metricOf(t, a, `hermod_indexer_silent_pods{reason="`+why+`"}`); n != 0 {
			t.Errorf("%s silent pods: %v, want 0 yet", why, n)
		}
	}

	// the pods publish on; nothing reaches the indexer live
	deadline := time.Now().Add(15 * time.Second)
	for metricOf(t, a, `hermod_indexer_silent_pods{reason="live_lost"}`) != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("silent pods: %v live_lost, want 3", metricOf(t, a, `hermod_indexer_silent_pods{reason="live_lost"}`))
		}
		for _, p := range []*pod{p1, p2, p3} {
			p.publish(t, 5, ps)
		}
		time.Sleep(300 * time.Millisecond)
	}
	waitDigest(t, a, want(t, p1, p2, p3), "kept whole from the replay sockets")
	if age := metricOf(t, a, `hermod_indexer_pod_last_event_age_seconds{pod="pod-3"}`); age < 2 {
		t.Errorf("pod-3's last live event %vs ago, want at least 2", age)
	}
	t.Logf("reported live_lost %v after the restart", time.Since(start))
}

// The indexer stops promptly when the pods it follows are gone: neither
// their event sockets nor replays in flight to them hold it up.
func TestShutdownPromptWithPodsGone(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded servers")
	}
	srv := bustest.Start(t)
	pool := "gone"
	cli := etcdSrv.Client(t)
	for i := range 10 {
		ep := &registryv1.Endpoint{Name: fmt.Sprintf("pod-%d", i), Pool: pool, Address: "127.0.0.1", Port: 1, Model: model,
			KvReplayEndpoint: fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t))}
		if i%2 == 0 { // half bind their own event socket (discovery), half connect (centralized)
			ep.KvEventsEndpoint = fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t))
		}
		reg, err := coord.Register(context.Background(), cli, ep, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = reg.Close(ctx)
		})
	}
	r := startReplicaWith(t, srv.ClientURL(), pool, "indexer-a", func(cfg *Config) {
		cfg.ZMQBind = fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t))
	})
	deadline := time.Now().Add(10 * time.Second)
	for metricOf(t, r, "hermod_indexer_followed_pods") != 10 {
		if time.Now().After(deadline) {
			t.Fatalf("following %v pods, want 10", metricOf(t, r, "hermod_indexer_followed_pods"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // the first replays wait on the pods (2s timeout)
	start := time.Now()
	r.stop(t)
	took := time.Since(start)
	t.Logf("the indexer stopped in %v with 10 pods gone", took)
	if took > 700*time.Millisecond {
		t.Fatalf("the indexer took %v to stop with the pods gone", took)
	}
}
