// Package leastrequest is valkey-least-request-picker: the global view of
// in-flight requests kept in Valkey/Redis (libs/inflight), for fleets
// behind many gateways and picker replicas.
//
// It is a picker, not a scorer: the pick and the count it takes must be
// one atomic step, or two replicas picking at the same moment would both
// take the same idle endpoint (the local-view problem all over again). It
// runs over the endpoints the profile's filters left, least in flight
// first; the profile's scorers order the candidates, so they break ties
// (an equally loaded endpoint with the prompt's prefix wins). Fallbacks
// beyond the first target follow by total score.
//
// When the server cannot be reached the picker falls back to the best
// total score (configure active-request-scorer in the profile, and that is
// the event-projected view of in-flight requests), counts it in
// hermod_picker_inflight_fallback_total, logs the change, and goes back to
// the server once it answers again (tried at most every retryInterval).
package leastrequest

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermod/hermod/libs/inflight"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/telemetry"
)

// Type is the plugin's registered type.
const Type = "valkey-least-request-picker"

// StoreService names the service the embedding process provides: the
// pool's Counter, an *inflight.Store (the picker's
// --inflight-valkey-address).
const StoreService scheduling.ServiceKey[Counter] = "inflight-store"

// Counter is the global in-flight count (libs/inflight.Store).
type Counter interface {
	Pick(ctx context.Context, requestID string, candidates []string, limit int) (string, int64, error)
	Release(ctx context.Context, requestIDs ...string) (int, error)
}

// Offline is a Counter that is never reachable: configs load where no
// server runs (validation); every pick falls back to scores.
type Offline struct{}

var errOffline = errors.New("no in-flight server here")

// Pick implements Counter.
func (Offline) Pick(context.Context, string, []string, int) (string, int64, error) {
	return "", 0, errOffline
}

// Release implements Counter.
func (Offline) Release(context.Context, ...string) (int, error) { return 0, errOffline }

func init() {
	scheduling.Register(scheduling.Registration{Type: Type, New: factory})
}

// Params are the plugin's parameters.
type Params struct {
	// MaxInflightPerEndpoint, when positive, is the most requests an
	// endpoint may have in flight: a request whose candidates are all at
	// it is shed.
	MaxInflightPerEndpoint int `json:"maxInflightPerEndpoint"`
	// MaxNumOfEndpoints is how many targets to return, the atomic pick
	// first and fallbacks by score after it (default 1).
	MaxNumOfEndpoints int `json:"maxNumOfEndpoints"`
	// Timeout bounds the server's answer before falling back (default
	// 50ms).
	Timeout scheduling.Duration `json:"timeout"`
}

// retryInterval is how long the picker stays on the fallback after the
// server failed before trying it again.
const retryInterval = time.Second

// Picker implements the plugin.
type Picker struct {
	scheduling.Named
	params  Params
	store   Counter
	log     *slog.Logger
	state   *health
	metrics pickerMetrics
	// releases feeds the releaser: completions end their leases off the
	// caller's path (the event stream's callback), batched.
	releases chan string
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
}

// Release batching: at most releaseBatch ids a round trip, releaseQueue
// waiting (past it a completion's lease is left to expire, as one whose
// release failed, and counted).
const (
	releaseBatch = 256
	releaseQueue = 16384
)

// health is the server's state as this process sees it; a reloaded
// configuration's picker shares its predecessor's.
type health struct {
	mu        sync.Mutex
	down      bool
	retryAt   time.Time
	fallbacks atomic.Uint64
}

// pickerMetrics are the plugin's metrics.
type pickerMetrics struct {
	fallbackTotal prometheus.Counter
	serverUp      prometheus.Gauge
	pickSeconds   prometheus.Histogram
	// releaseDropped counts completions whose release queue was full.
	releaseDropped prometheus.Counter
}

func newPickerMetrics(h scheduling.Handle) pickerMetrics {
	return pickerMetrics{
		fallbackTotal:  scheduling.Metric(h, telemetry.NewCounter("hermod_picker_inflight_fallback_total", "Picks valkey-least-request-picker took from scores because the in-flight server did not answer.")),
		serverUp:       scheduling.Metric(h, telemetry.NewGauge("hermod_picker_inflight_server_up", "1 while valkey-least-request-picker picks through the in-flight server, 0 while it falls back.")),
		releaseDropped: scheduling.Metric(h, telemetry.NewCounter("hermod_picker_inflight_release_dropped_total", "Completions whose in-flight lease was left to expire because the release queue was full.")),
		pickSeconds:    scheduling.Metric(h, telemetry.NewHistogram("hermod_picker_inflight_pick_seconds", "Round trip of the atomic pick on the in-flight server.", []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05})),
	}
}

