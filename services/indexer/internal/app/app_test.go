package app

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	indexerv1 "github.com/hermod/hermod/libs/api/hermod/indexer/v1"
	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/bootstrap"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/libs/kv/events"
	"github.com/hermod/hermod/libs/kv/index"
	"github.com/hermod/hermod/libs/kv/kvzmq"
	"github.com/hermod/hermod/libs/tokenizer"
	"github.com/hermod/hermod/testkit/bustest"
	"github.com/hermod/hermod/testkit/coordtest"
	"github.com/hermod/hermod/testkit/redistest"
)

var etcdSrv *coordtest.Server

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	var err error
	if etcdSrv, err = coordtest.NewServer(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	etcdSrv.Close()
	// nats.go v1.55.0's object store Put publishes through a JetStream
	// context of its own and cleans it up when done; when that cleanup
	// runs before the reconnect listener the first publish started has
	// read its channel, the listener reads a nil channel and blocks for
	// good (jetstream/publish.go, resetPendingAcksOnReconnect). A snapshot
	// upload leaves one such goroutine now and then; it holds nothing.
	if err := goleak.Find(goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect")); code == 0 && err != nil {
		fmt.Fprintln(os.Stderr, "goroutines left behind:", err)
		code = 1
	}
	os.Exit(code)
}

const model = "meta-llama/Llama-3.1-8B-Instruct"

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// pod is an engine publishing KV events, registered in the pool.
type pod struct {
	name string
	pub  *kvzmq.Publisher
	rng  *rand.Rand
	held []uint64
	next uint64
	sent [][]byte
}

func startPod(t *testing.T, pool, name string) *pod {
	t.Helper()
	ev, rp := freePort(t), freePort(t)
	pub, err := kvzmq.NewPublisher(kvzmq.PublisherConfig{Endpoint: fmt.Sprintf("tcp://*:%d", ev), ReplayEndpoint: fmt.Sprintf("tcp://*:%d", rp), Topic: "kv@" + name + "@" + model})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	cli := etcdSrv.Client(t)
	reg, err := coord.Register(context.Background(), cli, &registryv1.Endpoint{
		Name: name, Pool: pool, Address: "127.0.0.1", Port: 1, Model: model,
		KvEventsEndpoint: fmt.Sprintf("tcp://127.0.0.1:%d", ev), KvReplayEndpoint: fmt.Sprintf("tcp://127.0.0.1:%d", rp),
	}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = reg.Close(ctx)
	})
	return &pod{name: name, pub: pub, rng: rand.New(rand.NewPCG(uint64(ev), 3)), next: 1}
}

// publish sends n batches: prompts of 1-4 blocks from the root, some
// removals.
func (p *pod) publish(t *testing.T, n int, prompts [][]uint32) {
	t.Helper()
	for range n {
		var b events.Batch
		if len(p.held) > 16 && p.rng.IntN(4) == 0 {
			i := p.rng.IntN(len(p.held))
			b.Events = []events.Event{{Kind: events.KindBlockRemoved, BlockHashes: []uint64{p.held[i]}}}
			p.held = append(p.held[:i], p.held[i+1:]...)
		} else {
			prompt := prompts[p.rng.IntN(len(prompts))]
			nb := 1 + p.rng.IntN(min(4, len(prompt)/16))
			hashes := make([]uint64, nb)
			for i := range hashes {
				hashes[i] = p.next
				p.next++
			}
			b.Events = []events.Event{{Kind: events.KindBlockStored, BlockHashes: hashes, TokenIDs: prompt[:nb*16], BlockSize: 16}}
			p.held = append(p.held, hashes...)
		}
		payload, err := events.AppendBatch(nil, &b, events.EncodingMap)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.pub.Publish(payload); err != nil {
			t.Fatal(err)
		}
		p.sent = append(p.sent, payload)
	}
}

// replica is a running indexer.
type replica struct {
	cancel context.CancelFunc
	done   chan error
	grpc   string
	ops    string
}

