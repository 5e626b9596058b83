package etcdembed

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// A 3-member cluster keeps serving while a follower is stopped and while
// its leader is killed; restarted members catch up.
func TestClusterMemberAndLeaderRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an etcd cluster (skipped with -short)")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	start := time.Now()
	c, err := StartCluster(ctx, ClusterOptions{Member: Options{UnsafeNoFsync: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	t.Logf("3 members serving after %s", time.Since(start).Round(time.Millisecond))
	if c.Size() != 3 || len(c.ClientURLs()) != 3 || c.Member(1).Name() != "hermod-1" {
		t.Fatalf("cluster %v", c.ClientURLs())
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.ClientURLs(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	put(t, cli, "/k", "0")
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}

	follower := (leader + 1) % 3
	c.Stop(follower)
	put(t, cli, "/k", "1")
	if err := c.Restart(ctx, follower); err != nil {
		t.Fatal(err)
	}
	serializableGet(ctx, t, c, follower, "/k", "1")

	killed := time.Now()
	c.Kill(leader)
	next, err := c.WaitLeader(ctx, leader)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("leader %d killed (took %s); member %d leads after %s", leader, time.Since(killed).Round(time.Millisecond),
		next, time.Since(killed).Round(time.Millisecond))
	put(t, cli, "/k", "2")
	if err := c.Restart(ctx, leader); err != nil {
		t.Fatal(err)
	}
	serializableGet(ctx, t, c, leader, "/k", "2")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// serializableGet waits until member i, read locally, has key at want.
func serializableGet(ctx context.Context, t *testing.T, c *Cluster, i int, key, want string) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Member(i).ClientURLs(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	for {
		gctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := cli.Get(gctx, key, clientv3.WithSerializable())
		cancel()
		if err == nil && len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("member %d never had %s=%s: %v", i, key, want, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
