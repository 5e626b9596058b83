package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hermod/hermod/testkit/etcdembed"
	"github.com/hermod/hermod/testkit/natsembed"
)

// maxClusterSize bounds --nats-cluster and --etcd-cluster: every server is
// a process-local server of devstack's, on loopback.
const maxClusterSize = 7

// clusterName names the embedded clusters: NATS server i is
// "hermod-devstack-<i>", etcd member i too.
const clusterName = "hermod-devstack"

// etcdPeerPortOffset places etcd member i's peer port at
// --etcd-port + etcdPeerPortOffset + i.
const etcdPeerPortOffset = 1000

// peerPortsFile, in a cluster's etcd directory, holds the members' peer
// ports (JSON): the members keep their peer URLs in their data, so a
// reused --data-dir starts them on the same ports.
const peerPortsFile = "peer-ports.json"

// clusterStartTimeout bounds the start of a cluster (a quorum, a
// JetStream meta leader).
const clusterStartTimeout = time.Minute

// checkClusters checks --nats-cluster and --etcd-cluster.
func (o *Options) checkClusters() error {
	for _, c := range []struct {
		name, external string
		size           int
		isExternal     bool
	}{
		{"--nats-cluster", "--nats-url", o.NATSCluster, o.NATSURL != ""},
		{"--etcd-cluster", "--etcd-endpoints", o.EtcdCluster, len(o.EtcdEndpoints) > 0},
	} {
		switch {
		case c.size < 0 || c.size > maxClusterSize:
			return fmt.Errorf("%s: 1 to %d servers (got %d)", c.name, maxClusterSize, c.size)
		case c.size > 1 && c.isExternal:
			return fmt.Errorf("%s: the embedded servers' size, not with %s", c.name, c.external)
		}
	}
	return nil
}

// natsSize is the number of embedded NATS servers (1 with an external
// NATS: none runs, but the plan of ports counts one).
func (o *Options) natsSize() int {
	if o.NATSURL != "" {
		return 1
	}
	return max(o.NATSCluster, 1)
}

// etcdSize is the number of embedded etcd members (1 with an external
// etcd).
func (o *Options) etcdSize() int {
	if len(o.EtcdEndpoints) > 0 {
		return 1
	}
	return max(o.EtcdCluster, 1)
}

// streamReplicas is the replica count devstack gives Hermod's streams:
// 3 on an embedded NATS cluster of 3 or more servers (they survive the
// loss of one), else 0 (keep what they have; 1 when created).
func (s *stack) streamReplicas() int {
	if n := s.o.natsSize(); s.o.NATSURL == "" && n >= 3 {
		return min(n, 3)
	}
	return 0
}

// streamArgs are the --stream-replicas of the services that create the
// streams (collector, indexer, pickers, autoscaler): the same count as
// devstack's, so that none scales them back. None when devstack keeps
// the count.
func (s *stack) streamArgs() []string {
	if r := s.streamReplicas(); r > 0 {
		return []string{"--stream-replicas", strconv.Itoa(r)}
	}
	return nil
}

// startNATSCluster starts the embedded NATS as a cluster of --nats-cluster
// servers: server i's client port is --nats-port + i (free ones with
// --nats-port 0), the route ports are picked free, and each keeps its
// JetStream store under <data dir>/nats-cluster-<size>/<server name>.
// Under --tls the clients need TLS with a client certificate and the
// hermod user (the routes stay plaintext on loopback).
func (s *stack) startNATSCluster(ctx context.Context, dir string, plan *addrPlan) error {
	n := s.o.natsSize()
	ports := make([]int, n)
	for i := range ports {
		if s.o.NATSPort == 0 {
			ports[i] = plan.port()
			continue
		}
		ports[i] = s.o.NATSPort + i
		if err := portFree("127.0.0.1", ports[i], "--nats-port"); err != nil {
			return err
		}
	}
	s.o.NATSPort = ports[0]
	o := natsembed.ClusterOptions{Size: n, Name: clusterName, Ports: ports, StoreDir: filepath.Join(dir, "nats-cluster-"+strconv.Itoa(n))}
	if s.tls != nil {
		cfg, err := s.tls.natsServerTLS()
		if err != nil {
			return err
		}
		o.TLS, o.Users = cfg, s.tls.natsUsers()
	}
	ctx, cancel := context.WithTimeout(ctx, clusterStartTimeout)
	defer cancel()
	c, err := natsembed.StartCluster(ctx, o)
	if err != nil {
		return fmt.Errorf("embedded NATS cluster: %w", err)
	}
	s.natsCluster = c
	urls := c.ClientURLs()
	if s.tls != nil {
		for i, u := range urls {
			urls[i] = "tls://" + strings.TrimPrefix(u, "nats://")
		}
	}
	s.state.NATSURL = strings.Join(urls, ",")
	return nil
}

