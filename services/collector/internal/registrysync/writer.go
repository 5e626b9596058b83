package registrysync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/libs/retry"
)

// LabelDiscoveredBy is the label that marks the registry entries a Writer
// owns; its value is the Writer's Config.Owner. A Writer never updates or
// deletes an entry without its own value.
const LabelDiscoveredBy = "hermod.io/discovered-by"

// Defaults of the sources' settings that end up in Config.
const (
	DefaultResync         = time.Minute
	DefaultLeaseTTL       = 10 * time.Second
	DefaultRequestTimeout = 5 * time.Second
	DefaultMinBackoff     = 100 * time.Millisecond
	DefaultMaxBackoff     = 5 * time.Second
)

// errLeaseLost ends a term whose entries' lease expired or was revoked.
var errLeaseLost = errors.New("the lease of the discovered entries expired or was revoked")

// Desired is a source's desired state of the registry.
type Desired interface {
	// Desired returns the entries to hold, by name, each labelled
	// LabelDiscoveredBy=Config.Owner. The Writer does not change them.
	Desired() map[string]*registryv1.Endpoint
	// Changed receives a value whenever Desired may return something new.
	Changed() <-chan struct{}
}

// Metrics are the source's metrics that a Writer keeps. Nil ones are not
// kept.
type Metrics struct {
	// Leader is 1 while the Writer leads, else 0.
	Leader prometheus.Gauge
	// Endpoints is the number of entries the Writer holds as the leader (0
	// when it does not lead).
	Endpoints prometheus.Gauge
	// SyncErrors counts failed attempts to write the registry.
	SyncErrors prometheus.Counter
}

// Config configures a Writer. Every field is required.
type Config struct {
	// Pool is the pool whose registry the Writer writes.
	Pool string
	// Service names the election: /hermod/election/<Service>.
	Service string
	// Owner is the value of LabelDiscoveredBy on the Writer's entries.
	Owner string
	// Etcd is the etcd client of the registry.
	Etcd *clientv3.Client
	// ID is this replica's candidate id in the election.
	ID string
	// LeaseTTL is the TTL of the leadership (at least one second); the
	// leader's entries live twice as long without it.
	LeaseTTL time.Duration
	// Resync is the period of the leader's whole-registry sync.
	Resync time.Duration
	// RequestTimeout bounds every etcd request.
	RequestTimeout time.Duration
	// MinBackoff and MaxBackoff bound the delays between retries of a
	// failed sync or campaign.
	MinBackoff, MaxBackoff time.Duration
	// Metrics are kept by the Writer.
	Metrics Metrics
	// Logger logs.
	Logger *slog.Logger
}

// Writer keeps the entries it owns in a pool's registry equal to a desired
// state while it leads; see the package documentation.
type Writer struct {
	cfg     Config
	desired Desired
	leading atomic.Bool
}

// New returns a Writer of desired; Run runs it.
func New(cfg Config, desired Desired) (*Writer, error) {
	switch {
	case cfg.Etcd == nil:
		return nil, errors.New("registry writer: no etcd client")
	case desired == nil:
		return nil, errors.New("registry writer: no desired state")
	case cfg.Pool == "" || cfg.Service == "" || cfg.Owner == "" || cfg.ID == "":
		return nil, fmt.Errorf("registry writer: pool %q, service %q, owner %q and id %q must all be set", cfg.Pool, cfg.Service, cfg.Owner, cfg.ID)
	case cfg.LeaseTTL < time.Second || cfg.Resync <= 0 || cfg.RequestTimeout <= 0 || cfg.MinBackoff <= 0 || cfg.MaxBackoff < cfg.MinBackoff:
		return nil, fmt.Errorf("registry writer: lease TTL %s (at least 1s), resync %s, request timeout %s and backoff %s..%s must be positive",
			cfg.LeaseTTL, cfg.Resync, cfg.RequestTimeout, cfg.MinBackoff, cfg.MaxBackoff)
	case cfg.Logger == nil:
		return nil, errors.New("registry writer: no logger")
	}
	if cfg.Metrics.Leader == nil {
		cfg.Metrics.Leader = prometheus.NewGauge(prometheus.GaugeOpts{Name: "unused_leader"})
	}
	if cfg.Metrics.Endpoints == nil {
		cfg.Metrics.Endpoints = prometheus.NewGauge(prometheus.GaugeOpts{Name: "unused_endpoints"})
	}
	if cfg.Metrics.SyncErrors == nil {
		cfg.Metrics.SyncErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "unused_sync_errors"})
	}
	return &Writer{cfg: cfg, desired: desired}, nil
}

// Leading says whether the Writer is the leader of its service.
func (w *Writer) Leading() bool { return w.leading.Load() }

func (w *Writer) coordOptions() []coord.Option {
	return []coord.Option{
		coord.WithLogger(w.cfg.Logger),
		coord.WithRequestTimeout(w.cfg.RequestTimeout),
		coord.WithRetryBackoff(w.cfg.MinBackoff, w.cfg.MaxBackoff),
	}
}

