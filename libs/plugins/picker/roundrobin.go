package picker

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/hermod/hermod/libs/scheduling"
)

// RoundRobinType is the registered type of the round-robin picker.
const RoundRobinType = "round-robin-picker"

func init() {
	scheduling.Register(scheduling.Registration{Type: RoundRobinType, New: newFactory(RoundRobinType, func(p base) scheduling.Plugin {
		return &RoundRobin{base: p, state: &rotation{}}
	})})
}

// RoundRobin picks the candidates in strict rotation, ignoring scores: the
// candidates in name order, starting after the endpoint picked last (its
// fallbacks are the next ones). The endpoint picked last is a projection
// of the decision stream: each decision records its pick as an effect, and
// the newest decision's pick (by decision stamp) wins, so picker replicas
// that see each other's decisions rotate as one, and a candidate set that
// changes (endpoints added, filtered out or removed) keeps the rotation
// going from where it was.
type RoundRobin struct {
	base
	state *rotation
}

// rotation is where the rotation stands; a reloaded configuration's picker
// shares it with its predecessor.
type rotation struct {
	mu   sync.Mutex
	last string
	at   scheduling.Stamp
	pos  int
}

// picksKey holds this cycle's picks until PreRequest records them.
func (p *RoundRobin) picksKey() scheduling.StateKey {
	return scheduling.StateKey(RoundRobinType + "/" + p.Name)
}

// Pick implements scheduling.Picker.
func (p *RoundRobin) Pick(_ context.Context, cs *scheduling.CycleState, _ *scheduling.Request, eps []*scheduling.Endpoint, _ []float64, dst []int) []int {
	n := len(eps)
	if n == 0 {
		return dst
	}
	order := cs.ScratchIndices(n)
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(eps[a].Name, eps[b].Name) })
	p.state.mu.Lock()
	last := p.state.last
	p.state.mu.Unlock()
	// the first candidate after the last pick, wrapping around
	next, _ := slices.BinarySearchFunc(order, last, func(i int, name string) int {
		if c := cmp.Compare(eps[i].Name, name); c != 0 {
			return c
		}
		return -1 // equal names sort before: we want the first one after
	})
	k := min(p.params.MaxNumOfEndpoints, n)
	start := len(dst)
	for j := range k {
		dst = append(dst, order[(next+j)%n])
	}
	picks, _ := scheduling.ReadState[[]string](cs, p.picksKey())
	cs.Write(p.picksKey(), append(picks, eps[dst[start]].Name))
	return dst
}

// PreRequest implements scheduling.PreRequest: the cycle's picks are
// recorded as the decision's effect (applied by ApplyEffect, here and in
// every other replica).
func (p *RoundRobin) PreRequest(_ context.Context, cs *scheduling.CycleState, _ *scheduling.Request, res *scheduling.Result) {
	if picks, ok := scheduling.ReadState[[]string](cs, p.picksKey()); ok && len(picks) > 0 {
		res.RecordEffect(p, picks, nil, 0)
	}
}

// ApplyEffect implements scheduling.Projection: the effect's last endpoint
// becomes the last pick unless a newer decision's pick is known.
func (p *RoundRobin) ApplyEffect(decisionID uint64, at time.Time, e *scheduling.Effect) {
	if len(e.Endpoints) == 0 {
		return
	}
	st, pos := scheduling.StampOf(decisionID, at), len(e.Endpoints)-1
	s := p.state
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := st.Compare(s.at); c < 0 || (c == 0 && pos <= s.pos && s.last != "") {
		return
	}
	s.last, s.at, s.pos = e.Endpoints[pos], st, pos
}

// InheritState implements scheduling.StateInheritor: the rotation goes on
// where the previous configuration left it.
func (p *RoundRobin) InheritState(prev scheduling.Plugin) bool {
	q, ok := prev.(*RoundRobin)
	if !ok {
		return false
	}
	p.state = q.state
	return true
}

// Last returns the endpoint picked last.
func (p *RoundRobin) Last() string {
	p.state.mu.Lock()
	defer p.state.mu.Unlock()
	return p.state.last
}
