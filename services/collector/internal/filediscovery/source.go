package filediscovery

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hermod/hermod/services/collector/internal/registrysync"
)

// Source keeps a pool's endpoint registry equal to an endpoints file; see
// the package documentation.
type Source struct {
	cfg    Config
	log    *slog.Logger
	met    *metrics
	set    *entrySet
	writer *registrysync.Writer

	// The poll goroutine's state: the file's version (content hash, or the
	// read error) last handled, and a new version seen once, which is
	// handled when the next poll sees it again.
	handled, pending string

	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// Start loads the endpoints file, then polls it (unless Config.Once) and
// campaigns for the pool's endpoints-file leadership; the Source writes
// the file's entries into the registry while it leads. It runs until ctx
// ends or Close is called; call Close in either case to release it. Start
// fails for an invalid Config, metrics that cannot be registered, and a
// file that cannot be read or is invalid (naming its lines): a collector
// does not start with a bad file, so that the replicas holding the last
// good one keep writing.
func Start(ctx context.Context, cfg Config) (*Source, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	log := cfg.Logger.With("discovery", "file", "endpoints_file", cfg.Path)
	met, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Source{cfg: cfg, log: log, met: met, set: newEntrySet()}
	if err := s.loadFirst(); err != nil {
		met.unregister()
		return nil, err
	}
	s.writer, err = registrysync.New(registrysync.Config{
		Pool: cfg.Pool, Service: ServicePrefix + cfg.Pool, Owner: DiscoveredByFile, Etcd: cfg.Etcd, ID: cfg.ID,
		LeaseTTL: cfg.LeaseTTL, Resync: cfg.Resync, RequestTimeout: cfg.RequestTimeout,
		MinBackoff: cfg.MinBackoff, MaxBackoff: cfg.MaxBackoff, Logger: log,
		Metrics: registrysync.Metrics{Leader: met.leader, Endpoints: met.registered, SyncErrors: met.syncErrors},
	}, s.set)
	if err != nil {
		met.unregister()
		return nil, fmt.Errorf("endpoints file discovery: %w", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.writer.Run(runCtx)
	}()
	reread := any(cfg.Interval)
	if cfg.Once {
		reread = "never (read once)"
	} else {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.poll(runCtx)
		}()
	}
	log.Info("endpoints file discovery started", "endpoints", s.set.len(), "interval", reread,
		"election", ServicePrefix+cfg.Pool)
	return s, nil
}

// Close stops the Source and waits for its goroutines. A leader resigns,
// so that another replica takes over at once; its entries stay until that
// replica rewrites them, or the lease expires (one TTL) if none does.
func (s *Source) Close() {
	s.closeOnce.Do(func() {
		s.cancel()
		s.wg.Wait()
		s.met.unregister()
	})
}

// Leading says whether this Source is the pool's endpoints-file writer.
func (s *Source) Leading() bool { return s.writer.Leading() }

// loadFirst loads the file for the first time.
func (s *Source) loadFirst() error {
	data, version, err := readFile(s.cfg.Path)
	if err == nil {
		err = s.reload(data)
	}
	if err != nil {
		return fmt.Errorf("endpoints file %s: %w", s.cfg.Path, err)
	}
	s.handled = version
	return nil
}

// Check reads the endpoints file at path and checks it for pool as Start
// does, without starting anything: nil when Start would take it.
func Check(pool, path string, hostNames bool) error {
	data, _, err := readFile(path)
	if err == nil {
		_, err = parse(pool, data, hostNames)
	}
	if err != nil {
		return fmt.Errorf("endpoints file %s: %w", path, err)
	}
	return nil
}

// poll reads the file every interval until ctx ends.
func (s *Source) poll(ctx context.Context) {
	tick := time.NewTicker(s.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			s.check()
		}
	}
}

// check reads the file and handles a version (content, or read error) that
// differs from the one last handled once two polls in a row have seen it,
// so that a file caught while being written is not applied. Reading the
// path anew each time follows every way of replacing the file: writing in
// place, renaming over it, and the swap of the ..data symlink of a mounted
// Kubernetes ConfigMap.
func (s *Source) check() {
	data, version, err := readFile(s.cfg.Path)
	switch version {
	case s.handled:
		s.pending = ""
		return
	case s.pending:
		s.pending, s.handled = "", version
	default:
		s.pending = version
		return
	}
	if err == nil {
		err = s.reload(data)
	} else {
		s.rejected()
	}
	if err != nil {
		s.log.Error("endpoints file rejected; the endpoints of the last good version stay registered",
			"error", err, "endpoints", s.set.len())
	}
}

// reload parses the file's content and makes its entries the desired
// state; it keeps the desired state when the file is invalid. It keeps the
// metrics and logs what changed.
func (s *Source) reload(data []byte) error {
	entries, err := parse(s.cfg.Pool, data, s.cfg.HostNames)
	if err != nil {
		s.rejected()
		return err
	}
	d := s.set.replace(entries)
	s.met.reloads.WithLabelValues(resultOK).Inc()
	s.met.valid.Set(1)
	s.met.entries.Set(float64(len(entries)))
	s.log.Info("endpoints file loaded", "endpoints", len(entries),
		"added", strings.Join(d.Added, ","), "changed", strings.Join(d.Changed, ","), "removed", strings.Join(d.Removed, ","))
	return nil
}

// rejected counts a file version that cannot be read or is invalid.
func (s *Source) rejected() {
	s.met.reloads.WithLabelValues(resultError).Inc()
	s.met.valid.Set(0)
}

// readFile reads the file at path (at most MaxFileSize bytes) and returns
// its content and version: a hash of the content, or the error.
func readFile(path string) ([]byte, string, error) {
	data, err := read(path)
	if err != nil {
		return nil, "error: " + err.Error(), err
	}
	sum := sha256.Sum256(data)
	return data, hex.EncodeToString(sum[:]), nil
}

func read(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("read %s: larger than %d bytes", path, MaxFileSize)
	}
	return data, nil
}
