package disaggrollout

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hermod/hermod/libs/scheduling"
)

// Label keys of the DisaggregatedSet controller, the defaults of
// revisionGating.revisionLabelKey and roleLabelKey.
const (
	DefaultRevisionLabel = "disaggregatedset.x-k8s.io/revision"
	DefaultRoleLabel     = "disaggregatedset.x-k8s.io/role"
)

// Selector modes.
const (
	// ModeStrict keeps only the endpoints whose label equals the
	// request's header; none matching fails the request.
	ModeStrict = "strict"
	// ModePrefer only stamps the response header: a
	// header-label-affinity-scorer scores the preference.
	ModePrefer = "prefer"
)

// Revision gating modes.
const (
	// GatingSum weighs a covered revision by its Ready pods of every
	// required role together.
	GatingSum = "sum"
	// GatingMaxRole weighs every covered revision by its Ready pods of
	// one role: the required role with the most Ready pods across the
	// covered revisions (the first listed on a tie).
	GatingMaxRole = "max-role"
	// GatingDisabled checks no coverage and draws no revision; the header
	// selectors still screen and stamp.
	GatingDisabled = "disabled"
)

// Params are disaggregatedset-rollout-screener's parameters.
type Params struct {
	Scope           Scope            `json:"scope"`
	HeaderSelectors []HeaderSelector `json:"headerSelectors"`
	RevisionGating  *RevisionGating  `json:"revisionGating"`
}

// Scope picks the pods whose revisions and roles count.
type Scope struct {
	// LabelSelector is a Kubernetes label selector in its string form
	// ("disaggregatedset.x-k8s.io/name=my-set").
	LabelSelector string `json:"labelSelector"`
}

// HeaderSelector maps a header onto a pod label, both ways: a strict one
// keeps the candidates whose label equals the request's header, and every
// one sets the header on the response to the label of the endpoint that
// serves.
type HeaderSelector struct {
	// Name identifies the selector (the selector label of the no-match
	// metric).
	Name string `json:"name"`
	// HeaderName is the request and response header (any case).
	HeaderName string `json:"headerName"`
	// LabelKey is the pod label compared with the header and stamped on
	// the response.
	LabelKey string `json:"labelKey"`
	// Mode is strict or prefer.
	Mode string `json:"mode"`
}

// RevisionGating says how a revision is chosen.
type RevisionGating struct {
	// Mode is sum, max-role or disabled.
	Mode string `json:"mode"`
	// RequireRoles are the roles a revision needs a Ready pod of each to
	// serve (sum and max-role).
	RequireRoles *RequireRoles `json:"requireRoles,omitempty"`
	// RevisionLabelKey and RoleLabelKey are the pod labels naming a pod's
	// revision and role.
	RevisionLabelKey string `json:"revisionLabelKey,omitempty"`
	RoleLabelKey     string `json:"roleLabelKey,omitempty"`
}

// RequireRoles lists the required roles.
type RequireRoles struct {
	Values []string `json:"values"`
}

// gating reports whether revisions are gated (sum or max-role).
func (g *RevisionGating) gating() bool {
	return g != nil && (g.Mode == GatingSum || g.Mode == GatingMaxRole)
}

// check validates p, fills in the label-key defaults and lower-cases the
// header names (requests' headers come lower-cased), and returns the
// parsed scope.
func (p *Params) check() (selector, error) {
	if strings.TrimSpace(p.Scope.LabelSelector) == "" {
		return nil, scheduling.ParamErrorf("scope.labelSelector", "required: the label selector of the pods whose revisions and roles count (an empty one would count every pod of the pool)")
	}
	scope, err := parseSelector(p.Scope.LabelSelector)
	if err != nil {
		return nil, scheduling.ParamErrorf("scope.labelSelector", "not a label selector: %v", err)
	}
	names := make([]string, 0, len(p.HeaderSelectors))
	headers := make([]string, 0, len(p.HeaderSelectors))
	for i := range p.HeaderSelectors {
		hs := &p.HeaderSelectors[i]
		field := fmt.Sprintf("headerSelectors[%d]", i)
		hs.HeaderName = strings.ToLower(strings.TrimSpace(hs.HeaderName))
		switch {
		case hs.Name == "":
			return nil, scheduling.ParamErrorf(field+".name", "required")
		case hs.HeaderName == "":
			return nil, scheduling.ParamErrorf(field+".headerName", "required: the request and response header")
		case hs.LabelKey == "":
			return nil, scheduling.ParamErrorf(field+".labelKey", "required: the pod label the header names")
		case hs.Mode != ModeStrict && hs.Mode != ModePrefer:
			return nil, scheduling.ParamErrorf(field+".mode", "%q is not strict or prefer", hs.Mode)
		case slices.Contains(names, hs.Name):
			return nil, scheduling.ParamErrorf(field+".name", "%q names another selector too", hs.Name)
		case slices.Contains(headers, hs.HeaderName):
			return nil, scheduling.ParamErrorf(field+".headerName", "%q is another selector's header too", hs.HeaderName)
		}
		names, headers = append(names, hs.Name), append(headers, hs.HeaderName)
	}
	g := p.RevisionGating
	if g == nil {
		return nil, scheduling.ParamErrorf("revisionGating", "required (mode: disabled keeps only the header selectors)")
	}
	if g.RevisionLabelKey == "" {
		g.RevisionLabelKey = DefaultRevisionLabel
	}
	if g.RoleLabelKey == "" {
		g.RoleLabelKey = DefaultRoleLabel
	}
	switch g.Mode {
	case GatingDisabled:
	case GatingSum, GatingMaxRole:
		if g.RequireRoles == nil || len(g.RequireRoles.Values) == 0 {
			return nil, scheduling.ParamErrorf("revisionGating.requireRoles.values", "required with mode %s: the roles a revision needs a Ready pod of each to serve", g.Mode)
		}
		for i, r := range g.RequireRoles.Values {
			switch {
			case r == "":
				return nil, scheduling.ParamErrorf(fmt.Sprintf("revisionGating.requireRoles.values[%d]", i), "empty role")
			case slices.Contains(g.RequireRoles.Values[:i], r):
				return nil, scheduling.ParamErrorf(fmt.Sprintf("revisionGating.requireRoles.values[%d]", i), "%q is listed twice", r)
			}
		}
	default:
		return nil, scheduling.ParamErrorf("revisionGating.mode", "%q is not sum, max-role or disabled", g.Mode)
	}
	return scope, nil
}
