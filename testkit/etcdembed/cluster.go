package etcdembed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// pollInterval is how often WaitLeader looks at the members.
const pollInterval = 20 * time.Millisecond

// PeerConnLinger is how long the peer HTTP connections between the members
// of a closed Cluster may outlive it (etcd's peer read timeout): a
// goroutine leak check after Close waits that long.
const PeerConnLinger = 6 * time.Second

// ClusterOptions configure an embedded etcd cluster of Size members on
// loopback: member i is named "<Name>-<i>", has a data directory of its own
// under Dir and a client and a peer port of its own (picked free), and the
// members find each other through a static initial cluster.
type ClusterOptions struct {
	// Size is the number of members (default 3). The cluster serves while
	// a majority runs (2 of 3).
	Size int
	// Name is the prefix of the member names and the initial cluster
	// token (default DefaultName).
	Name string
	// Dir is the parent of the members' data directories; "" makes a new
	// temporary directory that Close removes. A Dir of an earlier run of
	// the same Name and Size is resumed.
	Dir string
	// ClientPorts are the members' client ports; missing or 0 entries are
	// picked free. Peer ports are always picked free, except that a
	// resumed Dir needs the same ones: give PeerPorts then.
	ClientPorts, PeerPorts []int
	// Member holds the settings every member shares (ClientHost, Logger,
	// LogLevel, UnsafeNoFsync, SnapshotCount, CompactionRetention,
	// QuotaBackendBytes, ClientTLS); its Name, Dir and ports are ignored.
	Member Options
}

// Cluster is an embedded etcd cluster. Its methods are safe for concurrent
// use; a member is addressed by its index in Members.
type Cluster struct {
	members []*Server
	dir     string
	tempDir bool

	closeOnce sync.Once
	closeErr  error
}

// StartCluster starts the members together and waits until each serves
// clients (which takes a quorum, and so a leader), or ctx ends.
func StartCluster(ctx context.Context, o ClusterOptions) (*Cluster, error) {
	if o.Size == 0 {
		o.Size = 3
	}
	if o.Size < 1 || len(o.ClientPorts) > o.Size || len(o.PeerPorts) > o.Size {
		return nil, fmt.Errorf("etcdembed: cluster of %d members with %d client and %d peer ports", o.Size, len(o.ClientPorts), len(o.PeerPorts))
	}
	if o.Name == "" {
		o.Name = DefaultName
	}
	c := &Cluster{dir: o.Dir}
	if c.dir == "" {
		dir, err := os.MkdirTemp("", "hermod-etcd-cluster-")
		if err != nil {
			return nil, fmt.Errorf("etcdembed: create cluster dir: %w", err)
		}
		c.dir, c.tempDir = dir, true
	}
	var err error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		if err = c.start(ctx, o); err == nil {
			return c, nil
		}
		if !isAddrInUse(err) || ctx.Err() != nil {
			break
		}
	}
	if c.tempDir {
		_ = os.RemoveAll(c.dir)
	}
	return nil, err
}

// start configures the members on ports picked now and starts them; on
// failure it closes those that started.
func (c *Cluster) start(ctx context.Context, o ClusterOptions) error {
	members, err := c.configureMembers(o)
	if err != nil {
		return err
	}
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Go(func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			errs[i] = m.start(ctx)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, m := range members {
			_ = m.Close()
		}
		return fmt.Errorf("etcdembed: start cluster %s: %w", o.Name, err)
	}
	c.members = members
	return nil
}

