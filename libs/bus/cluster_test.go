package bus

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/testkit/bustest"
	"github.com/hermod/hermod/testkit/natsembed"
)

// ClusterTestsEnv turns on the heavy cluster tests (kill and restart under
// load): HERMOD_CLUSTER_TESTS=1, as `make test-cluster` sets it.
const clusterTestsEnv = "HERMOD_CLUSTER_TESTS"

// heavyCluster skips a heavy cluster test unless clusterTestsEnv is set.
func heavyCluster(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("cluster test: starts a 3-node NATS cluster (skipped with -short)")
	}
	if os.Getenv(clusterTestsEnv) == "" {
		t.Skip("heavy cluster test (node restarts under load): set " + clusterTestsEnv + "=1 or run make test-cluster")
	}
}

func TestStreamConfigsReplicas(t *testing.T) {
	for _, tc := range []struct{ asked, want int }{{0, DefaultReplicas}, {1, 1}, {3, 3}, {5, 5}} {
		for _, cfg := range StreamConfigs(Limits{Replicas: tc.asked}) {
			if cfg.Replicas != tc.want {
				t.Errorf("Replicas %d: stream %s has %d", tc.asked, cfg.Name, cfg.Replicas)
			}
		}
		if r := MetricsBucketConfig(Limits{Replicas: tc.asked}).Replicas; r != tc.want {
			t.Errorf("Replicas %d: bucket has %d", tc.asked, r)
		}
	}
}

func TestEnsureStreamsRefusesInvalidReplicas(t *testing.T) {
	e := integration(t)
	for _, r := range []int{-1, MaxReplicas + 1} {
		if err := EnsureStreams(testContext(t), e.js, Limits{Replicas: r}); !errors.Is(err, ErrInvalidReplicas) {
			t.Errorf("Replicas %d: %v, want ErrInvalidReplicas", r, err)
		}
	}
	// R3 on a single server: the server's refusal names the replicas.
	if err := EnsureStreams(testContext(t), e.js, Limits{Replicas: 3}); err == nil {
		t.Error("3 replicas on one server accepted")
	} else {
		t.Logf("3 replicas on one server: %v", err)
	}
}

// On a 3-node cluster, EnsureStreams makes every stream and the bucket R3
// (3 servers each), Replicas 0 keeps them R3, and events published through
// a Publisher are consumed once each.
func TestClusterR3Streams(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test: starts a 3-node NATS cluster (skipped with -short)")
	}
	c := bustest.StartCluster(t, 3)
	_, js := bustest.ConnectCluster(t, c)
	ctx := testContext(t)
	if err := EnsureStreams(ctx, js, Limits{Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	if err := EnsureStreams(ctx, js, Limits{}); err != nil { // keeps R3
		t.Fatal(err)
	}
	for _, name := range []string{KVStream, DecisionsStream, CompletionsStream, ScalingStream, "KV_" + MetricsBucket} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		info := s.CachedInfo()
		if info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 || info.Cluster.Leader == "" {
			t.Fatalf("%s: replicas %d, cluster %+v", name, info.Config.Replicas, info.Cluster)
		}
	}
	// an object store follows the same rule: R3 when asked, kept by 0,
	// and scaled down in place
	for _, step := range []struct{ asked, want int }{{3, 3}, {0, 3}, {1, 1}} {
		obs, err := EnsureObjectStore(ctx, js, jetstream.ObjectStoreConfig{Bucket: "SNAPS", Replicas: step.asked})
		if err != nil {
			t.Fatalf("object store, replicas %d: %v", step.asked, err)
		}
		st, err := obs.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Replicas() != step.want {
			t.Fatalf("object store asked for %d replicas has %d, want %d", step.asked, st.Replicas(), step.want)
		}
	}
	l := startLoad(t, c)
	time.Sleep(300 * time.Millisecond)
	l.finish(t)
	t.Logf("R3: %d published, %d consumed", len(l.accepted), l.rec.total())
}

