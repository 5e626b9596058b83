package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hermod/hermod/libs/bus"
)

// devstack --nats-cluster 3 --etcd-cluster 3: every service reaches the
// backends through every server's URL, the streams have 3 replicas, and
// requests are routed and their decisions recorded.
func TestClusteredBackends(t *testing.T) {
	s := startStack(t, "--nats-cluster", "3", "--etcd-cluster", "3", "--pods", "2", "--speed", "10")
	if urls := strings.Split(s.state.NATSURL, ","); len(urls) != 3 {
		t.Errorf("state nats_url %q: want 3 servers", s.state.NATSURL)
	}
	if len(s.state.EtcdEndpoints) != 3 {
		t.Errorf("state etcd_endpoints %v: want 3 members", s.state.EtcdEndpoints)
	}
	ev := s.follow(t)
	model := s.state.Model

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var results []result
	for i := range 6 {
		stream := i%2 == 1
		r := s.send(ctx, "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"clustered %d"}],"max_tokens":8,"stream":%t}`, model, i, stream), stream)
		if !r.ok() {
			t.Fatalf("request %d: status %d, %v: %s\n%s", i, r.status, r.err, r.body, tail(s.logs.String(), 40))
		}
		results = append(results, r)
	}
	waitFor(t, 10*time.Second, "one decision and one completion per request", func() bool {
		for _, r := range results {
			if d, c := ev.counts(r.requestID); d != 1 || c != 1 {
				return false
			}
		}
		return true
	})
	for _, r := range results {
		if d := ev.decision(r.requestID); d.GetPrimaryEndpoint() != r.servedBy {
			t.Errorf("request %s: decided %s, served by %s", r.requestID, d.GetPrimaryEndpoint(), r.servedBy)
		}
	}

	js, err := jetstream.New(s.connectNATS(t, "e2e-cluster"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{bus.DecisionsStream, bus.CompletionsStream, bus.KVStream} {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		info := st.CachedInfo()
		if info.Config.Replicas != 3 {
			t.Errorf("stream %s: %d replicas, want 3", name, info.Config.Replicas)
		}
		if info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != 2 {
			t.Errorf("stream %s: cluster info %+v, want a leader and 2 peers", name, info.Cluster)
		}
	}
}