// Run campaigns for the leadership and leads, again and again, until ctx
// ends or the etcd client is closed. A leader resigns when Run returns, so
// that another replica takes over at once; its entries stay until that
// replica rewrites them, or the lease expires (two TTLs) if none does.
func (w *Writer) Run(ctx context.Context) {
	log := w.cfg.Logger
	bo := retry.Backoff(w.cfg.MinBackoff, w.cfg.MaxBackoff)
	for {
		l, err := coord.Campaign(ctx, w.cfg.Etcd, w.cfg.Service, w.cfg.ID, w.cfg.LeaseTTL, w.coordOptions()...)
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return
			case w.cfg.Etcd.Ctx().Err() != nil:
				log.Error("etcd client closed; discovery stopped", "error", err)
				return
			}
			d := bo.NextBackOff()
			log.Warn("discovery campaign failed; retrying", "error", err, "retry_in", d)
			if !retry.Sleep(ctx, d) {
				return
			}
			continue
		}
		synced, err := w.lead(ctx, l)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.RequestTimeout)
		if cerr := l.Close(cctx); cerr != nil {
			log.Debug("discovery resign failed; the lease expires", "error", cerr)
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		if synced {
			bo.Reset()
		}
		d := bo.NextBackOff()
		log.Warn("discovery leadership ended; campaigning again", "error", err, "retry_in", d)
		if !retry.Sleep(ctx, d) {
			return
		}
	}
}

// lead writes the registry while l holds: the whole of it first, then after
// every change of the desired state and every resync period, retrying
// failures with backoff. It returns when ctx ends (nil), the leadership ends
// or the entries' lease is lost; synced says whether a sync succeeded.
func (w *Writer) lead(ctx context.Context, l *coord.Leadership) (synced bool, err error) {
	met := w.cfg.Metrics
	w.leading.Store(true)
	met.Leader.Set(1)
	defer func() {
		w.leading.Store(false)
		met.Leader.Set(0)
		met.Endpoints.Set(0)
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // also ends the keepalive of the entries' lease
	log := w.cfg.Logger.With("leader_key", l.Key())
	log.Info("discovery leader: writing the registry")

	lease, ka, err := w.grant(ctx, l)
	if err != nil {
		return false, err
	}
	reg := newRegistry(w.cfg.Etcd, w.cfg.Pool, w.cfg.Owner, l, lease, w.cfg.RequestTimeout, log)
	tick := time.NewTicker(w.cfg.Resync)
	defer tick.Stop()
	bo := retry.Backoff(w.cfg.MinBackoff, w.cfg.MaxBackoff)
	var retry <-chan time.Time // set while backing off
	full, dirty := true, true
	for {
		if dirty && retry == nil {
			err := w.syncOnce(ctx, reg, full)
			met.Endpoints.Set(float64(len(reg.owned)))
			if err == nil {
				full, dirty, synced = false, false, true
				bo.Reset()
			} else {
				if ctx.Err() != nil {
					return synced, nil
				}
				if errors.Is(err, errFenced) {
					return synced, err
				}
				met.SyncErrors.Inc()
				if lerr := l.Err(); lerr != nil {
					return synced, fmt.Errorf("%w (last sync: %w)", lerr, err)
				}
				d := bo.NextBackOff()
				log.Warn("registry sync failed; retrying", "error", err, "retry_in", d)
				// What a failed write did is unknown: list again.
				full = true
				retry = time.After(d)
			}
		}
		select {
		case <-ctx.Done():
			return synced, nil
		case <-l.Done():
			return synced, l.Err()
		case _, ok := <-ka:
			if !ok {
				return synced, errLeaseLost
			}
		case <-w.desired.Changed():
			dirty = true
		case <-tick.C:
			full, dirty = true, true
		case <-retry:
			retry = nil
		}
	}
}

// syncOnce lists the registry when full, then makes it equal to the
// desired state.
func (w *Writer) syncOnce(ctx context.Context, reg *registry, full bool) error {
	if full {
		if err := reg.load(ctx); err != nil {
			return err
		}
	}
	return reg.sync(ctx, w.desired.Desired())
}

// entriesTTLFactor is the entries' lease TTL over the leadership's: the
// entries of a leader that died outlive its election key, so that the next
// leader, elected once that key expires, rewrites them under its own lease
// before they expire. With equal TTLs the keepalives' phases decide which
// of the two leases expires first, and a pod that stayed ready could drop
// out of the registry during the handover.
const entriesTTLFactor = 2

// grant grants the term's lease, which the entries are bound to, and keeps
// it alive until ctx ends; it retries with backoff while the leadership
// holds.
func (w *Writer) grant(ctx context.Context, l *coord.Leadership) (clientv3.LeaseID, <-chan *clientv3.LeaseKeepAliveResponse, error) {
	ttl := int64(math.Ceil(entriesTTLFactor * w.cfg.LeaseTTL.Seconds()))
	bo := retry.Backoff(w.cfg.MinBackoff, w.cfg.MaxBackoff)
	for {
		gctx, cancel := context.WithTimeout(ctx, w.cfg.RequestTimeout)
		g, err := w.cfg.Etcd.Grant(gctx, ttl)
		cancel()
		if err == nil {
			ka, kerr := w.cfg.Etcd.KeepAlive(ctx, g.ID)
			if kerr == nil {
				return g.ID, ka, nil
			}
			err = kerr
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.RequestTimeout)
			_, _ = w.cfg.Etcd.Revoke(rctx, g.ID)
			cancel()
		}
		if ctx.Err() != nil {
			return 0, nil, ctx.Err()
		}
		if lerr := l.Err(); lerr != nil {
			return 0, nil, lerr
		}
		w.cfg.Metrics.SyncErrors.Inc()
		d := bo.NextBackOff()
		w.cfg.Logger.Warn("grant of the discovered entries' lease failed; retrying", "error", err, "retry_in", d)
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		case <-l.Done():
			return 0, nil, l.Err()
		}
	}
}