func startReplica(t *testing.T, natsURL, pool, name string, snapshotEvery ...time.Duration) *replica {
	t.Helper()
	return startReplicaWith(t, natsURL, pool, name, func(cfg *Config) {
		if len(snapshotEvery) > 0 {
			cfg.SnapshotInterval = snapshotEvery[0]
		}
	})
}

func startReplicaWith(t *testing.T, natsURL, pool, name string, configure func(*Config)) *replica {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{cancel: cancel, done: make(chan error, 1)}
	ready := make(chan struct{})
	cfg := Config{Config: bootstrap.Config{Pool: pool, EtcdEndpoints: etcdSrv.Endpoints(), NATSURL: natsURL, Replica: name}, GRPCListen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0", MemberTTL: 2 * time.Second, Index: index.Config{Shards: 8},
		Ready: func(g, o string) { r.grpc, r.ops = g, o; close(ready) }}
	configure(&cfg)
	go func() { r.done <- Run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	select {
	case <-ready:
	case err := <-r.done:
		t.Fatalf("replica %s exited: %v", name, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("replica %s not serving after 30s", name)
	}
	return r
}

func (r *replica) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("replica stopped with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("replica did not stop")
	}
}

func (r *replica) state(t *testing.T) IndexState {
	t.Helper()
	resp, err := http.Get("http://" + r.ops + "/debug/index")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s IndexState
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// want is the index of every batch the pods published, built directly.
func want(t *testing.T, pods ...*pod) string {
	t.Helper()
	d, _ := wantStats(t, pods...)
	return d
}

// wantStats is want with the totals of what the batches did.
func wantStats(t *testing.T, pods ...*pod) (string, index.Stats) {
	t.Helper()
	var st index.Stats
	x, err := index.New(index.Config{Shards: 8})
	if err != nil {
		t.Fatal(err)
	}
	dec := events.NewDecoder()
	var b events.Batch
	for _, p := range pods {
		for _, payload := range p.sent {
			if err := dec.Decode(payload, &b); err != nil {
				t.Fatal(err)
			}
			st.Add(x.Apply(p.name, model, &b))
		}
	}
	return strconv.FormatUint(x.Digest(), 16), st
}

// waitDigest waits until the replica's index has the wanted digest.
func waitDigest(t *testing.T, r *replica, digest, what string) IndexState {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := r.state(t)
		if s.Digest == digest {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: index %+v, want digest %s", what, s, digest)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func prompts(n int) [][]uint32 {
	var tok tokenizer.Builtin
	out := make([][]uint32, n)
	for i := range out {
		out[i] = tok.Encode(nil, fmt.Sprintf("system prompt %d: you are a helpful assistant who answers questions about routing. %s", i%3, fmt.Sprint(i)+" long context follows, with enough words to fill several blocks of sixteen tokens each, again and again and again."))
	}
	return out
}

// Event sourcing: two replicas index what two pods publish; one replica
// stops while the pods go on, restarts, and ends with the same index as
// the replica that never stopped, which equals the index of everything
// the pods published.
func TestReplicaRestartRebuildsTheSameIndex(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded servers")
	}
	srv := bustest.Start(t)
	pool := "restart"
	a := startReplica(t, srv.ClientURL(), pool, "indexer-a")
	defer a.stop(t)
	b := startReplica(t, srv.ClientURL(), pool, "indexer-b")
	p1, p2 := startPod(t, pool, "pod-1"), startPod(t, pool, "pod-2")
	ps := prompts(12)
	// give the replicas a moment to subscribe (a late subscriber replays,
	// but the test should see the ordinary path first)
	time.Sleep(300 * time.Millisecond)
	p1.publish(t, 200, ps)
	p2.publish(t, 200, ps)
	w := want(t, p1, p2)
	sa := waitDigest(t, a, w, "replica a")
	waitDigest(t, b, w, "replica b")
	if sa.Keys == 0 || sa.Applied.Stored == 0 {
		t.Fatalf("nothing indexed: %+v", sa)
	}

	b.stop(t)
	p1.publish(t, 300, ps)
	p2.publish(t, 300, ps)
	b = startReplica(t, srv.ClientURL(), pool, "indexer-b")
	defer b.stop(t)
	p1.publish(t, 100, ps)
	w = want(t, p1, p2)
	sa = waitDigest(t, a, w, "replica a")
	sb := waitDigest(t, b, w, "restarted replica b")
	// The index can match before b has read the stream's last messages
	// (batches that change nothing already indexed): b must still reach
	// where a was, with the same index.
	for deadline := time.Now().Add(20 * time.Second); sb.StreamSequence < sa.StreamSequence; sb = b.state(t) {
		if time.Now().After(deadline) {
			t.Fatalf("b at stream sequence %d, a at %d", sb.StreamSequence, sa.StreamSequence)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if sb.Digest != w {
		t.Fatalf("restarted replica b caught up to sequence %d with index %+v, want digest %s", sb.StreamSequence, sb, w)
	}

	// Score answers from the index: a prompt whose first blocks pod-1 stored
	cli := scoreClient(t, b)
	if mostBlocks(t, cli, pool, ps) == 0 {
		t.Fatal("no prompt matched a block of pod-1")
	}
	if _, err := cli.Score(context.Background(), &indexerv1.ScoreRequest{Pool: "other"}); err == nil {
		t.Fatal("a score for another pool answered")
	}
}

// A replica that snapshots its index lets a new one start from the
// snapshot and replay only the stream after it, to the same index.
func TestStartFromSnapshot(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded servers")
	}
	srv := bustest.Start(t)
	pool := "snap"
	a := startReplica(t, srv.ClientURL(), pool, "indexer-a", 100*time.Millisecond)
	p := startPod(t, pool, "pod-1")
	ps := prompts(8)
	time.Sleep(300 * time.Millisecond)
	p.publish(t, 300, ps)
	w := want(t, p)
	sa := waitDigest(t, a, w, "replica a")
	// wait for a snapshot covering everything
	deadline := time.Now().Add(10 * time.Second)
	for metricOf(t, a, "hermod_indexer_snapshot_stream_sequence") < float64(sa.StreamSequence) {
		if time.Now().After(deadline) {
			t.Fatal("no snapshot covering the stream")
		}
		time.Sleep(50 * time.Millisecond)
	}
	a.stop(t)
	p.publish(t, 50, ps) // not ingested by anybody yet
	b := startReplica(t, srv.ClientURL(), pool, "indexer-b")
	defer b.stop(t)
	sb := waitDigest(t, b, want(t, p), "replica b")
	if sb.RestoredAt == 0 || sb.RestoredAt < sa.StreamSequence {
		t.Fatalf("b restored at %d, a's snapshot covered %d", sb.RestoredAt, sa.StreamSequence)
	}
}

func metricOf(t *testing.T, r *replica, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + r.ops + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// A routing decision with precise-prefix-cache-scorer's speculative effect
// makes its target hold the prompt's keys until the TTL passes.
func TestSpeculativeEntriesFromDecisions(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded servers")
	}
	srv := bustest.Start(t)
	pool := "spec"
	r := startReplica(t, srv.ClientURL(), pool, "indexer-a")
	defer r.stop(t)
	_, js := bustest.Connect(t, srv)
	subject, _ := bus.DecisionsSubject(pool)
	keys := []uint64{11, 22, 33}
	d := &eventsv1.RoutingDecision{DecisionId: "d1", Pool: pool, Time: timestamppb.Now(), Effects: []*eventsv1.PluginEffect{
		{Plugin: "precise-prefix-cache-scorer", Type: "precise-prefix-cache-scorer", Endpoints: []string{"pod-9"}, Blocks: keys, Capacity: 1500},
	}}
	b, err := proto.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(r.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cli := indexerv1.NewIndexerServiceClient(conn)
	deadline := time.Now().Add(10 * time.Second)
	for {
		// published until seen: the consumer starts at the stream's end
		if _, err := js.Publish(context.Background(), subject, b); err != nil {
			t.Fatal(err)
		}
		resp, err := cli.Score(context.Background(), &indexerv1.ScoreRequest{BlockKeys: keys, Candidates: []string{"pod-9", "pod-8"}})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetScores()[0].GetBlocks() == 3 && resp.GetScores()[1].GetBlocks() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("speculative blocks not seen: %v", resp.GetScores())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The shared index: two replicas project into one Valkey/Redis index,
// each batch applied once; a replica stops and the other carries on; the
// server restarts empty and the index is rebuilt from the stream.
func TestSharedIndexAcrossReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded servers")
	}
	srv := bustest.Start(t)
	rs := redistest.Start(t)
	pool := "shared"
	shared := func(cfg *Config) { cfg.SharedIndexURL = rs.URL() }
	a := startReplicaWith(t, srv.ClientURL(), pool, "indexer-a", shared)
	b := startReplicaWith(t, srv.ClientURL(), pool, "indexer-b", shared)
	defer b.stop(t)
	p1, p2 := startPod(t, pool, "pod-1"), startPod(t, pool, "pod-2")
	ps := prompts(12)
	time.Sleep(300 * time.Millisecond)
	p1.publish(t, 150, ps)
	p2.publish(t, 150, ps)
	w, st := wantStats(t, p1, p2)
	sa := waitDigest(t, a, w, "replica a")
	sb := waitDigest(t, b, w, "replica b")
	if !sa.Shared || sa.Keys == 0 {
		t.Fatalf("state %+v", sa)
	}
	// each batch applied once: the replicas' counts add up to the batches'
	// (a replica counts a batch a moment after the server has it)
	for deadline := time.Now().Add(5 * time.Second); ; {
		got := sa.Applied.Stored + sb.Applied.Stored
		if got > st.Stored || (got < st.Stored && time.Now().After(deadline)) {
			t.Fatalf("the replicas stored %d + %d blocks, the batches hold %d: each batch must be applied once", sa.Applied.Stored, sb.Applied.Stored, st.Stored)
		}
		if got == st.Stored {
			break
		}
		time.Sleep(20 * time.Millisecond)
		sa, sb = a.state(t), b.state(t)
	}

	a.stop(t)
	p1.publish(t, 100, ps)
	p2.publish(t, 100, ps)
	waitDigest(t, b, want(t, p1, p2), "replica b alone")

	// the server restarts empty: b rebuilds the index from the stream
	rs.Stop()
	rs.Restart()
	p1.publish(t, 20, ps)
	waitDigest(t, b, want(t, p1, p2), "rebuilt index")

	cli := scoreClient(t, b)
	if mostBlocks(t, cli, pool, ps) == 0 {
		t.Fatal("no prompt matched a block of pod-1")
	}
	// the server gone: Score says unavailable (pickers fail open)
	rs.Stop()
	if _, err := cli.Score(context.Background(), &indexerv1.ScoreRequest{Pool: pool, Model: model, TokenIds: ps[0], Candidates: []string{"pod-1"}}); status.Code(err) != codes.Unavailable {
		t.Fatalf("score without the server: %v, want Unavailable", err)
	}
	rs.Restart()
}

// scoreClient is an IndexerService client of the replica, closed when the
// test ends.
func scoreClient(t *testing.T, r *replica) indexerv1.IndexerServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(r.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return indexerv1.NewIndexerServiceClient(conn)
}

// mostBlocks scores each prompt for pod-1, pod-2 and an unknown pod and
// returns the most blocks pod-1 matched (the unknown pod must match none).
func mostBlocks(t *testing.T, cli indexerv1.IndexerServiceClient, pool string, prompts [][]uint32) int {
	t.Helper()
	best := 0
	for _, pr := range prompts {
		resp, err := cli.Score(context.Background(), &indexerv1.ScoreRequest{Pool: pool, Model: model, TokenIds: pr, Candidates: []string{"pod-1", "pod-2", "pod-x"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetScores()) != 3 || resp.GetScores()[2].GetBlocks() != 0 {
			t.Fatalf("scores %v", resp.GetScores())
		}
		best = max(best, int(resp.GetScores()[0].GetBlocks()))
	}
	return best
}
