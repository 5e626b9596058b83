// Package filter holds the label filters: by-label, by-label-selector and
// the role filters prefill-filter, decode-filter and encode-filter.
package filter

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/hermod/hermod/libs/scheduling"
)

// Registered plugin types.
const (
	ByLabelType         = "by-label"
	ByLabelSelectorType = "by-label-selector"
	// LabelSelectorType is by-label-selector's name since the llm-d
	// router's v0.9 (by-label-selector and by-label are deprecated).
	LabelSelectorType = "label-selector-filter"
	PrefillType       = "prefill-filter"
	DecodeType        = "decode-filter"
	EncodeType        = "encode-filter"
)

// RoleLabel is Heimdall's role label, which the role filters read first;
// LLMDRoleLabel is llm-d's, read on pods without RoleLabel, with llm-d's
// role values (prefill-decode, and both and encode-prefill-decode for
// prefill as well).
const (
	RoleLabel     = "mif.moreh.io/role"
	LLMDRoleLabel = "llm-d.ai/role"
)

func init() {
	scheduling.Register(scheduling.Registration{Type: ByLabelType, New: func(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
		h.Warn(ByLabelType + " is deprecated (llm-d router v0.9): use " + LabelSelectorType + " (matchExpressions: [{key: LABEL, operator: In, values: [...]}]) or the role filters")
		return newByLabel(name, raw, h)
	}})
	scheduling.Register(scheduling.Registration{Type: LabelSelectorType, New: newSelector})
	scheduling.Register(scheduling.Registration{Type: ByLabelSelectorType, New: func(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
		h.Warn(ByLabelSelectorType + " is deprecated (llm-d router v0.9): use " + LabelSelectorType + ", the same filter")
		return newSelector(name, raw, h)
	}})
	scheduling.Register(scheduling.Registration{Type: PrefillType, New: newRole(PrefillType, false,
		[]string{"prefill"}, []string{"prefill", "encode-prefill", "prefill-decode", "both", "encode-prefill-decode"})})
	scheduling.Register(scheduling.Registration{Type: DecodeType, New: newRole(DecodeType, true,
		[]string{"decode", "both"}, []string{"decode", "prefill-decode", "both", "encode-prefill-decode"})})
	scheduling.Register(scheduling.Registration{Type: EncodeType, New: newRole(EncodeType, false,
		[]string{"encode", "encode-prefill", "encode-prefill-decode"}, []string{"encode", "encode-prefill", "encode-prefill-decode"})})
}

// ByLabelParams are by-label's parameters.
type ByLabelParams struct {
	Label         string   `json:"label"`
	ValidValues   []string `json:"validValues"`
	AllowsNoLabel bool     `json:"allowsNoLabel"`
}

// ByLabel keeps endpoints whose label value is one of validValues, and,
// with allowsNoLabel, those without the label.
type ByLabel struct {
	scheduling.Named
	params ByLabelParams
}

func newByLabel(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	var p ByLabelParams
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	if p.Label == "" {
		return nil, scheduling.ParamErrorf("label", "required")
	}
	if len(p.ValidValues) == 0 && !p.AllowsNoLabel {
		return nil, scheduling.ParamErrorf("validValues", "required unless allowsNoLabel is true")
	}
	return &ByLabel{Named: scheduling.Named{Type: ByLabelType, Name: name}, params: p}, nil
}

// Parameters implements scheduling.ParameterReporter.
func (f *ByLabel) Parameters() any { return f.params }

// FiltersByEndpoint implements scheduling.EndpointFilter: the filter reads
// only the endpoints' labels.
func (f *ByLabel) FiltersByEndpoint() {}

// Filter implements scheduling.Filter.
func (f *ByLabel) Filter(_ context.Context, _ *scheduling.CycleState, _ *scheduling.Request, in, dst []*scheduling.Endpoint) []*scheduling.Endpoint {
	for _, e := range in {
		v, ok := e.Labels[f.params.Label]
		if (ok && slices.Contains(f.params.ValidValues, v)) || (!ok && f.params.AllowsNoLabel) {
			dst = append(dst, e)
		}
	}
	return dst
}

// Role keeps endpoints whose role has one of the role's values, and, for
// decode-filter, endpoints without a role. A pod's role is its RoleLabel
// (Heimdall's values), else its LLMDRoleLabel (llm-d's); another label set
// in the parameters is the only one read, with Heimdall's values.
type Role struct {
	scheduling.Named
	params  RoleParams
	rules   []roleRule
	noLabel bool
}

// roleRule is one label convention: the label and the values it keeps.
type roleRule struct {
	label  string
	values []string
}

// RoleParams are the role filters' parameters.
type RoleParams struct {
	// Label overrides the role label key.
	Label string `json:"label"`
}

