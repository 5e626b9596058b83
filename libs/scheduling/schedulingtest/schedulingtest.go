// Package schedulingtest provides helpers for testing scheduling plugins:
// a Handle for calling factories directly, endpoint and request builders,
// and a way to build a Scheduler from YAML.
package schedulingtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/libs/scheduling"
)

// Handle is a scheduling.Handle for calling plugin factories in tests. Add
// the plugins a factory may refer to with Declare; Warnings collects what
// factories warn about.
type Handle struct {
	mu       sync.Mutex
	earlier  []scheduling.Plugin
	later    map[string]bool
	gates    map[string]bool
	Warnings []string
	Clock    func() time.Time
	Log      *slog.Logger
	Registry *scheduling.Registry
	// Services are what Service returns.
	Services map[string]any
	// Metrics is what Registerer returns (NewHandle makes one).
	Metrics *prometheus.Registry

	defaults map[string]scheduling.Plugin // DefaultPlugin's
}

// NewHandle returns a Handle with the given feature gates on.
func NewHandle(gates ...string) *Handle {
	h := &Handle{later: map[string]bool{}, gates: map[string]bool{}, Clock: time.Now,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Registry: scheduling.DefaultRegistry, Metrics: prometheus.NewRegistry()}
	for _, g := range gates {
		h.gates[g] = true
	}
	return h
}

// Declare makes plugins visible to later factory calls, as if declared
// earlier in the config.
func (h *Handle) Declare(ps ...scheduling.Plugin) *Handle {
	h.earlier = append(h.earlier, ps...)
	return h
}

// Registerer implements scheduling.Handle.
func (h *Handle) Registerer() prometheus.Registerer { return h.Metrics }

// Service implements scheduling.Handle.
func (h *Handle) Service(name string) (any, bool) {
	svc, ok := h.Services[name]
	return svc, ok
}

// DeclareLater marks names as declared after the plugin being built.
func (h *Handle) DeclareLater(names ...string) *Handle {
	for _, n := range names {
		h.later[n] = true
	}
	return h
}

// Plugin implements scheduling.Handle.
func (h *Handle) Plugin(name string) (scheduling.Plugin, error) {
	for _, p := range h.earlier {
		if p.TypedName().Name == name {
			return p, nil
		}
	}
	if h.later[name] {
		return nil, fmt.Errorf("plugin %q is declared later: %w", name, scheduling.ErrDeclaredLater)
	}
	return nil, fmt.Errorf("no plugin named %q: %w", name, scheduling.ErrNotDeclared)
}

// Earlier implements scheduling.Handle.
func (h *Handle) Earlier() []scheduling.Plugin { return h.earlier }

// NewPlugin implements scheduling.Handle.
func (h *Handle) NewPlugin(typ, name string, params json.RawMessage) (scheduling.Plugin, error) {
	reg, ok := h.Registry.Lookup(typ)
	if !ok || reg.New == nil {
		return nil, errors.New("plugin type " + typ + " is not available")
	}
	return reg.New(name, params, h)
}

// DefaultPlugin implements scheduling.Handle: the first declared plugin
// of the type, else one made with defaults and kept for later calls.
func (h *Handle) DefaultPlugin(typ string) (scheduling.Plugin, error) {
	for _, p := range h.earlier {
		if p.TypedName().Type == typ {
			return p, nil
		}
	}
	if p, ok := h.defaults[typ]; ok {
		return p, nil
	}
	p, err := h.NewPlugin(typ, typ, nil)
	if err != nil {
		return nil, err
	}
	if h.defaults == nil {
		h.defaults = map[string]scheduling.Plugin{}
	}
	h.defaults[typ] = p
	return p, nil
}

// Logger implements scheduling.Handle.
func (h *Handle) Logger() *slog.Logger { return h.Log }

// FeatureEnabled implements scheduling.Handle.
func (h *Handle) FeatureEnabled(g string) bool { return h.gates[g] }

// Warn implements scheduling.Handle.
func (h *Handle) Warn(msg string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Warnings = append(h.Warnings, msg)
}

// Now implements scheduling.Handle.
func (h *Handle) Now() time.Time { return h.Clock() }

// New builds a plugin of a registered type from its parameters given as
// YAML-free JSON text ("" for none). It fails the test on error.
func New[T scheduling.Plugin](t testing.TB, h *Handle, typ, name, params string) T {
	t.Helper()
	p, err := NewErr(h, typ, name, params)
	if err != nil {
		t.Fatalf("new %s: %v", typ, err)
	}
	v, ok := p.(T)
	if !ok {
		t.Fatalf("new %s: got %T", typ, p)
	}
	return v
}

