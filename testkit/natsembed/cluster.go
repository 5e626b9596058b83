package natsembed

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// DefaultClusterName is the cluster's name when ClusterOptions.Name is
// empty; node i is named "<name>-<i>".
const DefaultClusterName = "hermod-nats"

// clusterStartAttempts is how many times StartCluster picks free ports when
// the ones it picked were taken before the nodes bound them.
const clusterStartAttempts = 3

// pollInterval is how often the cluster's waits look at the servers.
const pollInterval = 20 * time.Millisecond

// ClusterOptions configure an embedded NATS cluster: Size servers with
// JetStream on loopback, routed to each other (a full mesh of cluster
// routes), each with a server name and a store directory of its own.
type ClusterOptions struct {
	// Size is the number of servers (default 3). Streams with R replicas
	// need R servers; a stream keeps accepting writes while a majority of
	// its replicas runs (2 of 3).
	Size int
	// Name is the cluster's name and the prefix of the server names
	// (default DefaultClusterName).
	Name string
	// Host the servers listen on, for clients and routes (default
	// DefaultHost).
	Host string
	// Ports are the client ports, one per server; missing or 0 entries are
	// picked free. The route ports are always picked free.
	Ports []int
	// StoreDir is the parent of the servers' store directories (one
	// sub-directory per server name); "" uses a new temporary directory
	// that Shutdown removes.
	StoreDir string
	// MaxMemory, MaxStore, Logger, TLS, Users, NKeys and Token are those
	// of Options, given to every server (TLS and authentication apply to
	// clients; routes stay on loopback without them).
	MaxMemory, MaxStore int64
	Logger              *slog.Logger
	TLS                 *tls.Config
	Users               []*server.User
	NKeys               []*server.NkeyUser
	Token               string
}

// Cluster is an embedded NATS cluster with JetStream. Its methods are safe
// for concurrent use; a node is addressed by its index in Nodes.
type Cluster struct {
	nodes  []*Server
	logger *slog.Logger

	mu      sync.Mutex
	tempDir string // removed by Shutdown; "" if the store belongs to the caller
}

// StartCluster starts a cluster and waits until every server accepts
// connections and JetStream has a meta leader that every server follows,
// or ctx ends.
func StartCluster(ctx context.Context, o ClusterOptions) (*Cluster, error) {
	if o.Size == 0 {
		o.Size = 3
	}
	if o.Size < 1 || len(o.Ports) > o.Size {
		return nil, fmt.Errorf("start nats cluster: size %d with %d ports", o.Size, len(o.Ports))
	}
	if o.Name == "" {
		o.Name = DefaultClusterName
	}
	if o.Host == "" {
		o.Host = DefaultHost
	}
	c := &Cluster{logger: o.Logger}
	if o.StoreDir == "" {
		dir, err := os.MkdirTemp("", "hermod-nats-cluster-")
		if err != nil {
			return nil, fmt.Errorf("start nats cluster: create store dir: %w", err)
		}
		c.tempDir, o.StoreDir = dir, dir
	}
	var err error
	for attempt := 1; attempt <= clusterStartAttempts; attempt++ {
		if err = c.start(o); err == nil || ctx.Err() != nil || !errors.Is(err, errPortTaken) {
			break
		}
	}
	if err == nil {
		err = c.WaitJetStream(ctx)
	}
	if err != nil {
		c.Shutdown()
		return nil, err
	}
	return c, nil
}

// errPortTaken marks a start that failed because a picked port was taken.
var errPortTaken = errors.New("port taken")