func newRole(typ string, noLabel bool, heimdall, llmd []string) scheduling.Factory {
	return func(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
		p := RoleParams{Label: RoleLabel}
		if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
			return nil, err
		}
		if p.Label == "" {
			return nil, scheduling.ParamErrorf("label", "must not be empty")
		}
		rules := []roleRule{{RoleLabel, heimdall}, {LLMDRoleLabel, llmd}}
		if p.Label != RoleLabel {
			rules = []roleRule{{p.Label, heimdall}}
		}
		return &Role{Named: scheduling.Named{Type: typ, Name: name}, params: p, rules: rules, noLabel: noLabel}, nil
	}
}

// Parameters implements scheduling.ParameterReporter.
func (f *Role) Parameters() any { return f.params }

// FiltersByEndpoint implements scheduling.EndpointFilter: the filter reads
// only the endpoints' labels.
func (f *Role) FiltersByEndpoint() {}

// Filter implements scheduling.Filter.
func (f *Role) Filter(_ context.Context, _ *scheduling.CycleState, _ *scheduling.Request, in, dst []*scheduling.Endpoint) []*scheduling.Endpoint {
	for _, e := range in {
		if f.keeps(e.Labels) {
			dst = append(dst, e)
		}
	}
	return dst
}

// keeps reports whether a pod with labels has one of the role's values by
// the first convention it is labelled in (without any: noLabel).
func (f *Role) keeps(labels map[string]string) bool {
	for _, r := range f.rules {
		if v, ok := labels[r.label]; ok {
			return slices.Contains(r.values, v)
		}
	}
	return f.noLabel
}

// Label selector operators (Kubernetes LabelSelectorRequirement).
const (
	OpIn           = "In"
	OpNotIn        = "NotIn"
	OpExists       = "Exists"
	OpDoesNotExist = "DoesNotExist"
)

// SelectorParams are by-label-selector's parameters, with Kubernetes
// LabelSelector semantics.
type SelectorParams struct {
	MatchLabels      map[string]string `json:"matchLabels,omitempty"`
	MatchExpressions []Requirement     `json:"matchExpressions,omitempty"`
}

// Requirement is one set-based label requirement.
type Requirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values,omitempty"`
}

// Selector keeps endpoints matching a Kubernetes label selector: every
// matchLabels pair, and every matchExpressions requirement (In: the label
// is present with one of the values; NotIn: absent or another value;
// Exists; DoesNotExist). An empty selector keeps everything.
type Selector struct {
	scheduling.Named
	params SelectorParams
	reqs   []Requirement // matchLabels as In requirements, then matchExpressions
}

func newSelector(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	var p SelectorParams
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	s := &Selector{Named: scheduling.Named{Type: LabelSelectorType, Name: name}, params: p}
	keys := make([]string, 0, len(p.MatchLabels))
	for k := range p.MatchLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "" {
			return nil, scheduling.ParamErrorf("matchLabels", "label keys must not be empty")
		}
		s.reqs = append(s.reqs, Requirement{Key: k, Operator: OpIn, Values: []string{p.MatchLabels[k]}})
	}
	for i, r := range p.MatchExpressions {
		field := fmt.Sprintf("matchExpressions[%d]", i)
		if r.Key == "" {
			return nil, scheduling.ParamErrorf(field+".key", "required")
		}
		switch r.Operator {
		case OpIn, OpNotIn:
			if len(r.Values) == 0 {
				return nil, scheduling.ParamErrorf(field+".values", "must not be empty for operator %s", r.Operator)
			}
		case OpExists, OpDoesNotExist:
			if len(r.Values) != 0 {
				return nil, scheduling.ParamErrorf(field+".values", "must be empty for operator %s", r.Operator)
			}
		default:
			return nil, scheduling.ParamErrorf(field+".operator", "%q is not one of In, NotIn, Exists, DoesNotExist", r.Operator)
		}
		s.reqs = append(s.reqs, r)
	}
	return s, nil
}

// Parameters implements scheduling.ParameterReporter.
func (f *Selector) Parameters() any { return f.params }

// Matches reports whether labels satisfy the selector.
func (f *Selector) Matches(labels map[string]string) bool {
	for _, r := range f.reqs {
		v, ok := labels[r.Key]
		switch r.Operator {
		case OpIn:
			if !ok || !slices.Contains(r.Values, v) {
				return false
			}
		case OpNotIn:
			if ok && slices.Contains(r.Values, v) {
				return false
			}
		case OpExists:
			if !ok {
				return false
			}
		case OpDoesNotExist:
			if ok {
				return false
			}
		}
	}
	return true
}

// FiltersByEndpoint implements scheduling.EndpointFilter: the filter reads
// only the endpoints' labels.
func (f *Selector) FiltersByEndpoint() {}

// Filter implements scheduling.Filter.
func (f *Selector) Filter(_ context.Context, _ *scheduling.CycleState, _ *scheduling.Request, in, dst []*scheduling.Endpoint) []*scheduling.Endpoint {
	for _, e := range in {
		if f.Matches(e.Labels) {
			dst = append(dst, e)
		}
	}
	return dst
}
