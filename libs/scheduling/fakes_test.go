package scheduling_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	_ "github.com/hermod/hermod/libs/plugins/standard"
	"github.com/hermod/hermod/libs/scheduling"
)

// Test-only plugin types, registered next to the standard ones.
func init() {
	scheduling.Register(scheduling.Registration{Type: "test-gated-unavailable", Gate: scheduling.GatePrepareDataPlugins})
	scheduling.Register(scheduling.Registration{Type: "test-unavailable"})
	scheduling.Register(scheduling.Registration{Type: "test-fixed-scorer", New: newFixedScorer})
	scheduling.Register(scheduling.Registration{Type: "test-keep-filter", New: newKeepFilter})
	scheduling.Register(scheduling.Registration{Type: "test-state-writer", New: func(name string, _ json.RawMessage, _ scheduling.Handle) (scheduling.Plugin, error) {
		return &stateWriter{scheduling.Named{Type: "test-state-writer", Name: name}}, nil
	}})
	scheduling.Register(scheduling.Registration{Type: "test-state-reader", New: func(name string, _ json.RawMessage, _ scheduling.Handle) (scheduling.Plugin, error) {
		return &stateReader{scheduling.Named{Type: "test-state-reader", Name: name}}, nil
	}})
	scheduling.Register(scheduling.Registration{Type: "test-panic-scorer", New: func(name string, _ json.RawMessage, _ scheduling.Handle) (scheduling.Plugin, error) {
		return &panicScorer{scheduling.Named{Type: "test-panic-scorer", Name: name}}, nil
	}})
	scheduling.Register(scheduling.Registration{Type: "test-passthrough-filter", New: func(name string, _ json.RawMessage, _ scheduling.Handle) (scheduling.Plugin, error) {
		return &passThrough{scheduling.Named{Type: "test-passthrough-filter", Name: name}}, nil
	}})
	scheduling.Register(scheduling.Registration{Type: "test-closer", New: func(name string, _ json.RawMessage, _ scheduling.Handle) (scheduling.Plugin, error) {
		c := &closer{Named: scheduling.Named{Type: "test-closer", Name: name}}
		closers.Add(c)
		return c, nil
	}})
	scheduling.Register(scheduling.Registration{Type: "test-failing-prepare", Gate: scheduling.GatePrepareDataPlugins, New: func(name string, _ json.RawMessage, _ scheduling.Handle) (scheduling.Plugin, error) {
		return &failingPrepare{Named: scheduling.Named{Type: "test-failing-prepare", Name: name}}, nil
	}})
}

// fixedScorer returns configured scores by endpoint name; endpoints it
// does not list are left at zero.
type fixedScorer struct {
	scheduling.Named
	scores map[string]float64
	nan    []string
}

func newFixedScorer(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	var p struct {
		Scores map[string]float64 `json:"scores"`
		NaN    []string           `json:"nan"`
	}
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	return &fixedScorer{Named: scheduling.Named{Type: "test-fixed-scorer", Name: name}, scores: p.Scores, nan: p.NaN}, nil
}

func (s *fixedScorer) Score(_ context.Context, _ *scheduling.CycleState, _ *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	for i, e := range eps {
		if v, ok := s.scores[e.Name]; ok {
			scores[i] = v
		}
		if slices.Contains(s.nan, e.Name) {
			scores[i] = nan()
		}
	}
}

func nan() float64 {
	var zero float64
	return zero / zero
}

// keepFilter keeps the listed endpoints; with mustNotSee it fails the cycle
// (by keeping nothing) if an endpoint an earlier filter removed reaches it.
type keepFilter struct {
	scheduling.Named
	keep       []string
	mustNotSee []string
	calls      atomic.Int64
}

func newKeepFilter(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	var p struct {
		Keep       []string `json:"keep"`
		MustNotSee []string `json:"mustNotSee"`
	}
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	return &keepFilter{Named: scheduling.Named{Type: "test-keep-filter", Name: name}, keep: p.Keep, mustNotSee: p.MustNotSee}, nil
}

func (f *keepFilter) Filter(_ context.Context, _ *scheduling.CycleState, _ *scheduling.Request, in, dst []*scheduling.Endpoint) []*scheduling.Endpoint {
	f.calls.Add(1)
	for _, e := range in {
		if slices.Contains(f.mustNotSee, e.Name) {
			return dst[:0]
		}
		if slices.Contains(f.keep, e.Name) {
			dst = append(dst, e)
		}
	}
	return dst
}

const sharedKey scheduling.StateKey = "test-shared"

// stateWriter writes the candidate count into the cycle state and scores 0.
type stateWriter struct{ scheduling.Named }

func (s *stateWriter) Score(_ context.Context, cs *scheduling.CycleState, _ *scheduling.Request, eps []*scheduling.Endpoint, _ []float64) {
	cs.Write(sharedKey, len(eps))
}

// stateReader scores 1.0 for the endpoint whose index the writer stored
// minus one (the last candidate), proving state flows between plugins.
type stateReader struct{ scheduling.Named }

func (s *stateReader) Score(_ context.Context, cs *scheduling.CycleState, _ *scheduling.Request, _ []*scheduling.Endpoint, scores []float64) {
	if n, ok := scheduling.ReadState[int](cs, sharedKey); ok {
		scores[n-1] = 1
	}
}

type failingPrepare struct {
	scheduling.Named
	calls atomic.Int64
}

func (p *failingPrepare) PrepareData(context.Context, *scheduling.Request) error {
	p.calls.Add(1)
	return errors.New("tokenizer socket is gone")
}

// panicScorer panics when the request's model is "boom".
type panicScorer struct{ scheduling.Named }

func (panicScorer) Score(_ context.Context, _ *scheduling.CycleState, req *scheduling.Request, _ []*scheduling.Endpoint, _ []float64) {
	if req.Model == "boom" {
		panic("scorer exploded")
	}
}

// passThrough returns its input instead of writing into dst (a shortcut the
// interface discourages but the scheduler must survive).
type passThrough struct{ scheduling.Named }

func (passThrough) Filter(_ context.Context, _ *scheduling.CycleState, _ *scheduling.Request, in, _ []*scheduling.Endpoint) []*scheduling.Endpoint {
	return in
}

// closer counts Close calls (a plugin holding a connection, say).
type closer struct {
	scheduling.Named
	closed atomic.Int64
}

func (c *closer) Close() error {
	c.closed.Add(1)
	return nil
}

// closers are the closer plugins built so far.
var closers closerSet

type closerSet struct {
	mu  sync.Mutex
	all []*closer
}

func (s *closerSet) Add(c *closer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.all = append(s.all, c)
}

func (s *closerSet) Last() *closer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.all[len(s.all)-1]
}
