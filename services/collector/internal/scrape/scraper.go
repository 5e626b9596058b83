package scrape

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/plugins/datalayer"
)

// Scraper scrapes a set of endpoints, one loop each (see the package
// documentation). Its methods are safe for concurrent use.
type Scraper struct {
	cfg       Config
	client    *http.Client
	ownClient bool
	tel       *telemetry
	log       *slog.Logger

	// polls is how served models are polled (SetModelsPoll);
	// defaultModels is the Scraper's own models-data-source.
	polls         inService[ModelsPoll]
	defaultModels *datalayer.ModelsSource
	// attributes are the other data sources of the pool's config
	// (SetAttributePolls).
	attributes inService[[]AttributePoll]
	// metricsAt is where metrics are scraped (SetMetricsSource).
	metricsAt atomic.Pointer[metricsEndpoint]

	// reconcile serializes SetEndpoints and Close, which wait for loops
	// with it held; mu guards targets and closed only briefly, for the
	// staleness collector too.
	reconcile sync.Mutex
	mu        sync.Mutex
	targets   map[string]*target // by pool/name
	closed    bool
}

// New returns a Scraper with no endpoints, and registers its metrics.
func New(cfg Config) (*Scraper, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("new scraper: %w", err)
	}
	s := &Scraper{cfg: cfg, client: cfg.Client, log: cfg.Logger, targets: map[string]*target{}}
	if s.client == nil {
		s.client, s.ownClient = NewHTTPClient(), true
	}
	s.metricsAt.Store(&metricsEndpoint{src: MetricsSource{Scheme: "http", Path: "/metrics"}, client: s.client})
	if s.defaultModels, err = datalayer.NewModelsSource("", datalayer.DefaultModelsParams()); err != nil {
		return nil, fmt.Errorf("new scraper: %w", err)
	}
	s.polls.store(ModelsPoll{Source: s.defaultModels, Extractor: datalayer.NewModelsExtractor(""), Interval: cfg.ModelsInterval})
	s.attributes.store(nil)
	if s.tel, err = newTelemetry(cfg.Registerer, s.snapshot); err != nil {
		return nil, fmt.Errorf("new scraper: %w", err)
	}
	return s, nil
}

// SetEndpoints makes eps the endpoints scraped: it starts loops for new
// endpoints, stops those of endpoints no longer listed (and waits for them),
// restarts the loop of an endpoint whose address or port changed, and
// leaves the others running as they are. Endpoints are told apart by pool
// and name; of two with the same, the later counts. An endpoint without
// name, pool, address or a valid port is logged and left out. After Close
// it does nothing.
func (s *Scraper) SetEndpoints(eps []*registryv1.Endpoint) {
	s.reconcile.Lock()
	defer s.reconcile.Unlock()

	want := make(map[string]*target, len(eps))
	for _, ep := range eps {
		t, err := newTarget(ep)
		if err != nil {
			s.log.Warn("endpoint not scraped", "pool", ep.GetPool(), "endpoint", ep.GetName(), "error", err.Error())
			continue
		}
		want[t.key] = t
	}

	var stop, start []*target
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	for key, cur := range s.targets {
		next, ok := want[key]
		switch {
		case !ok:
			stop = append(stop, cur)
			delete(s.targets, key)
			s.log.Info("endpoint removed", "pool", cur.pool, "endpoint", cur.name, "address", cur.address)
		case next.address != cur.address:
			stop = append(stop, cur)
			start = append(start, next)
			s.targets[key] = next
			s.log.Info("endpoint moved", "pool", cur.pool, "endpoint", cur.name, "address", next.address, "old_address", cur.address)
		}
	}
	for key, next := range want {
		if _, ok := s.targets[key]; !ok {
			start = append(start, next)
			s.targets[key] = next
			s.log.Info("endpoint added", "pool", next.pool, "endpoint", next.name, "address", next.address)
		}
	}
	n := len(s.targets)
	s.mu.Unlock()

	stopTargets(stop)
	for _, t := range start {
		s.start(t)
	}
	s.tel.endpoints.Set(float64(n))
}

// Close stops every loop and waits for them, unregisters the metrics and
// closes the idle connections of the client and the models source it made
// (not those of a ModelsPoll's source). Later calls do nothing.
func (s *Scraper) Close() {
	s.reconcile.Lock()
	defer s.reconcile.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	all := make([]*target, 0, len(s.targets))
	for _, t := range s.targets {
		all = append(all, t)
	}
	s.targets = nil
	s.mu.Unlock()

	stopTargets(all)
	s.tel.endpoints.Set(0)
	s.tel.unregister()
	if s.ownClient {
		s.client.CloseIdleConnections()
	}
	if at := s.metricsAt.Load(); at.own {
		at.client.CloseIdleConnections()
	}
	_ = s.defaultModels.Close()
}

// start runs t's loops.
func (s *Scraper) start(t *target) {
	ctx, cancel := context.WithCancel(context.Background())
	t.cancel = cancel
	log := s.log.With("pool", t.pool, "endpoint", t.name, "address", t.address)
	t.wg.Add(3)
	go func() {
		defer t.wg.Done()
		s.runMetrics(ctx, t, log)
	}()
	go func() {
		defer t.wg.Done()
		s.runModels(ctx, t, log)
	}()
	go func() {
		defer t.wg.Done()
		s.runAttributes(ctx, t, log)
	}()
}

// stopTargets stops the loops of ts, all at once, and waits for them.
func stopTargets(ts []*target) {
	for _, t := range ts {
		t.cancel()
	}
	for _, t := range ts {
		t.wg.Wait()
	}
}

// snapshot returns the current targets.
func (s *Scraper) snapshot() []*target {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*target, 0, len(s.targets))
	for _, t := range s.targets {
		out = append(out, t)
	}
	return out
}
