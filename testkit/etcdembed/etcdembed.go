// Package etcdembed runs a single-member etcd server in-process: the etcd of
// devstack (`make run`) and, through coordtest, of the tests.
//
// A server listens for clients on ClientHost:ClientPort (loopback and a free
// port by default) and for peers on a loopback port of its own (a single
// member has no peers, but etcd needs the listener). Its settings are fast
// but safe for one member:
//
//   - Writes are fsynced (set UnsafeNoFsync only for throwaway data, as
//     tests do: an OS crash may then lose acknowledged writes).
//   - Raft ticks are short (50ms heartbeat, 500ms election timeout): with no
//     peers to hear from, the only effect is that the member elects itself
//     at once on start, and that the minimum lease TTL etcd grants is 1s.
//   - The history is compacted periodically (CompactionRetention, 1h by
//     default), so that the database does not grow with every revision;
//     watchers that fall further behind relist.
//   - Snapshots are taken every SnapshotCount (10000) entries, keeping the
//     in-memory raft log small; the gRPC gateway (HTTP/JSON) is off.
//
// etcd logs through zap: to stderr as JSON lines by default, or into an
// slog.Logger (Options.Logger), at Options.LogLevel (errors only by default).
// Stop and Close silence it while the listeners close, which etcd reports as
// errors.
package etcdembed

import (
	"context"
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
	"sync/atomic"
	"syscall"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Defaults of Options.
const (
	DefaultName                = "hermod"
	DefaultClientHost          = "127.0.0.1"
	DefaultSnapshotCount       = 10000
	DefaultCompactionRetention = time.Hour
)

// Options configures a Server. The zero value is a quiet server on free
// loopback ports with its data in a temporary directory.
type Options struct {
	// Name is the member's name (default DefaultName).
	Name string
	// Dir is the data directory. When it holds the data of an earlier run,
	// the server resumes it (keep Name the same). "" makes a new temporary
	// directory that Close removes; a given Dir is kept.
	Dir string
	// ClientHost is the host the client listener binds (default
	// DefaultClientHost). An unspecified address (0.0.0.0, ::) binds every
	// interface and advertises 127.0.0.1.
	ClientHost string
	// ClientPort is the client port; 0 picks a free one.
	ClientPort int
	// PeerPort is the loopback peer port; 0 picks a free one.
	PeerPort int
	// Logger receives etcd's logs (keys in snake_case); nil writes them to
	// stderr as JSON lines.
	Logger *slog.Logger
	// LogLevel is the minimum level of etcd's logs; nil means
	// slog.LevelError. A *slog.LevelVar changes it at run time.
	LogLevel slog.Leveler
	// UnsafeNoFsync skips fsync: faster, but an OS crash may lose
	// acknowledged writes. For tests and throwaway data only.
	UnsafeNoFsync bool
	// SnapshotCount is the number of applied entries between snapshots
	// (default DefaultSnapshotCount).
	SnapshotCount uint64
	// CompactionRetention is the history kept by periodic compaction
	// (default DefaultCompactionRetention); negative disables compaction.
	CompactionRetention time.Duration
	// QuotaBackendBytes is the database size limit; 0 is etcd's default
	// (2 GiB).
	QuotaBackendBytes int64
	// ClientTLS, when set, serves clients over TLS (https:// client URLs)
	// instead of plain HTTP/2.
	ClientTLS *TLSFiles
}

// TLSFiles are the PEM files of the client listener's TLS.
type TLSFiles struct {
	CertFile, KeyFile string
	// TrustedCAFile verifies client certificates; with ClientCertAuth every
	// client must present one it signed (and, once authentication is on,
	// a client without a password is the user its certificate's common
	// name names).
	TrustedCAFile  string
	ClientCertAuth bool
}

// startAttempts is how many times Start picks free ports when the ones it
// picked were taken before etcd bound them.
const startAttempts = 5

// Server is an embedded single-member etcd server. Its methods are safe for
// concurrent use.
type Server struct {
	opts      Options
	clientURL string
	quiet     atomic.Bool // silences etcd's logs while stopping

	// initialCluster and clusterToken are the initial cluster of a member
	// of a Cluster ("" for a single member).
	initialCluster, clusterToken string

	mu      sync.Mutex
	cfg     *embed.Config
	etcd    *embed.Etcd // nil while stopped
	dir     string
	tempDir bool
	closed  bool
}

// Start starts a server and waits until it serves clients, or ctx ends.
func Start(ctx context.Context, opts Options) (*Server, error) {
	s, err := newServer(opts)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for attempt := 1; ; attempt++ {
		if err = s.configure(); err != nil {
			break
		}
		if err = s.start(ctx); err == nil {
			return s, nil
		}
		// A picked port can be taken by someone else before etcd binds it
		// (etcd binds before it writes any data): pick again.
		autoPorts := opts.ClientPort == 0 || opts.PeerPort == 0
		if !autoPorts || !isAddrInUse(err) || attempt == startAttempts || ctx.Err() != nil {
			break
		}
	}
	s.removeTempDir()
	return nil, err
}

// removeTempDir removes the data directory if newServer made it.
func (s *Server) removeTempDir() {
	if s.tempDir {
		_ = os.RemoveAll(s.dir)
	}
}

// newServer applies opts' defaults and returns a server not started yet,
// with its data directory.
func newServer(opts Options) (*Server, error) {
	if opts.Name == "" {
		opts.Name = DefaultName
	}
	if opts.ClientHost == "" {
		opts.ClientHost = DefaultClientHost
	}
	if opts.LogLevel == nil {
		opts.LogLevel = slog.LevelError
	}
	if opts.SnapshotCount == 0 {
		opts.SnapshotCount = DefaultSnapshotCount
	}
	if opts.CompactionRetention == 0 {
		opts.CompactionRetention = DefaultCompactionRetention
	}
	s := &Server{opts: opts, dir: opts.Dir}
	if s.dir == "" {
		dir, err := os.MkdirTemp("", "hermod-etcd-")
		if err != nil {
			return nil, fmt.Errorf("etcdembed: create data dir: %w", err)
		}
		s.dir, s.tempDir = dir, true
	}
	return s, nil
}

func isAddrInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}

