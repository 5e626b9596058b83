// Package schedconfig holds a picker's scheduling configuration: it builds a
// scheduler from each new EndpointPickerConfig version, swaps it in when the
// version is valid, keeps the previous one (and says why) when it is not,
// and retires replaced schedulers once no cycle uses them.
package schedconfig

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/scheduling"
)

// Sources of a configuration version.
const (
	SourceDefault = "default"
	SourceFile    = "file"
	SourceEtcd    = "etcd"
)

// Version is one version of the pool's EndpointPickerConfig.
type Version struct {
	// Source is where it came from (SourceDefault, SourceFile, SourceEtcd).
	Source string
	// Revision is the etcd mod revision (0 for other sources).
	Revision int64
	// Data is the YAML; empty means the built-in default configuration.
	Data []byte
}

// Loader holds the current scheduler. Its methods are safe for concurrent
// use.
type Loader struct {
	pool, replica string
	opts          []scheduling.Option
	log           *slog.Logger
	onStatus      func(*eventsv1.ConfigStatus)
	onApplied     func(*scheduling.Scheduler)
	metrics       *metrics

	mu      sync.Mutex // serializes Apply
	cur     atomic.Pointer[active]
	retired sync.WaitGroup
}

// active is a scheduler in service. Cycles hold its read lock; retiring it
// takes the write lock, so it is closed only once no cycle uses it.
type active struct {
	mu      sync.RWMutex
	retired bool
	sched   *scheduling.Scheduler
	version Version
}

// Lease is the use of the current scheduler by one cycle; Release ends it.
type Lease struct{ a *active }

// Scheduler returns the leased scheduler.
func (l Lease) Scheduler() *scheduling.Scheduler { return l.a.sched }

// Version returns the configuration version of the leased scheduler.
func (l Lease) Version() Version { return l.a.version }

// Release ends the lease.
func (l Lease) Release() { l.a.mu.RUnlock() }

// Options configure a Loader.
type Options struct {
	Pool, Replica string
	// Scheduler options for every scheduler built (logger, metrics, ...).
	SchedulerOptions []scheduling.Option
	Logger           *slog.Logger
	// OnStatus receives a status for every version applied (accepted or
	// rejected); it must not block.
	OnStatus func(*eventsv1.ConfigStatus)
	// Metrics registers the loader's metrics (nil: not registered).
	Metrics Registerer
	// OnApplied, when set, is called with every scheduler Apply puts in
	// force (after it is in force).
	OnApplied func(*scheduling.Scheduler)
}

// New builds the first scheduler from v. Unlike Apply, an invalid first
// version is an error: there is nothing to keep.
func New(v Version, o Options) (*Loader, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	l := &Loader{pool: o.Pool, replica: o.Replica, opts: o.SchedulerOptions, log: o.Logger, onStatus: o.OnStatus, onApplied: o.OnApplied, metrics: newMetrics(o.Metrics)}
	s, err := l.build(v, nil)
	if err != nil {
		l.report(v, err, nil)
		return nil, err
	}
	l.cur.Store(&active{sched: s, version: v})
	l.report(v, nil, s)
	return l, nil
}

// Acquire leases the current scheduler for one cycle. A goroutine must not
// Acquire again while it holds a lease: a retirement waiting for the first
// lease would block the second (read locks do not nest under a waiting
// writer).
func (l *Loader) Acquire() Lease {
	for {
		a := l.cur.Load()
		a.mu.RLock()
		if !a.retired {
			return Lease{a}
		}
		// Swapped out and retired between the load and the lock.
		a.mu.RUnlock()
	}
}

// Current returns the version in force.
func (l *Loader) Current() Version { return l.cur.Load().version }

// ErrUnchanged is returned by Apply for a version whose content is the one
// in force.
var ErrUnchanged = errors.New("configuration unchanged")

// Apply builds a scheduler from v and puts it in force, carrying the state
// of stateful plugins over. A version that fails to parse or build is
// rejected: the error is returned, logged and reported, and the previous
// scheduler stays.
func (l *Loader) Apply(v Version) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.apply(v, true)
	switch {
	case err == nil:
		l.metrics.newestInvalid.Set(0)
	case !errors.Is(err, ErrUnchanged):
		l.metrics.newestInvalid.Set(1)
		l.metrics.newestRevision.Set(float64(v.Revision))
	}
	return err
}

// apply puts v in force if it builds; newest says that v is the newest
// version (not an older one recovered from the history), whose rejection
// is logged and reported. l.mu is held.
func (l *Loader) apply(v Version, newest bool) error {
	prev := l.cur.Load()
	if bytes.Equal(prev.version.Data, v.Data) {
		return ErrUnchanged
	}
	s, err := l.build(v, prev.sched)
	if err != nil {
		if newest {
			l.log.Error("endpoint picker config rejected; keeping the previous one", "pool", l.pool, "source", v.Source,
				"revision", v.Revision, "in_force_revision", prev.version.Revision, "error", err)
			l.report(v, err, nil)
		}
		return err
	}
	l.cur.Store(&active{sched: s, version: v})
	l.log.Info("endpoint picker config loaded", "pool", l.pool, "source", v.Source, "revision", v.Revision)
	if newest {
		l.metrics.newestRevision.Set(float64(v.Revision))
	}
	l.report(v, nil, s)
	l.retire(prev)
	if l.onApplied != nil {
		l.onApplied(s)
	}
	return nil
}

func (l *Loader) build(v Version, prev *scheduling.Scheduler) (*scheduling.Scheduler, error) {
	cfg := scheduling.DefaultConfig()
	if len(bytes.TrimSpace(v.Data)) > 0 {
		var err error
		if cfg, err = scheduling.ParseConfig(v.Data); err != nil {
			return nil, fmt.Errorf("parse %s config (revision %d): %w", v.Source, v.Revision, err)
		}
	}
	opts := l.opts
	if prev != nil {
		opts = append(opts[:len(opts):len(opts)], scheduling.WithPrevious(prev))
	}
	s, err := scheduling.New(cfg, opts...)
	if err != nil {
		return nil, fmt.Errorf("build %s config (revision %d): %w", v.Source, v.Revision, err)
	}
	return s, nil
}

// retire closes a replaced scheduler once the cycles using it are done.
func (l *Loader) retire(a *active) {
	l.retired.Add(1)
	go func() {
		defer l.retired.Done()
		a.mu.Lock()
		a.retired = true
		a.mu.Unlock()
		if err := a.sched.Close(); err != nil {
			l.log.Warn("closing a replaced scheduler", "pool", l.pool, "error", err)
		}
	}()
}

// Close waits for retired schedulers to close, then closes the one in force
// once no cycle uses it. Call it after the last Apply.
func (l *Loader) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.retired.Wait()
	a := l.cur.Load()
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sched.Close()
}

func (l *Loader) report(v Version, err error, s *scheduling.Scheduler) {
	st := &eventsv1.ConfigStatus{
		Pool:     l.pool,
		Replica:  l.replica,
		Revision: v.Revision,
		Source:   v.Source,
		Accepted: err == nil,
		Time:     timestamppb.New(time.Now()),
	}
	if err != nil {
		st.Error = err.Error()
		l.metrics.rejected.Inc()
	} else {
		st.Warnings = s.Describe().Warnings
		l.metrics.accepted.Inc()
		l.metrics.revision.Set(float64(v.Revision))
	}
	if l.onStatus != nil {
		l.onStatus(st)
	}
}
