// Package bustest starts embedded NATS servers with JetStream for tests and
// connects clients to them:
//
//	srv := bustest.Start(t)          // stopped and removed when the test ends
//	nc, js := bustest.Connect(t, srv) // closed when the test ends
//	bustest.Stop(t, srv)              // the server goes away...
//	bustest.Restart(t, srv)           // ...and comes back on the same port and store
//
// and clusters of them, for replicated streams:
//
//	c := bustest.StartCluster(t, 3)      // 3 servers routed together, JetStream clustered
//	nc, js := bustest.ConnectCluster(t, c) // to every server's URL
//	c.Stop(c.StreamLeader("HERMOD_DECISIONS")); c.Restart(i)
//
// Servers are cheap (tens of milliseconds), so every test can have its own
// and use the real stream names. Only tests import this package.
package bustest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hermod/hermod/testkit/natsembed"
)

// ReconnectWait is the delay between the reconnect attempts of the
// connections Connect makes: short, so that tests of restarts are fast.
const ReconnectWait = 20 * time.Millisecond

// Start starts a NATS server with JetStream (file storage in a temporary
// directory) on a free loopback port, and shuts it down and removes its
// store when the test ends.
func Start(tb testing.TB) *natsembed.Server {
	tb.Helper()
	srv, err := natsembed.Start(natsembed.Options{JetStream: true})
	if err != nil {
		tb.Fatalf("bustest: %v", err)
	}
	tb.Cleanup(srv.Shutdown)
	return srv
}

// Connect connects to srv, reconnecting forever every ReconnectWait and
// without a reconnect buffer (as bus.Connect does), and closes the connection
// when the test ends (before the server stops when srv came from Start in
// the same test).
func Connect(tb testing.TB, srv *natsembed.Server) (*nats.Conn, jetstream.JetStream) {
	tb.Helper()
	return connect(tb, srv.ClientURL())
}

// ConnectWith connects to srv as Connect does, with more options last (the
// credentials of a server with users, say).
func ConnectWith(tb testing.TB, srv *natsembed.Server, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	tb.Helper()
	return connect(tb, srv.ClientURL(), opts...)
}

// connect connects to url (a comma-separated list is allowed) as Connect
// does, with opts after Connect's options.
func connect(tb testing.TB, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	tb.Helper()
	nc, err := nats.Connect(url, append([]nats.Option{
		nats.Name(tb.Name()),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(ReconnectWait),
		nats.ReconnectJitter(0, 0),
		nats.ReconnectBufSize(-1),
		nats.Timeout(5 * time.Second),
		// The default handler prints asynchronous errors (a write to a
		// stopped server) to stderr; the tests check behaviour instead.
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}),
	}, opts...)...)
	if err != nil {
		tb.Fatalf("bustest: connect to %s: %v", url, err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatalf("bustest: jetstream: %v", err)
	}
	return nc, js
}

// Stop stops srv, keeping its port and store for Restart.
func Stop(tb testing.TB, srv *natsembed.Server) {
	tb.Helper()
	srv.Stop()
}

// Restart starts srv again (stopping it first if it runs) on the same port
// with the same store.
func Restart(tb testing.TB, srv *natsembed.Server) {
	tb.Helper()
	if err := srv.Restart(); err != nil {
		tb.Fatalf("bustest: %v", err)
	}
}

// clusterStartTimeout bounds StartCluster.
const clusterStartTimeout = 60 * time.Second

// StartCluster starts a cluster of size NATS servers with clustered
// JetStream (file storage in a temporary directory) on free loopback
// ports, waits for its JetStream meta leader, and shuts it down and
// removes its stores when the test ends.
func StartCluster(tb testing.TB, size int) *natsembed.Cluster {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterStartTimeout)
	defer cancel()
	c, err := natsembed.StartCluster(ctx, natsembed.ClusterOptions{Size: size})
	if err != nil {
		tb.Fatalf("bustest: %v", err)
	}
	tb.Cleanup(c.Shutdown)
	return c
}

// ConnectCluster connects to every server of c as Connect does (the client
// picks one and fails over to the others) and closes the connection when
// the test ends.
func ConnectCluster(tb testing.TB, c *natsembed.Cluster) (*nats.Conn, jetstream.JetStream) {
	tb.Helper()
	return connect(tb, c.ClientURL())
}