// start picks the route ports and starts every server; on failure it stops
// those it started.
func (c *Cluster) start(o ClusterOptions) error {
	routePorts, err := freePorts(o.Host, o.Size)
	if err != nil {
		return err
	}
	routes := make([]*url.URL, o.Size)
	for i, p := range routePorts {
		routes[i] = &url.URL{Scheme: "nats-route", Host: net.JoinHostPort(o.Host, strconv.Itoa(p))}
	}
	c.nodes = make([]*Server, 0, o.Size)
	for i := range o.Size {
		s, err := c.newNode(o, i, routePorts[i], routes)
		if err == nil {
			err = s.start()
		}
		if err != nil {
			c.stopAll()
			c.nodes = nil
			if strings.Contains(err.Error(), "address already in use") {
				err = fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return fmt.Errorf("start nats cluster %s: node %d: %w", o.Name, i, err)
		}
		c.nodes = append(c.nodes, s)
	}
	return nil
}

// newNode builds node i, stopped.
func (c *Cluster) newNode(o ClusterOptions, i, routePort int, routes []*url.URL) (*Server, error) {
	name := o.Name + "-" + strconv.Itoa(i)
	port := 0
	if i < len(o.Ports) {
		port = o.Ports[i]
	}
	s, err := newServer(Options{
		Name: name, Host: o.Host, Port: port, JetStream: true,
		StoreDir:  filepath.Join(o.StoreDir, name),
		MaxMemory: o.MaxMemory, MaxStore: o.MaxStore, Logger: o.Logger,
		TLS: o.TLS, Users: o.Users, NKeys: o.NKeys, Token: o.Token,
	})
	if err != nil {
		return nil, err
	}
	s.opts.Cluster = server.ClusterOpts{
		Name: o.Name, Host: o.Host, Port: routePort,
		// Reconnect a restarted peer's route quickly.
		ConnectRetries: -1,
	}
	for j, r := range routes {
		if j != i {
			s.opts.Routes = append(s.opts.Routes, r)
		}
	}
	return s, nil
}

// freePorts returns n TCP ports on host that were free a moment ago, all
// different.
func freePorts(host string, n int) ([]int, error) {
	ports := make([]int, 0, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("pick a free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Nodes returns the servers, in index order.
func (c *Cluster) Nodes() []*Server { return c.nodes }

// Node returns server i.
func (c *Cluster) Node(i int) *Server { return c.nodes[i] }

// Size returns the number of servers.
func (c *Cluster) Size() int { return len(c.nodes) }

// ClientURLs returns every server's client URL, in index order; they stay
// the same across Stop and Restart.
func (c *Cluster) ClientURLs() []string {
	urls := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		urls[i] = s.ClientURL()
	}
	return urls
}

// ClientURL returns the client URLs joined by commas, as nats.Connect and
// --nats-url take them.
func (c *Cluster) ClientURL() string { return strings.Join(c.ClientURLs(), ",") }

// Stop stops server i, keeping its ports and store for Restart.
func (c *Cluster) Stop(i int) { c.nodes[i].Stop() }

// Restart starts server i again (stopping it first if it runs) on the same
// ports with the same store; it rejoins the cluster and catches up. It
// does not wait for the catch-up: see WaitJetStream.
func (c *Cluster) Restart(i int) error {
	if err := c.nodes[i].Restart(); err != nil {
		return fmt.Errorf("restart nats node %d: %w", i, err)
	}
	return nil
}

// WaitJetStream waits until the running servers have a JetStream meta
// leader that knows every running server as a peer to place streams on,
// and every running server is current with it, or ctx ends.
func (c *Cluster) WaitJetStream(ctx context.Context) error {
	return c.poll(ctx, "jetstream meta leader knowing every running peer", func() bool {
		running, known := 0, 0
		for _, s := range c.nodes {
			srv := s.NATSServer()
			if srv == nil {
				continue
			}
			running++
			if !srv.JetStreamIsCurrent() {
				return false
			}
			if srv.JetStreamIsLeader() {
				// the peers placement can use: online, with JetStream,
				// their stats received; until every running one is, a
				// replicated stream fails with "no suitable peers"
				known = len(srv.JetStreamClusterPeers())
			}
		}
		return running > 0 && known >= running
	})
}

// StreamLeader returns the index of the server that leads stream (of the
// global account, where users without accounts live), or -1 when no
// running server does (an election is under way, or the stream does not
// exist).
func (c *Cluster) StreamLeader(stream string) int {
	for i, s := range c.nodes {
		if srv := s.NATSServer(); srv != nil && srv.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return i
		}
	}
	return -1
}

// WaitStreamLeader waits until a running server leads stream, other than
// those in not, and returns its index, or fails when ctx ends.
func (c *Cluster) WaitStreamLeader(ctx context.Context, stream string, not ...int) (int, error) {
	leader := -1
	err := c.poll(ctx, "leader of stream "+stream, func() bool {
		leader = c.StreamLeader(stream)
		for _, n := range not {
			if leader == n {
				return false
			}
		}
		return leader >= 0
	})
	return leader, err
}

// poll runs done every pollInterval until it returns true or ctx ends.
func (c *Cluster) poll(ctx context.Context, what string, done func() bool) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for !done() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("nats cluster: wait for %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// stopAll stops every server and removes the store directories they
// created themselves.
func (c *Cluster) stopAll() {
	for _, s := range c.nodes {
		s.Shutdown()
	}
}

// Shutdown stops every server, waits for them, and removes the store if
// StartCluster created it. Later calls do nothing.
func (c *Cluster) Shutdown() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopAll()
	if c.tempDir == "" {
		return
	}
	if err := os.RemoveAll(c.tempDir); err != nil && c.logger != nil {
		c.logger.Warn("remove nats cluster store dir", "store_dir", c.tempDir, "error", err)
	}
	c.tempDir = ""
}