func factory(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	p := Params{MaxNumOfEndpoints: 1, Timeout: scheduling.Duration(50 * time.Millisecond)}
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	if p.MaxNumOfEndpoints < 1 {
		return nil, scheduling.ParamErrorf("maxNumOfEndpoints", "must be at least 1 (got %d)", p.MaxNumOfEndpoints)
	}
	if p.MaxInflightPerEndpoint < 0 {
		return nil, scheduling.ParamErrorf("maxInflightPerEndpoint", "must not be negative (got %d)", p.MaxInflightPerEndpoint)
	}
	if p.Timeout <= 0 {
		return nil, scheduling.ParamErrorf("timeout", "must be positive")
	}
	store, ok := StoreService.Lookup(h)
	if !ok {
		return nil, errors.New("needs the in-flight server: start the picker with --inflight-valkey-address")
	}
	m := newPickerMetrics(h)
	m.serverUp.Set(1)
	pk := &Picker{Named: scheduling.Named{Type: Type, Name: name}, params: p, store: store, log: h.Logger(), state: &health{}, metrics: m,
		releases: make(chan string, releaseQueue), stop: make(chan struct{}), done: make(chan struct{})}
	go pk.releaser()
	return pk, nil
}

// Close implements io.Closer: the releaser sends what is queued and
// stops.
func (p *Picker) Close() error {
	p.once.Do(func() { close(p.stop) })
	<-p.done
	return nil
}

// releaser ends queued leases, a batch a round trip, until Close; what
// is queued then still goes.
func (p *Picker) releaser() {
	defer close(p.done)
	batch := make([]string, 0, releaseBatch)
	for {
		select {
		case id := <-p.releases:
			p.release(p.drain(append(batch[:0], id)))
		case <-p.stop:
			for {
				if batch = p.drain(batch[:0]); len(batch) == 0 {
					return
				}
				p.release(batch)
			}
		}
	}
}

// drain adds queued ids to batch, up to releaseBatch.
func (p *Picker) drain(batch []string) []string {
	for len(batch) < releaseBatch {
		select {
		case id := <-p.releases:
			batch = append(batch, id)
		default:
			return batch
		}
	}
	return batch
}

func (p *Picker) release(ids []string) {
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := p.store.Release(ctx, ids...); err != nil {
		// the leases expire and are repaired
		p.log.Debug("in-flight release failed", "requests", len(ids), "error", err)
	}
}

// Parameters implements scheduling.Plugin.
func (p *Picker) Parameters() any { return p.params }

// InheritState implements scheduling.StateInheritor: the server's health
// carries over a reload.
func (p *Picker) InheritState(prev scheduling.Plugin) bool {
	q, ok := prev.(*Picker)
	if ok {
		p.state = q.state
	}
	return ok
}

// Pick implements scheduling.Picker.
func (p *Picker) Pick(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, eps []*scheduling.Endpoint, totals []float64, dst []int) []int {
	n := len(eps)
	if n == 0 {
		return dst
	}
	order := cs.ScratchIndices(n)
	sort.SliceStable(order, func(a, b int) bool { return totals[order[a]] > totals[order[b]] })
	first := -1
	if req.ID != "" && p.useServer() {
		names := make([]string, n)
		for i, j := range order {
			names[i] = eps[j].Name
		}
		var ep string
		var err error
		start := time.Now()
		// the round trip waits outside the scheduler's lock
		cs.Unlocked(func() {
			cctx, cancel := context.WithTimeout(ctx, time.Duration(p.params.Timeout))
			ep, _, err = p.store.Pick(cctx, req.ID, names, p.params.MaxInflightPerEndpoint)
			cancel()
		})
		switch {
		case errors.Is(err, inflight.ErrFull):
			p.serverAnswered()
			return dst // shed: every candidate is at maxInflightPerEndpoint
		case err != nil:
			p.serverFailed(err)
		default:
			p.metrics.pickSeconds.Observe(time.Since(start).Seconds())
			p.serverAnswered()
			for _, j := range order {
				if eps[j].Name == ep {
					first = j
					break
				}
			}
		}
	}
	if first < 0 {
		p.metrics.fallbackTotal.Inc()
		p.state.fallbacks.Add(1)
		first = order[0]
	}
	dst = append(dst, first)
	for _, j := range order {
		if len(dst) >= p.params.MaxNumOfEndpoints {
			break
		}
		if j != first {
			dst = append(dst, j)
		}
	}
	return dst
}

func (p *Picker) useServer() bool {
	s := p.state
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.down || !time.Now().Before(s.retryAt)
}

func (p *Picker) serverFailed(err error) {
	s := p.state
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retryAt = time.Now().Add(retryInterval)
	if !s.down {
		s.down = true
		p.metrics.serverUp.Set(0)
		p.log.Warn("the in-flight server does not answer: picking from scores (the local view) until it does", "plugin", p.Name, "error", err)
	}
}

func (p *Picker) serverAnswered() {
	s := p.state
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		s.down = false
		p.metrics.serverUp.Set(1)
		p.log.Info("the in-flight server answers again: picking through it", "plugin", p.Name)
	}
}

// ResponseComplete implements scheduling.ResponseComplete: the request's
// lease ends (once, however many replicas hear of the completion), sent
// by the releaser so that the caller (the completion stream's callback)
// never waits on the in-flight server.
func (p *Picker) ResponseComplete(_ context.Context, resp *scheduling.Response) {
	if resp == nil || resp.RequestID == "" {
		return
	}
	select {
	case p.releases <- resp.RequestID:
	default:
		p.metrics.releaseDropped.Inc()
	}
}

// Fallbacks returns how many picks this plugin (and its predecessors)
// took from scores.
func (p *Picker) Fallbacks() uint64 { return p.state.fallbacks.Load() }