// A follower, then (separately) the decisions stream's leader, of a
// 3-node cluster is stopped for 3 s and restarted while a Publisher
// publishes 500 decisions a second to an R3 stream and a Consumer follows
// it: every accepted decision is stored and consumed exactly once.
func TestClusterNodeRestartUnderLoad(t *testing.T) {
	heavyCluster(t)
	for _, tc := range []struct {
		name   string
		leader bool
	}{{"follower", false}, {"stream_leader", true}} {
		t.Run(tc.name, func(t *testing.T) { nodeRestartUnderLoad(t, tc.leader) })
	}
}

func nodeRestartUnderLoad(t *testing.T, leader bool) {
	c := bustest.StartCluster(t, 3)
	_, js := bustest.ConnectCluster(t, c)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := EnsureStreams(ctx, js, Limits{Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	l := startLoad(t, c)
	time.Sleep(time.Second)

	victim := pickVictim(t, c, l.pubNC, leader)
	stopped := time.Now()
	c.Stop(victim)
	next, err := c.WaitStreamLeader(ctx, DecisionsStream, victim)
	if err != nil {
		t.Fatal(err)
	}
	elected := time.Since(stopped)
	time.Sleep(3 * time.Second)
	if err := c.Restart(victim); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	if err := waitReplicasCurrent(ctx, js, DecisionsStream); err != nil {
		t.Fatal(err)
	}
	caughtUp := time.Since(restarted)
	time.Sleep(time.Second)
	l.finish(t)

	st := l.pub.Stats()
	t.Logf("node %d (stream leader: %v) stopped 3 s: %d published, %d consumed, %d stored; "+
		"stream led by node %d %s after the stop; restarted node current after %s; longest pause in consumption %s; "+
		"publisher: %d failed attempts, %d duplicates dropped by the stream, %d dropped",
		victim, leader, len(l.accepted), l.rec.total(), streamMsgs(t, js, DecisionsStream),
		next, elected.Round(time.Millisecond), caughtUp.Round(time.Millisecond), l.rec.maxGap().Round(time.Millisecond),
		st.FailedAttempts, st.Duplicates, st.Dropped)
	if got := streamMsgs(t, js, DecisionsStream); got != uint64(len(l.accepted)) {
		t.Errorf("stream holds %d decisions, %d were accepted", got, len(l.accepted))
	}
}

// pickVictim returns the decisions stream's leader, or else a follower
// (the one the publisher is connected to when it is one).
func pickVictim(t *testing.T, c *natsembed.Cluster, pubNC *nats.Conn, leader bool) int {
	t.Helper()
	lead := c.StreamLeader(DecisionsStream)
	if lead < 0 {
		t.Fatal("the decisions stream has no leader")
	}
	if leader {
		return lead
	}
	for i, n := range c.Nodes() {
		if n.Name() == pubNC.ConnectedServerName() && i != lead {
			return i
		}
	}
	return (lead + 1) % c.Size()
}

// waitReplicasCurrent waits until every replica of stream is current.
func waitReplicasCurrent(ctx context.Context, js jetstream.JetStream, stream string) error {
	for {
		s, err := js.Stream(ctx, stream)
		if err == nil {
			if ci := s.CachedInfo().Cluster; ci != nil && ci.Leader != "" && allCurrent(ci.Replicas) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func allCurrent(peers []*jetstream.PeerInfo) bool {
	for _, p := range peers {
		if !p.Current || p.Offline {
			return false
		}
	}
	return true
}

// recorder counts the decisions a Consumer delivers and the longest pause
// between two deliveries.
type recorder struct {
	mu    sync.Mutex
	seen  map[string]int
	last  time.Time
	gap   time.Duration
	count int
}

func (r *recorder) record(d *eventsv1.RoutingDecision, _ Meta) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if !r.last.IsZero() {
		r.gap = max(r.gap, now.Sub(r.last))
	}
	r.last = now
	r.seen[d.GetDecisionId()]++
	r.count++
}

func (r *recorder) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

func (r *recorder) maxGap() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gap
}

// load publishes decisions of pool "p" every 2 ms through a Publisher on a
// connection of its own, and follows the decisions stream with a Consumer
// on another, as a picker and the audit would.
type load struct {
	pubNC    *nats.Conn
	pub      *Publisher
	cons     *Consumer
	rec      *recorder
	stop     chan struct{}
	done     chan struct{}
	accepted []string // written by the load goroutine until done closes
}

func startLoad(t *testing.T, c *natsembed.Cluster) *load {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	conn := func(name string) *nats.Conn {
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		defer ccancel()
		nc, err := Connect(cctx, c.ClientURL(), name, WithLogger(infoLogger(t)), WithBackoff(20*time.Millisecond, 200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	l := &load{pubNC: conn("publisher"), rec: &recorder{seen: map[string]int{}}, stop: make(chan struct{}), done: make(chan struct{})}
	consJS, err := jetstream.New(conn("consumer"))
	if err != nil {
		t.Fatal(err)
	}
	if l.cons, err = Consume(ctx, consJS, ConsumeOptions{Stream: DecisionsStream, Logger: infoLogger(t)}, l.rec.record); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.cons.Close)
	if l.pub, err = NewPublisher(l.pubNC, WithLogger(quietLogger()), WithBackoff(20*time.Millisecond, 500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	subject, err := DecisionsSubject("p")
	if err != nil {
		t.Fatal(err)
	}
	go l.run(subject)
	return l
}

func (l *load) run(subject string) {
	defer close(l.done)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		d := decision("p", i)
		if l.pub.Publish(subject, d.GetDecisionId(), d) {
			l.accepted = append(l.accepted, d.GetDecisionId())
		}
	}
}

// finish stops the load, flushes the Publisher, waits for the Consumer to
// have every accepted decision and checks that each came exactly once and
// that the Publisher dropped none.
func (l *load) finish(t *testing.T) {
	t.Helper()
	close(l.stop)
	<-l.done
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := l.pub.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); l.rec.total() < len(l.accepted); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("after 1m the consumer has %d of %d decisions (last sequence %d)", l.rec.total(), len(l.accepted), l.cons.LastSequence())
			break
		}
	}
	l.cons.Close()
	if st := l.pub.Stats(); st.Dropped != 0 {
		t.Errorf("publisher dropped %d decisions", st.Dropped)
	}
	l.rec.mu.Lock()
	defer l.rec.mu.Unlock()
	if l.rec.count != len(l.accepted) || len(l.rec.seen) != len(l.accepted) {
		t.Errorf("consumed %d deliveries of %d decisions, %d accepted", l.rec.count, len(l.rec.seen), len(l.accepted))
	}
	for _, id := range l.accepted {
		if n := l.rec.seen[id]; n != 1 {
			t.Errorf("decision %s consumed %d times", id, n)
		}
	}
}

// infoLogger logs info and above into the test's output.
func infoLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// A Consumer set up while its R3 stream has no quorum (2 of 3 servers
// down) gets no answer to its set-up requests; it asks again and starts,
// caught up, once the servers are back.
func TestClusterConsumeStartsOnceQuorumIsBack(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test: starts a 3-node NATS cluster (skipped with -short)")
	}
	c := bustest.StartCluster(t, 3)
	_, js := bustest.ConnectCluster(t, c)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := EnsureStreams(ctx, js, Limits{Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	publishDecisions(t, js, "p", 0, 5)
	c.Stop(1)
	c.Stop(2)
	_, lone := bustest.Connect(t, c.Node(0))
	type started struct {
		c   *Consumer
		err error
	}
	res := make(chan started, 1)
	var got sync.Map
	go func() {
		cons, err := Consume(ctx, lone, ConsumeOptions{Stream: DecisionsStream, FilterSubject: DecisionsPrefix + "p"},
			func(d *eventsv1.RoutingDecision, _ Meta) { got.Store(d.GetRequestId(), true) })
		res <- started{cons, err}
	}()
	select {
	case r := <-res:
		t.Fatalf("Consume returned without quorum: %v", r.err)
	case <-time.After(3 * time.Second):
	}
	for _, i := range []int{1, 2} {
		if err := c.Restart(i); err != nil {
			t.Fatal(err)
		}
	}
	r := <-res
	if r.err != nil {
		t.Fatalf("Consume after quorum came back: %v", r.err)
	}
	defer r.c.Close()
	select {
	case <-r.c.CaughtUp():
	case <-ctx.Done():
		t.Fatal("not caught up")
	}
	n := 0
	got.Range(func(any, any) bool { n++; return true })
	if n != 5 {
		t.Fatalf("consumed %d decisions, want 5", n)
	}
}