// startEtcdCluster starts the embedded etcd as a cluster of --etcd-cluster
// members: member i's client port is --etcd-port + i and its peer port
// --etcd-port + 1000 + i (free ones with --etcd-port 0), its data under
// <data dir>/etcd-cluster-<size>/<member name>. The peer ports are kept in
// that directory's peer-ports.json, and a reused --data-dir starts the
// members on them again (the members keep their peer URLs). Under --tls
// the members serve https with client certificates and RBAC on.
func (s *stack) startEtcdCluster(ctx context.Context, dir string, plan *addrPlan) error {
	n := s.o.etcdSize()
	cdir := filepath.Join(dir, "etcd-cluster-"+strconv.Itoa(n))
	if err := os.MkdirAll(cdir, 0o700); err != nil {
		return fmt.Errorf("embedded etcd cluster: %w", err)
	}
	peers, err := readPeerPorts(filepath.Join(cdir, peerPortsFile), n)
	if err != nil {
		return err
	}
	if peers == nil {
		peers = etcdPeerPorts(s.o.EtcdPort, n, plan)
	}
	clients := make([]int, n)
	for i := range clients {
		if s.o.EtcdPort == 0 {
			clients[i] = plan.port()
		} else {
			clients[i] = s.o.EtcdPort + i
		}
	}
	for i := range n {
		if err := portFree("127.0.0.1", clients[i], "--etcd-port"); err != nil {
			return err
		}
		if err := portFree("127.0.0.1", peers[i], "--etcd-port (peer ports: "+filepath.Join(cdir, peerPortsFile)+")"); err != nil {
			return err
		}
	}
	s.o.EtcdPort = clients[0]
	o := etcdembed.ClusterOptions{Size: n, Name: clusterName, Dir: cdir, ClientPorts: clients, PeerPorts: peers}
	if s.tls != nil {
		o.Member.ClientTLS = s.tls.etcdServerTLS()
	}
	sctx, cancel := context.WithTimeout(ctx, clusterStartTimeout)
	defer cancel()
	c, err := etcdembed.StartCluster(sctx, o)
	if err != nil {
		return fmt.Errorf("embedded etcd cluster: %w", err)
	}
	s.etcdCluster = c
	if err := writePeerPorts(filepath.Join(cdir, peerPortsFile), c.PeerPorts()); err != nil {
		return err
	}
	s.state.EtcdEndpoints = c.ClientURLs()
	return s.setupEtcdAuth(ctx)
}

// etcdPeerPorts are the peer ports of a new etcd cluster of n members:
// clientPort + 1000 + i, or planned free ones when the client port is.
func etcdPeerPorts(clientPort, n int, plan *addrPlan) []int {
	ports := make([]int, n)
	for i := range ports {
		if clientPort == 0 {
			ports[i] = plan.port()
		} else {
			ports[i] = clientPort + etcdPeerPortOffset + i
		}
	}
	return ports
}

// readPeerPorts reads the peer ports an earlier run kept in path (nil
// when there is no file).
func readPeerPorts(path string, n int) ([]int, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("etcd peer ports: %w", err)
	}
	var ports []int
	if err := json.Unmarshal(b, &ports); err != nil {
		return nil, fmt.Errorf("etcd peer ports %s: %w", path, err)
	}
	if len(ports) != n {
		return nil, fmt.Errorf("etcd peer ports %s: %d ports for %d members (remove the cluster's directory to start afresh)", path, len(ports), n)
	}
	return ports, nil
}

// writePeerPorts keeps the members' peer ports for a later run.
func writePeerPorts(path string, ports []int) error {
	b, err := json.Marshal(ports)
	if err != nil {
		return fmt.Errorf("etcd peer ports: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("etcd peer ports: %w", err)
	}
	return nil
}

// natsBanner is what the banner says of the NATS cluster ("" for one
// server).
func (s *stack) natsBanner() string {
	if s.natsCluster == nil {
		return ""
	}
	return fmt.Sprintf("   (a cluster of %d servers; streams R%d)", s.natsCluster.Size(), max(s.streamReplicas(), 1))
}

// etcdBanner is what the banner says of the etcd cluster ("" for one
// member).
func (s *stack) etcdBanner() string {
	if s.etcdCluster == nil {
		return ""
	}
	return fmt.Sprintf("   (a cluster of %d members; peer ports %s)", s.etcdCluster.Size(), strings.Trim(fmt.Sprint(s.etcdCluster.PeerPorts()), "[]"))
}
