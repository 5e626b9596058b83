package coordtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/hermod/hermod/testkit/etcdembed"
)

// Cluster is an embedded etcd cluster for tests: members on free loopback
// ports, their data in a temporary directory, quiet and fast as Server.
type Cluster struct {
	c *etcdembed.Cluster
}

// NewCluster starts a cluster of size members and waits until each serves.
func NewCluster(size int) (*Cluster, error) {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := etcdembed.StartCluster(ctx, etcdembed.ClusterOptions{
		Size: size,
		Name: "hermod-test",
		Member: etcdembed.Options{
			UnsafeNoFsync:       true,
			SnapshotCount:       1000,
			CompactionRetention: -1,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("coordtest: %w", err)
	}
	return &Cluster{c: c}, nil
}

// StartCluster starts a cluster of the test's own, closed when the test
// ends.
func StartCluster(tb testing.TB, size int) *Cluster {
	tb.Helper()
	c, err := NewCluster(size)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}

// Etcd returns the embedded cluster (members, leader, ports).
func (c *Cluster) Etcd() *etcdembed.Cluster { return c.c }

// Endpoints returns every member's client URL.
func (c *Cluster) Endpoints() []string { return c.c.ClientURLs() }

// NewClient returns a new client of every member; the caller closes it.
func (c *Cluster) NewClient() (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   c.Endpoints(),
		DialTimeout: 5 * time.Second,
		DialOptions: dialOptions(),
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("coordtest: new cluster client: %w", err)
	}
	return cli, nil
}

// Client returns a new client of every member, closed when the test ends.
func (c *Cluster) Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	cli, err := c.NewClient()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cli.Close() })
	return cli
}

// Stop stops member i gracefully (a leader hands over first).
func (c *Cluster) Stop(i int) { c.c.Stop(i) }

// Kill stops member i as a crash would.
func (c *Cluster) Kill(i int) { c.c.Kill(i) }

// Restart starts member i again and waits until it serves.
func (c *Cluster) Restart(i int) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	return c.c.Restart(ctx, i)
}

// WaitLeader waits until a running member other than those in not leads,
// and returns its index.
func (c *Cluster) WaitLeader(not ...int) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	return c.c.WaitLeader(ctx, not...)
}

// Close stops the members and removes their data.
func (c *Cluster) Close() { _ = c.c.Close() }

// SettleGoroutines waits up to etcdembed.PeerConnLinger until goleak finds
// no unexpected goroutine (opts as goleak's): the peer connections of a
// closed cluster end a few seconds after it. Call it at the end of a
// TestMain's run, before goleak's check.
func SettleGoroutines(opts ...goleak.Option) {
	for deadline := time.Now().Add(etcdembed.PeerConnLinger); goleak.Find(opts...) != nil && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
}
