// Package endpoints keeps a picker's view of its pool: the endpoints of the
// etcd registry merged with the latest metrics the collector publishes, as
// immutable snapshots that scheduling cycles read without locks.
package endpoints

import (
	"cmp"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/scheduling"
)

// Defaults of Options.
const (
	// DefaultMaxFailures is how many scrapes in a row may fail before an
	// endpoint stops being a candidate.
	DefaultMaxFailures = 3
	// DefaultCoalesce is how long metrics updates may wait to be merged
	// into one new snapshot.
	DefaultCoalesce = time.Millisecond
)

// Options configure a Set.
type Options struct {
	// MaxFailures: an endpoint whose last MaxFailures scrapes (or more)
	// failed is not a candidate until a scrape succeeds. Default
	// DefaultMaxFailures; negative = never excluded.
	MaxFailures int
	// Coalesce bounds how long a metrics update waits for others to be
	// applied with it. Default DefaultCoalesce.
	Coalesce time.Duration
	// OnRemove is called (outside the Set's lock, in order) with the name
	// of every endpoint that leaves the registry.
	OnRemove func(name string)
}

// View is one immutable snapshot of the pool.
type View struct {
	// Candidates are the ready endpoints, sorted by name.
	Candidates []*scheduling.Endpoint
	// Registered counts every registered endpoint, ready or not.
	Registered int
	// Revision is the registry revision the view reflects.
	Revision int64

	byName     map[string]*scheduling.Endpoint
	byAddress  map[string]*scheduling.Endpoint
	baseModels map[string]bool
	served     map[string]bool
	// unknownBase: the models endpoints registered without a model serve
	unknownBase map[string]bool
}

// Lookup returns a registered endpoint by name (ready or not).
func (v *View) Lookup(name string) (*scheduling.Endpoint, bool) {
	e, ok := v.byName[name]
	return e, ok
}

// ByAddress returns a registered endpoint by host:port.
func (v *View) ByAddress(hostPort string) (*scheduling.Endpoint, bool) {
	e, ok := v.byAddress[hostPort]
	return e, ok
}

// Names returns the names of every registered endpoint, sorted.
func (v *View) Names() []string {
	out := make([]string, 0, len(v.byName))
	for name := range v.byName {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// IsAdapter reports whether model is served only as a LoRA adapter: some
// endpoint serves it, none as its base model, and none whose base model
// is unknown (registered without a model: its /v1/models lists the base
// model beside its adapters, alike).
func (v *View) IsAdapter(model string) bool {
	return v.served[model] && !v.baseModels[model] && !v.unknownBase[model]
}

// Serves reports whether some registered endpoint serves model.
func (v *View) Serves(model string) bool { return v.served[model] }

// Models returns every model name the pool serves, sorted.
func (v *View) Models() []string {
	out := make([]string, 0, len(v.served))
	for m := range v.served {
		out = append(out, m)
	}
	slices.Sort(out)
	return out
}

// Set merges registry snapshots and metrics into Views. Its methods are
// safe for concurrent use.
type Set struct {
	opts Options

	mu        sync.Mutex
	registry  map[string]*registryv1.Endpoint
	metrics   map[string]*eventsv1.PodMetrics
	built     map[string]built // the endpoints of the current view
	revision  int64
	timer     *time.Timer // pending coalesced rebuild
	closed    bool
	removedMu sync.Mutex // orders OnRemove calls

	view atomic.Pointer[View]
}

// New returns an empty Set.
func New(opts Options) *Set {
	if opts.MaxFailures == 0 {
		opts.MaxFailures = DefaultMaxFailures
	}
	if opts.Coalesce <= 0 {
		opts.Coalesce = DefaultCoalesce
	}
	s := &Set{opts: opts, registry: map[string]*registryv1.Endpoint{}, metrics: map[string]*eventsv1.PodMetrics{}, built: map[string]built{}}
	s.view.Store(&View{})
	return s
}

// View returns the current snapshot.
func (s *Set) View() *View { return s.view.Load() }

// SetRegistry replaces the registered endpoints (a registry snapshot) and
// publishes a new view at once. Metrics of endpoints that left are dropped.
func (s *Set) SetRegistry(revision int64, eps map[string]*registryv1.Endpoint) {
	s.mu.Lock()
	var removed []string
	for name := range s.registry {
		if _, ok := eps[name]; !ok {
			removed = append(removed, name)
			delete(s.metrics, name)
		}
	}
	s.registry = make(map[string]*registryv1.Endpoint, len(eps))
	for name, ep := range eps {
		s.registry[name] = ep
	}
	s.revision = revision
	s.rebuildLocked()
	s.removedMu.Lock()
	s.mu.Unlock()
	defer s.removedMu.Unlock()
	if s.opts.OnRemove != nil {
		slices.Sort(removed)
		for _, name := range removed {
			s.opts.OnRemove(name)
		}
	}
}

// UpdateMetrics records an endpoint's latest scrape; a scrape older than
// the one held is ignored. The new view is published within the coalescing
// delay.
func (s *Set) UpdateMetrics(m *eventsv1.PodMetrics) {
	name := m.GetEndpoint()
	if name == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.metrics[name]; ok && m.GetTime().AsTime().Before(old.GetTime().AsTime()) {
		return
	}
	s.metrics[name] = m
	if _, registered := s.registry[name]; !registered || s.timer != nil || s.closed {
		return
	}
	s.timer = time.AfterFunc(s.opts.Coalesce, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.timer = nil
		if !s.closed {
			s.rebuildLocked()
		}
	})
}

// Flush publishes a view with every update so far at once.
func (s *Set) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	s.rebuildLocked()
}