// NewErr builds a plugin of a registered type and returns the factory's
// error.
func NewErr(h *Handle, typ, name, params string) (scheduling.Plugin, error) {
	reg, ok := h.Registry.Lookup(typ)
	if !ok || reg.New == nil {
		return nil, fmt.Errorf("plugin type %s is not registered", typ)
	}
	if name == "" {
		name = typ
	}
	var raw json.RawMessage
	if params != "" {
		raw = json.RawMessage(params)
	}
	return reg.New(name, raw, h)
}

// CycleState returns a fresh cycle state with a seeded random source.
func CycleState(seed uint64) *scheduling.CycleState {
	return scheduling.NewCycleState(rand.New(rand.NewPCG(seed, seed+1)))
}

// Endpoint builds an endpoint at 10.0.0.x:8000 named name.
func Endpoint(name string, labels map[string]string, m *scheduling.Metrics) *scheduling.Endpoint {
	e := scheduling.NewEndpoint(name, "10.0.0.1", 8000, labels)
	e.Metrics = m
	return e
}

// Endpoints builds n endpoints pod-0..pod-(n-1) at 10.0.<i/250>.<i%250+1>:8000.
func Endpoints(n int) []*scheduling.Endpoint {
	out := make([]*scheduling.Endpoint, n)
	for i := range out {
		out[i] = scheduling.NewEndpoint(fmt.Sprintf("pod-%d", i), fmt.Sprintf("10.0.%d.%d", i/250, i%250+1), 8000, nil)
		out[i].Metrics = &scheduling.Metrics{}
	}
	return out
}

// Waiting builds endpoints whose waiting-queue lengths are ws.
func Waiting(ws ...int) []*scheduling.Endpoint {
	eps := Endpoints(len(ws))
	for i, w := range ws {
		eps[i].Metrics.WaitingRequests = w
	}
	return eps
}

// ParseRequest parses an OpenAI body sent to api into a Request, as the
// picker does.
func ParseRequest(api openai.API, body []byte) (*scheduling.Request, error) {
	r, err := openai.Parse(api, body)
	if err != nil {
		return nil, err
	}
	return scheduling.NewRequest("", r, nil), nil
}

// Completion is a completions request with prompt.
func Completion(id, model, prompt string) *scheduling.Request {
	return &scheduling.Request{ID: id, Model: model, Body: openai.Request{API: openai.APICompletions, Prompt: prompt}}
}

// Chat is a chat request with alternating user/assistant messages.
func Chat(id, model string, contents ...string) *scheduling.Request {
	r := &scheduling.Request{ID: id, Model: model, Body: openai.Request{API: openai.APIChatCompletions}}
	for i, c := range contents {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		r.Body.Messages = append(r.Body.Messages, openai.Message{Role: role, Content: c})
	}
	return r
}

// Score runs a scorer over eps and returns its (unclamped) scores.
func Score(s scheduling.Scorer, cs *scheduling.CycleState, req *scheduling.Request, eps []*scheduling.Endpoint) []float64 {
	scores := make([]float64, len(eps))
	s.Score(context.Background(), cs, req, eps, scores)
	return scores
}

// Names returns the endpoint names.
func Names(eps []*scheduling.Endpoint) []string {
	out := make([]string, len(eps))
	for i, e := range eps {
		out[i] = e.Name
	}
	return out
}

// Scheduler parses and builds a configuration with a deterministic random
// source, failing the test on error.
func Scheduler(t testing.TB, yaml string, opts ...scheduling.Option) *scheduling.Scheduler {
	t.Helper()
	cfg, err := scheduling.ParseConfig([]byte(yaml))
	if err != nil {
		t.Fatalf("parse config: %v", err)
	}
	opts = append([]scheduling.Option{scheduling.WithRandSeed(1), scheduling.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}, opts...)
	s, err := scheduling.New(cfg, opts...)
	if err != nil {
		t.Fatalf("build scheduler: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// PreRequest runs p's pre-request hook the way the scheduler does: when p is
// a Projection, the effects it records are applied to it right after.
func PreRequest(ctx context.Context, p scheduling.PreRequest, cs *scheduling.CycleState, req *scheduling.Request, res *scheduling.Result) {
	n := len(res.Effects)
	p.PreRequest(ctx, cs, req, res)
	proj, ok := p.(scheduling.Projection)
	if !ok {
		return
	}
	for i := n; i < len(res.Effects); i++ {
		proj.ApplyEffect(res.DecisionID, res.Time, &res.Effects[i])
	}
}
