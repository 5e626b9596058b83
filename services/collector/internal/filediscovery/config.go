package filediscovery

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/services/collector/internal/registrysync"
)

// Defaults of Config.
const (
	// DefaultInterval is the period of the file's polls.
	DefaultInterval = 2 * time.Second
	// MaxFileSize bounds the endpoints file (about 20,000 endpoints).
	MaxFileSize = 4 << 20
)

// ServicePrefix names a pool's election of the endpoints-file writer:
// endpoints-file-<pool>.
const ServicePrefix = "endpoints-file-"

// Config configures a Source.
type Config struct {
	// Pool is the pool whose registry the source writes. Required.
	Pool string
	// Path is the endpoints file. Required.
	Path string
	// Interval is the period of the file's polls (DefaultInterval when
	// zero). A change is applied once the file has stayed the same for one
	// more poll.
	Interval time.Duration
	// Once reads the file at Start only: it is not polled, and later
	// changes wait for the next Start (file-discovery's watchFile: false).
	Once bool
	// HostNames reads the file as multicluster-file-discovery does: the
	// entries are clusters, whose addresses may be host names
	// (FileEntry.ClusterEndpoint).
	HostNames bool

	// Etcd is the etcd client of the registry. Required.
	Etcd *clientv3.Client
	// ID is this replica's candidate id in the election. Required.
	ID string
	// LeaseTTL is the TTL of the leadership and of the leader's entries
	// (registrysync.DefaultLeaseTTL when zero; at least one second).
	LeaseTTL time.Duration
	// Resync is the period of the leader's whole-registry sync
	// (registrysync.DefaultResync when zero).
	Resync time.Duration
	// RequestTimeout bounds every etcd request
	// (registrysync.DefaultRequestTimeout when zero).
	RequestTimeout time.Duration
	// MinBackoff and MaxBackoff bound the delays between retries of a
	// failed sync or campaign (registrysync's defaults when zero).
	MinBackoff, MaxBackoff time.Duration
	// Registerer gets the source's metrics (none when nil); Close
	// unregisters them.
	Registerer prometheus.Registerer
	// Logger logs (slog.Default when nil).
	Logger *slog.Logger
}

// withDefaults returns c with the zero fields set, after checking it.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	if err := coord.ValidatePoolName(c.Pool); err != nil {
		errs = append(errs, err)
	}
	switch {
	case c.Path == "":
		errs = append(errs, errors.New("no endpoints file"))
	case c.Etcd == nil:
		errs = append(errs, errors.New("no etcd client"))
	case c.ID == "":
		errs = append(errs, errors.New("empty replica id"))
	case c.Interval < 0 || c.Resync < 0:
		errs = append(errs, fmt.Errorf("negative poll interval %s or resync %s", c.Interval, c.Resync))
	case c.LeaseTTL != 0 && c.LeaseTTL < time.Second:
		errs = append(errs, fmt.Errorf("lease TTL %s is shorter than 1s", c.LeaseTTL))
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("endpoints file discovery: %w", err)
	}
	c.Interval = orDefault(c.Interval, DefaultInterval)
	c.Resync = orDefault(c.Resync, registrysync.DefaultResync)
	c.LeaseTTL = orDefault(c.LeaseTTL, registrysync.DefaultLeaseTTL)
	c.RequestTimeout = orDefault(c.RequestTimeout, registrysync.DefaultRequestTimeout)
	c.MinBackoff = orDefault(c.MinBackoff, registrysync.DefaultMinBackoff)
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = max(registrysync.DefaultMaxBackoff, c.MinBackoff)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