// Close stops a pending rebuild; the Set keeps its last view.
func (s *Set) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
}

// built is a scheduling endpoint and what it was built from. Registry
// snapshots share unchanged entries, so pointer equality means unchanged.
type built struct {
	reg *registryv1.Endpoint
	m   *eventsv1.PodMetrics
	e   *scheduling.Endpoint
}

// rebuildLocked builds and publishes a view. The caller holds s.mu.
func (s *Set) rebuildLocked() {
	v := &View{
		Registered: len(s.registry),
		Revision:   s.revision,
		byName:     make(map[string]*scheduling.Endpoint, len(s.registry)),
		byAddress:  make(map[string]*scheduling.Endpoint, len(s.registry)),
		baseModels: map[string]bool{}, unknownBase: map[string]bool{},
		served:     map[string]bool{},
		Candidates: make([]*scheduling.Endpoint, 0, len(s.registry)),
	}
	for name := range s.built {
		if _, ok := s.registry[name]; !ok {
			delete(s.built, name)
		}
	}
	for name, reg := range s.registry {
		m := s.metrics[name]
		b, ok := s.built[name]
		if !ok || b.reg != reg || b.m != m {
			b = built{reg: reg, m: m, e: newEndpoint(reg, m)}
			s.built[name] = b
		}
		e := b.e
		v.byName[name] = e
		v.byAddress[e.HostPort()] = e
		if reg.GetModel() != "" {
			v.baseModels[reg.GetModel()] = true
			v.served[reg.GetModel()] = true
		}
		for _, model := range e.Models {
			v.served[model] = true
			if reg.GetModel() == "" {
				v.unknownBase[model] = true
			}
		}
		if s.ready(m) {
			v.Candidates = append(v.Candidates, e)
		}
	}
	slices.SortFunc(v.Candidates, func(a, b *scheduling.Endpoint) int { return cmp.Compare(a.Name, b.Name) })
	s.view.Store(v)
}

// ready says whether an endpoint with these metrics may be scheduled.
func (s *Set) ready(m *eventsv1.PodMetrics) bool {
	return m == nil || s.opts.MaxFailures < 0 || int(m.GetConsecutiveFailures()) < s.opts.MaxFailures
}

// newEndpoint builds the scheduling endpoint of a registry entry and its
// latest metrics. The served models are the collector's (from /v1/models)
// when it has them, else the registry's, else the base model.
func newEndpoint(reg *registryv1.Endpoint, m *eventsv1.PodMetrics) *scheduling.Endpoint {
	e := scheduling.NewEndpoint(reg.GetName(), reg.GetAddress(), int(reg.GetPort()), reg.GetLabels())
	e.Metrics = toMetrics(m)
	e.NodeAddress = reg.GetNodeAddress()
	switch {
	case len(m.GetServedModels()) > 0:
		e.Models = m.GetServedModels()
	case len(reg.GetServedModels()) > 0:
		e.Models = reg.GetServedModels()
	case reg.GetModel() != "":
		e.Models = []string{reg.GetModel()}
	}
	return e
}

// toMetrics converts a scrape into the scheduler's metrics; nil for none.
func toMetrics(m *eventsv1.PodMetrics) *scheduling.Metrics {
	if m == nil {
		return nil
	}
	at := m.GetTime().AsTime()
	if m.GetLastSuccess() != nil {
		at = m.GetLastSuccess().AsTime()
	}
	return &scheduling.Metrics{
		WaitingRequests: int(m.GetWaitingRequests()),
		RunningRequests: int(m.GetRunningRequests()),
		KVCacheUsage:    m.GetKvCacheUsage(),
		BlockSize:       int(m.GetBlockSize()),
		NumGPUBlocks:    int(m.GetNumGpuBlocks()),
		MaxLoRAs:        int(m.GetMaxLora()),
		RunningLoRAs:    m.GetRunningLoraAdapters(),
		WaitingLoRAs:    m.GetWaitingLoraAdapters(),
		PromptTokens:    m.GetPromptTokensTotal(),
		OutputTokens:    m.GetGenerationTokensTotal(),
		UpdatedAt:       at,
		Attributes:      m.GetAttributes(),
	}
}

// HostPort formats a registry endpoint's address as the scheduler does.
func HostPort(ep *registryv1.Endpoint) string {
	return net.JoinHostPort(ep.GetAddress(), strconv.Itoa(int(ep.GetPort())))
}
