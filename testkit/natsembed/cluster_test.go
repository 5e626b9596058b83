package natsembed

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A 3-node cluster serves an R3 stream; its leader goes away and comes
// back, and the stream keeps every message and accepts writes throughout.
func TestClusterStreamLeaderRestart(t *testing.T) {
	skipShort(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	start := time.Now()
	c, err := StartCluster(ctx, ClusterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown()
	t.Logf("3 nodes with a JetStream meta leader after %s", time.Since(start).Round(time.Millisecond))
	if c.Size() != 3 || len(c.ClientURLs()) != 3 || strings.Count(c.ClientURL(), ",") != 2 {
		t.Fatalf("cluster: %d nodes, %q", c.Size(), c.ClientURL())
	}
	names := map[string]bool{}
	for _, n := range c.Nodes() {
		names[n.Name()] = true
	}
	if len(names) != 3 || !names["hermod-nats-0"] {
		t.Fatalf("server names %v", names)
	}
	nc, err := nats.Connect(c.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	leader, err := c.WaitStreamLeader(ctx, "T")
	if err != nil {
		t.Fatal(err)
	}
	publish(ctx, t, js, 10)

	c.Stop(leader)
	stopped := time.Now()
	next, err := c.WaitStreamLeader(ctx, "T", leader)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stream leader %d stopped; node %d leads after %s", leader, next, time.Since(stopped).Round(time.Millisecond))
	publish(ctx, t, js, 10)
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitJetStream(ctx); err != nil {
		t.Fatal(err)
	}
	publish(ctx, t, js, 10)
	info, err := js.Stream(ctx, "T")
	if err != nil {
		t.Fatal(err)
	}
	if n := info.CachedInfo().State.Msgs; n != 30 {
		t.Fatalf("stream holds %d messages, want 30", n)
	}
}

func publish(ctx context.Context, t *testing.T, js jetstream.JetStream, n int) {
	t.Helper()
	for range n {
		pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		_, err := js.Publish(pctx, "t.1", []byte("x"), jetstream.WithRetryAttempts(100), jetstream.WithRetryWait(50*time.Millisecond))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
}
