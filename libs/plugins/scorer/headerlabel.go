package scorer

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/hermod/hermod/libs/scheduling"
)

// HeaderLabelAffinityType is the llm-d router's header-label-affinity-scorer:
// 1 for the endpoints whose label labelKey equals the request's header
// headerName, 0 for the rest (which stay eligible). One instance per
// header-to-label preference, each with its own weight.
const HeaderLabelAffinityType = "header-label-affinity-scorer"

func init() {
	scheduling.Register(scheduling.Registration{Type: HeaderLabelAffinityType, New: newHeaderLabelAffinity})
}

// HeaderLabelParams are header-label-affinity-scorer's parameters.
type HeaderLabelParams struct {
	HeaderName string `json:"headerName"`
	LabelKey   string `json:"labelKey"`
}

// HeaderLabelAffinity is header-label-affinity-scorer.
type HeaderLabelAffinity struct {
	scheduling.Named
	params HeaderLabelParams
}

func newHeaderLabelAffinity(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	var p HeaderLabelParams
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	switch {
	case p.HeaderName == "":
		return nil, scheduling.ParamErrorf("headerName", "required: the request header naming the preferred label value")
	case p.LabelKey == "":
		return nil, scheduling.ParamErrorf("labelKey", "required: the endpoint label compared with the header")
	}
	p.HeaderName = strings.ToLower(p.HeaderName)
	return &HeaderLabelAffinity{Named: scheduling.Named{Type: HeaderLabelAffinityType, Name: name}, params: p}, nil
}

// Parameters implements scheduling.ParameterReporter.
func (s *HeaderLabelAffinity) Parameters() any { return s.params }

// Score implements scheduling.Scorer.
func (s *HeaderLabelAffinity) Score(_ context.Context, _ *scheduling.CycleState, req *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	want := req.Header(s.params.HeaderName)
	if want == "" {
		return
	}
	for i, e := range eps {
		if v, ok := e.Labels[s.params.LabelKey]; ok && v == want {
			scores[i] = 1
		}
	}
}