// configure picks the ports and builds the embedded server's config.
func (s *Server) configure() error {
	clientPort, peerPort := s.opts.ClientPort, s.opts.PeerPort
	if clientPort == 0 || peerPort == 0 {
		ports, err := freePorts(s.opts.ClientHost, "127.0.0.1")
		if err != nil {
			return err
		}
		if clientPort == 0 {
			clientPort = ports[0]
		}
		if peerPort == 0 {
			peerPort = ports[1]
		}
	}
	scheme := "http"
	if s.opts.ClientTLS != nil {
		scheme = "https"
	}
	listenClient := url.URL{Scheme: scheme, Host: net.JoinHostPort(s.opts.ClientHost, strconv.Itoa(clientPort))}
	advertiseClient := listenClient
	if ip := net.ParseIP(s.opts.ClientHost); ip != nil && ip.IsUnspecified() {
		advertiseClient.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(clientPort))
	}
	peer := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(peerPort))}

	cfg := embed.NewConfig()
	cfg.Name = s.opts.Name
	cfg.Dir = s.dir
	cfg.ListenClientUrls = []url.URL{listenClient}
	cfg.AdvertiseClientUrls = []url.URL{advertiseClient}
	cfg.ListenPeerUrls = []url.URL{peer}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	if s.initialCluster != "" {
		cfg.InitialCluster, cfg.InitialClusterToken = s.initialCluster, s.clusterToken
	}
	cfg.LogLevel = zapLevel(s.opts.LogLevel.Level()).String()
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.New(s.logCore()))
	cfg.EnableGRPCGateway = false
	cfg.UnsafeNoFsync = s.opts.UnsafeNoFsync
	cfg.SnapshotCount = s.opts.SnapshotCount
	// Entries kept for followers to catch up from (a single member has
	// none; a restarted member of a cluster past them gets a snapshot).
	cfg.SnapshotCatchUpEntries = max(100, s.opts.SnapshotCount/10)
	cfg.TickMs = 50
	cfg.ElectionMs = 500
	if s.opts.CompactionRetention > 0 {
		cfg.AutoCompactionMode = embed.CompactorModePeriodic
		cfg.AutoCompactionRetention = s.opts.CompactionRetention.String()
	}
	if s.opts.QuotaBackendBytes > 0 {
		cfg.QuotaBackendBytes = s.opts.QuotaBackendBytes
	}
	if t := s.opts.ClientTLS; t != nil {
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: t.CertFile, KeyFile: t.KeyFile, TrustedCAFile: t.TrustedCAFile, ClientCertAuth: t.ClientCertAuth}
	}
	// A data dir of an earlier run holds the member: resume it.
	if _, err := os.Stat(filepath.Join(s.dir, "member", "wal")); err == nil {
		cfg.ClusterState = embed.ClusterStateFlagExisting
	}
	s.cfg = cfg
	s.clientURL = advertiseClient.String()
	return nil
}

