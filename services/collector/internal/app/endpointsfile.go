package app

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/services/collector/internal/filediscovery"
)

// fileSpec is an endpoints file a pool's config names, and how: the zero
// value names none.
type fileSpec struct {
	// path is the file (EndpointDiscovery.EndpointsFile).
	path string
	// once says that it is read once, not polled (watchFile: false).
	once bool
	// hostNames says that the file lists clusters, whose addresses may be
	// host names (multicluster-file-discovery).
	hostNames bool
	// plugin is the name of the discovery plugin, for the logs.
	plugin string
}

// discoveryOf returns the endpoints file a built config names: the one of
// the plugin its dataLayer.discovery.pluginRef refers to.
func discoveryOf(s *scheduling.Scheduler) fileSpec {
	desc := s.Describe()
	if desc.Data == nil || desc.Data.Discovery == "" {
		return fileSpec{}
	}
	d, ok := pluginsByName(s)[desc.Data.Discovery].(scheduling.EndpointDiscovery)
	if !ok {
		return fileSpec{}
	}
	hosts, _ := d.(interface{ HostNames() bool })
	return fileSpec{path: d.EndpointsFile(), once: !d.WatchFile(), hostNames: hosts != nil && hosts.HostNames(), plugin: desc.Data.Discovery}
}

// fileSource is a started endpoints-file discovery (*filediscovery.Source).
type fileSource interface{ Close() }

// configFiles makes the collector follow the endpoints file the pool's
// config names (a file-discovery in dataLayer.discovery), as it follows
// the one --endpoints-file names: the flag, when given, wins, and a config
// naming another file is logged as a warning and not followed.
//
// The config is followed as it changes: another file (or watchFile) is
// followed instead of the previous one once it is valid, the previous one
// kept until then and the new one tried again every interval; a config
// naming none stops the discovery, whose entries leave the registry one
// --member-ttl later (the leases they are bound to are no longer kept).
// The first version is different: a collector does not start with a bad
// file (sync fails), as with the flag.
type configFiles struct {
	// flag is --endpoints-file ("" when not given).
	flag string
	// check checks a file as start would read it; start starts following
	// one.
	check func(path string, hostNames bool) error
	start func(fileSpec) (fileSource, error)
	log   *slog.Logger

	wake chan struct{} // set signals run (one pending signal is enough)

	mu       sync.Mutex
	want     fileSpec // what the config names
	revision int64    // the config's revision that named it
	cur      fileSpec // what is followed (src), zero: nothing
	src      fileSource
	failed   fileSpec // want, when its last start failed (logged once)
	closed   bool
}

func newConfigFiles(flag string, check func(string, bool) error, start func(fileSpec) (fileSource, error), log *slog.Logger) *configFiles {
	return &configFiles{flag: flag, check: check, start: start, log: log, wake: make(chan struct{}, 1)}
}

// startFileDiscovery returns configFiles's start for the collector of cfg.
func startFileDiscovery(ctx context.Context, base filediscovery.Config) func(fileSpec) (fileSource, error) {
	return func(spec fileSpec) (fileSource, error) {
		c := base
		c.Path, c.Once, c.HostNames = spec.path, spec.once, spec.hostNames
		return filediscovery.Start(ctx, c)
	}
}

// set records the endpoints file a version of the config names (the zero
// fileSpec: none). It runs on the config watcher's goroutine; f may be nil.
func (f *configFiles) set(spec fileSpec, revision int64) {
	if f == nil {
		return
	}
	if f.flag != "" {
		if spec.path != "" && spec.path != f.flag {
			f.log.Warn("the pool's config names an endpoints file, --endpoints-file another: the flag's is followed",
				"endpoints_file", f.flag, "config_endpoints_file", spec.path, "plugin", spec.plugin, "revision", revision)
		}
		return
	}
	f.mu.Lock()
	f.want, f.revision = spec, revision
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// sync follows the file the config names, unless it is followed already,
// and stops following one the config no longer names. The file in force
// stays when the new one is not valid; the error says why.
func (f *configFiles) sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	want, rev := f.want, f.revision
	if f.closed || want == f.cur {
		return nil
	}
	if want.path == "" {
		f.src.Close()
		f.log.Info("the pool's config names no endpoints file: stopped following it; its entries leave the registry one --member-ttl later",
			"endpoints_file", f.cur.path, "revision", rev)
		f.src, f.cur = nil, fileSpec{}
		return nil
	}
	if err := f.check(want.path, want.hostNames); err != nil {
		return fmt.Errorf("dataLayer.discovery.pluginRef %q: %w", want.plugin, err)
	}
	if f.src != nil {
		f.src.Close()
		f.src, f.cur = nil, fileSpec{}
	}
	src, err := f.start(want)
	if err != nil {
		return fmt.Errorf("dataLayer.discovery.pluginRef %q: %w", want.plugin, err)
	}
	f.src, f.cur, f.failed = src, want, fileSpec{}
	f.log.Info("following the endpoints file the pool's config names", "endpoints_file", want.path,
		"plugin", want.plugin, "watch_file", !want.once, "revision", rev)
	return nil
}

// run syncs on every change of the config and every interval (so that a
// file that was not valid yet is taken once it is) until ctx ends.
func (f *configFiles) run(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
		case <-tick.C:
		}
		if err := f.sync(); err != nil {
			f.mu.Lock()
			first := f.failed != f.want
			f.failed = f.want
			cur, want, rev := f.cur, f.want, f.revision
			f.mu.Unlock()
			if first {
				f.log.Error("the endpoints file the pool's config names is not followed (yet): retried every --endpoints-file-interval",
					"endpoints_file", want.path, "plugin", want.plugin, "revision", rev, "followed", cur.path, "error", err)
			}
		}
	}
}

// close stops following the file; set and sync do nothing after it.
func (f *configFiles) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.src != nil {
		f.src.Close()
		f.src, f.cur = nil, fileSpec{}
	}
	f.closed = true
}