// configureMembers builds the members, not started, with their ports and
// the initial cluster.
func (c *Cluster) configureMembers(o ClusterOptions) ([]*Server, error) {
	host := o.Member.ClientHost
	if host == "" {
		host = DefaultClientHost
	}
	hosts := make([]string, 0, 2*o.Size)
	for range o.Size {
		hosts = append(hosts, host, "127.0.0.1")
	}
	ports, err := freePorts(hosts...)
	if err != nil {
		return nil, err
	}
	members := make([]*Server, o.Size)
	peers := make([]string, o.Size)
	for i := range o.Size {
		mo := o.Member
		mo.Name = o.Name + "-" + strconv.Itoa(i)
		mo.Dir = filepath.Join(c.dir, mo.Name)
		mo.ClientPort = portAt(o.ClientPorts, i, ports[2*i])
		mo.PeerPort = portAt(o.PeerPorts, i, ports[2*i+1])
		if members[i], err = newServer(mo); err != nil {
			return nil, err
		}
		peers[i] = mo.Name + "=http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(mo.PeerPort))
	}
	initial := strings.Join(peers, ",")
	for _, m := range members {
		m.initialCluster, m.clusterToken = initial, o.Name
		if err := m.configure(); err != nil {
			return nil, err
		}
	}
	return members, nil
}

// portAt returns ports[i] when it is given and not 0, else picked.
func portAt(ports []int, i, picked int) int {
	if i < len(ports) && ports[i] != 0 {
		return ports[i]
	}
	return picked
}

// Members returns the members, in index order.
func (c *Cluster) Members() []*Server { return c.members }

// Member returns member i.
func (c *Cluster) Member(i int) *Server { return c.members[i] }

// Size returns the number of members.
func (c *Cluster) Size() int { return len(c.members) }

// Dir returns the parent of the members' data directories.
func (c *Cluster) Dir() string { return c.dir }

// ClientURLs returns every member's client URL, in index order, as
// clientv3.Config.Endpoints (and --etcd-endpoints, comma-joined) want
// them; they stay the same across Stop and Restart.
func (c *Cluster) ClientURLs() []string {
	urls := make([]string, 0, len(c.members))
	for _, m := range c.members {
		urls = append(urls, m.ClientURLs()...)
	}
	return urls
}

// PeerPorts returns the members' peer ports, to resume Dir in a later run.
func (c *Cluster) PeerPorts() []int {
	ports := make([]int, len(c.members))
	for i, m := range c.members {
		ports[i] = m.opts.PeerPort
	}
	return ports
}

// Stop stops member i gracefully (a leader hands its leadership to a peer
// first), keeping its data and ports for Restart. See Server.Stop.
func (c *Cluster) Stop(i int) { c.members[i].Stop() }

// Kill stops member i as a crash would (see Server.Kill).
func (c *Cluster) Kill(i int) { c.members[i].Kill() }

// Restart starts member i again; it rejoins the cluster and catches up.
// It returns once the member serves, or ctx ends.
func (c *Cluster) Restart(ctx context.Context, i int) error {
	if err := c.members[i].Restart(ctx); err != nil {
		return fmt.Errorf("etcdembed: restart member %d: %w", i, err)
	}
	return nil
}

// Leader returns the index of the member that is the raft leader, or -1
// while there is none among the running members.
func (c *Cluster) Leader() int {
	for i, m := range c.members {
		if m.IsLeader() {
			return i
		}
	}
	return -1
}

// WaitLeader waits until a running member other than those in not is the
// leader and returns its index, or fails when ctx ends.
func (c *Cluster) WaitLeader(ctx context.Context, not ...int) (int, error) {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		leader := c.Leader()
		if leader >= 0 && !slices.Contains(not, leader) {
			return leader, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("etcdembed: wait for a leader: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// Close closes every member (see Server.Close) and, when StartCluster made
// the parent directory, removes it. Calls after the first return the first
// one's result.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		var errs []error
		for _, m := range c.members {
			errs = append(errs, m.Close())
		}
		if c.tempDir {
			errs = append(errs, os.RemoveAll(c.dir))
		}
		if err := errors.Join(errs...); err != nil {
			c.closeErr = fmt.Errorf("etcdembed: close cluster: %w", err)
		}
	})
	return c.closeErr
}