// logCore is the zap core etcd logs into.
func (s *Server) logCore() zapcore.Core {
	enabled := levelEnabler{s}
	if s.opts.Logger != nil {
		return &slogCore{h: s.opts.Logger.Handler(), enabled: enabled}
	}
	return zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.Lock(os.Stderr), enabled)
}

// start starts etcd with s.cfg and waits until it serves. s.mu is held.
func (s *Server) start(ctx context.Context) error {
	s.quiet.Store(false)
	e, err := embed.StartEtcd(s.cfg)
	if err != nil {
		return fmt.Errorf("etcdembed: start etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
		s.etcd = e
		return nil
	case err = <-e.Err():
		err = fmt.Errorf("etcdembed: etcd failed while starting: %w", err)
	case <-ctx.Done():
		err = fmt.Errorf("etcdembed: etcd not ready: %w", ctx.Err())
	}
	s.quiet.Store(true)
	e.Close()
	return err
}

// ClientURLs returns the URLs clients reach the server at, as
// clientv3.Config.Endpoints wants them.
func (s *Server) ClientURLs() []string { return []string{s.clientURL} }

// Dir returns the data directory.
func (s *Server) Dir() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dir
}

// Running says whether the server is started (not stopped or closed).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.etcd != nil
}

// Stop stops the server and keeps its data and ports, for Restart. Clients
// see the server as unreachable until then. Stopping a stopped server does
// nothing. The server refuses new connections and streams at once; streams
// that clients keep open (watches, lease keepalives) may hold Stop for up to
// etcd's request timeout (about 6s) before they are cut: close the clients
// first for a prompt stop.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

func (s *Server) stopLocked() {
	if s.etcd != nil {
		s.quiet.Store(true)
		s.etcd.Close()
		s.etcd = nil
	}
}

// Kill stops the server as a crash would, as far as its peers can tell: it
// stops its raft member at once, without handing its leadership over (Stop
// hands it to a peer first), then closes it as Stop does. Restart brings
// it back.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.etcd == nil {
		return
	}
	s.quiet.Store(true)
	s.etcd.Server.HardStop()
	s.stopLocked()
}

// Name returns the member's name.
func (s *Server) Name() string { return s.opts.Name }

// IsLeader says whether the server runs and is its cluster's raft leader
// (a single member is its own).
func (s *Server) IsLeader() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.etcd == nil {
		return false
	}
	return s.etcd.Server.Leader() == s.etcd.Server.MemberID()
}

// Restart starts a stopped server again on the same ports with the same
// data, and waits until it serves or ctx ends; a running server is left as
// it is.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("etcdembed: restart of a closed server")
	}
	if s.etcd != nil {
		return nil
	}
	// The member exists now: resume it from the data dir.
	s.cfg.ClusterState = embed.ClusterStateFlagExisting
	return s.start(ctx)
}

// Close stops the server (see Stop) and, when Start made the data
// directory, removes it. Calls after the first do nothing.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.stopLocked()
	if s.tempDir {
		if err := os.RemoveAll(s.dir); err != nil {
			return fmt.Errorf("etcdembed: remove data dir: %w", err)
		}
	}
	return nil
}

// freePorts returns a TCP port on each of hosts that was free a moment ago,
// all different.
func freePorts(hosts ...string) ([]int, error) {
	ports := make([]int, 0, len(hosts))
	listeners := make([]net.Listener, 0, len(hosts))
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for _, host := range hosts {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("etcdembed: pick a free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
