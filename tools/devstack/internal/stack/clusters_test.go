package stack

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/tools/devstack/stackstate"
)

// --nats-cluster and --etcd-cluster: the sizes, the streams' replicas the
// services are handed, and the deterministic etcd peer ports.
func TestClusterOptions(t *testing.T) {
	for _, tc := range []struct {
		name       string
		o          Options
		err        string
		replicas   int
		streamArgs []string
	}{
		{name: "default", o: Options{}, replicas: 0},
		{name: "single", o: Options{NATSCluster: 1, EtcdCluster: 1}, replicas: 0},
		{name: "two nats servers keep R1", o: Options{NATSCluster: 2}, replicas: 0},
		{name: "three", o: Options{NATSCluster: 3, EtcdCluster: 3}, replicas: 3, streamArgs: []string{"--stream-replicas", "3"}},
		{name: "five nats servers, R3", o: Options{NATSCluster: 5}, replicas: 3, streamArgs: []string{"--stream-replicas", "3"}},
		{name: "negative", o: Options{NATSCluster: -1}, err: "--nats-cluster: 1 to 7"},
		{name: "too many", o: Options{EtcdCluster: 8}, err: "--etcd-cluster: 1 to 7"},
		{name: "external nats", o: Options{NATSCluster: 3, NATSURL: "nats://x:4222"}, err: "not with --nats-url"},
		{name: "external etcd", o: Options{EtcdCluster: 3, EtcdEndpoints: []string{"x:2379"}}, err: "not with --etcd-endpoints"},
		{name: "external nats, size 1", o: Options{NATSCluster: 1, NATSURL: "nats://x:4222"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.checkClusters()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("checkClusters = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s := &stack{o: tc.o}
			if got := s.streamReplicas(); got != tc.replicas {
				t.Errorf("streamReplicas = %d, want %d", got, tc.replicas)
			}
			if got := s.streamArgs(); !slices.Equal(got, tc.streamArgs) {
				t.Errorf("streamArgs = %v, want %v", got, tc.streamArgs)
			}
		})
	}
	if got := etcdPeerPorts(2379, 3, nil); !slices.Equal(got, []int{3379, 3380, 3381}) {
		t.Errorf("peer ports of --etcd-port 2379: %v", got)
	}
}

// Clusters of 3 under --tls: the state has every server's URL (tls://,
// https://), the streams have 3 replicas, etcd's RBAC holds through every
// member, and a reused --data-dir starts the etcd members on their kept
// peer ports with their data.
func TestClusterServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts embedded etcd and NATS clusters (skipped with -short)")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dataDir := t.TempDir()
	newStack := func() *stack {
		return &stack{o: Options{TLS: true, DataDir: dataDir, NATSCluster: 3, EtcdCluster: 3, SimBasePort: 1, KVBasePort: 1},
			log: log, state: stackstate.State{PIDs: map[string]int{}}}
	}
	s := newStack()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		if err := s.shutdown(); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(stop)
	if err := s.servers(ctx); err != nil {
		t.Fatal(err)
	}
	natsURLs := strings.Split(s.state.NATSURL, ",")
	if len(natsURLs) != 3 || slices.ContainsFunc(natsURLs, func(u string) bool { return !strings.HasPrefix(u, "tls://127.0.0.1:") }) {
		t.Errorf("nats urls %q", s.state.NATSURL)
	}
	if len(s.state.EtcdEndpoints) != 3 || slices.ContainsFunc(s.state.EtcdEndpoints, func(u string) bool { return !strings.HasPrefix(u, "https://127.0.0.1:") }) {
		t.Errorf("etcd endpoints %v", s.state.EtcdEndpoints)
	}
	nc, err := s.natsSecurity("hermodctl").Connect(ctx, s.state.NATSURL, "test", bus.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{bus.DecisionsStream, bus.CompletionsStream, bus.KVStream, bus.ScalingStream} {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		if r := st.CachedInfo().Config.Replicas; r != 3 {
			t.Errorf("stream %s: %d replicas, want 3", name, r)
		}
	}
	nc.Close()
	// every member serves the hermod user, on /hermod/ only
	for i, ep := range s.state.EtcdEndpoints {
		cli, err := s.etcdSecurity("hermodctl").NewClient(ctx, []string{ep})
		if err != nil {
			t.Fatalf("member %d: %v", i, err)
		}
		if _, err := cli.Put(ctx, coord.ConfigKey("p"), ep); err != nil {
			t.Errorf("member %d: put under /hermod/: %v", i, err)
		}
		if _, err := cli.Put(ctx, "/elsewhere", "x"); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("member %d: put outside /hermod/: %v", i, err)
		}
		_ = cli.Close()
	}
	peers := s.etcdCluster.PeerPorts()
	stop()

	// the same --data-dir again
	s, stopped = newStack(), false
	if err := s.servers(ctx); err != nil {
		t.Fatalf("reused --data-dir: %v", err)
	}
	if got := s.etcdCluster.PeerPorts(); !slices.Equal(got, peers) {
		t.Errorf("peer ports %v, want the kept %v", got, peers)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "etcd-cluster-3", peerPortsFile)); err != nil {
		t.Error(err)
	}
	cli, err := s.etcdSecurity("hermodctl").NewClient(ctx, s.state.EtcdEndpoints)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	if resp, err := cli.Get(ctx, coord.ConfigKey("p")); err != nil || len(resp.Kvs) != 1 {
		t.Errorf("the kept data: %v %v", resp, err)
	}
}
