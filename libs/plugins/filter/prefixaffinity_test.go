package filter_test

import (
	"context"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/plugins/filter"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

// prefixOf is a prefix producer whose match is given (blocks of 10).
type prefixOf struct {
	scheduling.Named
	blocks map[string]int
}

func (p *prefixOf) MatchPrefix(_ context.Context, _ *scheduling.CycleState, _ *scheduling.Request, eps []*scheduling.Endpoint) *scheduling.PrefixMatch {
	m := &scheduling.PrefixMatch{BlockSizeTokens: 16, TotalBlocks: 10}
	for _, e := range eps {
		if b := p.blocks[e.Name]; b > 0 {
			m.Set(e.Name, e.NameHash(), b)
		}
	}
	return m
}

// loadOf is an in-flight load producer whose tokens are given.
type loadOf struct {
	scheduling.Named
	tokens map[string]int64
}

func (l *loadOf) InFlightLoad(e *scheduling.Endpoint) scheduling.InFlightLoad {
	return scheduling.InFlightLoad{Tokens: l.tokens[e.Name]}
}

func TestPrefixAffinityKeepsTheStickyEndpoints(t *testing.T) {
	eps := schedulingtest.Endpoints(4)
	blocks := map[string]int{eps[0].Name: 9, eps[1].Name: 8, eps[2].Name: 3}
	tokens := map[string]int64{}
	h := schedulingtest.NewHandle().Declare(&prefixOf{Named: scheduling.Named{Type: "approx-prefix-cache-producer", Name: "prefix"}, blocks: blocks},
		&loadOf{Named: scheduling.Named{Type: "inflight-load-producer", Name: "load"}, tokens: tokens})
	f := schedulingtest.New[*filter.PrefixAffinity](t, h, filter.PrefixAffinityType, "sticky",
		`{"affinityThreshold": 0.8, "maxTTFTPenaltyMs": 1000, "peakPrefillThroughput": 10000, "inFlightLoadProducerName": "load"}`)
	run := func() []string {
		var names []string
		for _, e := range f.Filter(context.Background(), schedulingtest.CycleState(1), &scheduling.Request{ID: "r"}, eps, nil) {
			names = append(names, e.Name)
		}
		return names
	}
	if got := strings.Join(run(), ","); got != eps[0].Name+","+eps[1].Name {
		t.Errorf("kept %s, want the two holding >= 80%% of the prompt", got)
	}
	// the sticky ones carry 20000 in-flight tokens (2000 ms at 10000/s),
	// an idle other 0 ms: 2000 > 1000 breaks stickiness
	tokens[eps[0].Name], tokens[eps[1].Name] = 20000, 25000
	if got := len(run()); got != 4 {
		t.Errorf("overloaded sticky endpoints: kept %d, want all 4", got)
	}
	tokens[eps[0].Name] = 5000 // 500 ms: within the penalty
	if got := len(run()); got != 2 {
		t.Errorf("kept %d, want the 2 sticky", got)
	}
	blocks[eps[0].Name], blocks[eps[1].Name] = 1, 1
	if got := len(run()); got != 4 {
		t.Errorf("nobody sticky: kept %d, want all", got)
	}

	explore := schedulingtest.New[*filter.PrefixAffinity](t, h, filter.PrefixAffinityType, "explore",
		`{"explorationProbability": 1, "maxTTFTPenaltyMs": 0}`)
	blocks[eps[0].Name] = 9
	if got := explore.Filter(context.Background(), schedulingtest.CycleState(1), &scheduling.Request{}, eps, nil); len(got) != 4 {
		t.Errorf("exploring: kept %d, want all", len(got))
	}
	for params, want := range map[string]string{
		`{"affinityThreshold": 1.5}`:           "affinityThreshold",
		`{"ttftSource": "vibes"}`:              "ttftSource",
		`{"peakPrefillThroughput": 0}`:         "peakPrefillThroughput",
		`{"explorationProbability": -0.1}`:     "explorationProbability",
		`{"prefixMatchInfoProducerName": "x"}`: "prefixMatchInfoProducerName",
	} {
		if _, err := schedulingtest.NewErr(h, filter.PrefixAffinityType, "bad", params); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", params, err, want)
		}
	}
}
