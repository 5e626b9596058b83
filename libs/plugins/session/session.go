// Package session holds the session-affinity plugins of the llm-d
// router (v0.10): session-affinity-scorer, which prefers the endpoint a
// session was served by, and session-affinity-filter, which keeps only it
// while it is a candidate. Two strategies say where a session's endpoint is
// kept:
//
//   - encoded_endpoint_header (the default): on the client. Each response
//     carries the endpoint in a header (x-session-token: the base64 of its
//     name); the client sends it back with the next request.
//   - session_id: in the pool. A request names its session (a header, or
//     the agent-identity of a coding agent's session headers); each
//     decision binds the session to its endpoint for evictionTtlSeconds
//     after its last request. The binding is a projection of the decision
//     stream, so every picker replica holds the same.
package session

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/hermod/hermod/libs/plugins/agentidentity"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/telemetry"
)

// Registered plugin types.
const (
	ScorerType = "session-affinity-scorer"
	FilterType = "session-affinity-filter"
	// MultiClusterFilterType is session-affinity-filter over a pool whose
	// endpoints are clusters (multicluster-file-discovery): the same
	// parameters, and a session pinned to its cluster.
	MultiClusterFilterType = "multicluster-session-affinity-filter"
)

// Strategies.
const (
	StrategyEncodedHeader = "encoded_endpoint_header"
	StrategySessionID     = "session_id"
)

// Defaults.
const (
	// TokenHeader carries a session's endpoint (encoded_endpoint_header).
	TokenHeader = "x-session-token"
	// IDHeader names a request's session (session_id) by default.
	IDHeader                    = "x-session-id"
	DefaultEvictionTTLSeconds   = 300
	DefaultEvictionSweepSeconds = 10
	// AgentIdentity is the attribute source of a coding agent's session:
	// the first of its session headers the request carries.
	AgentIdentity = agentidentity.Type
)

func init() {
	scheduling.Register(scheduling.Registration{Type: ScorerType, New: NewScorer})
	scheduling.Register(scheduling.Registration{Type: FilterType, New: NewFilter})
	scheduling.Register(scheduling.Registration{Type: MultiClusterFilterType, New: newFilter(MultiClusterFilterType)})
}

// Params are the plugins' parameters.
type Params struct {
	Strategy string `json:"strategy"`
	// ProfileName is the profile whose pick the session follows ("": the
	// primary one).
	ProfileName                 string               `json:"profileName,omitempty"`
	EncodedEndpointHeaderConfig *EncodedHeaderConfig `json:"encodedEndpointHeaderConfig,omitempty"`
	SessionIDConfig             *IDConfig            `json:"sessionIdConfig,omitempty"`
}

// EncodedHeaderConfig configures encoded_endpoint_header.
type EncodedHeaderConfig struct {
	Header string `json:"header"`
}

// IDConfig configures session_id.
type IDConfig struct {
	Sources              []Source `json:"sources"`
	EvictionTTLSeconds   float64  `json:"evictionTtlSeconds"`
	EvictionSweepSeconds float64  `json:"evictionSweepSeconds"`
}

// Source is where a request's session id is read: a header, or an
// attribute (agent-identity).
type Source struct {
	Header    string `json:"header,omitempty"`
	Attribute string `json:"attribute,omitempty"`
}

type wireParams struct {
	Params
	// HeaderName is the v0.9 name of encodedEndpointHeaderConfig.header.
	HeaderName string `json:"headerName"`
}

// affinity is what the scorer and the filter share: where a request's
// session endpoint is.
type affinity struct {
	scheduling.Named
	params  Params
	header  string                 // encoded_endpoint_header
	sources []Source               // session_id
	agent   []string               // agent-identity's headers
	ids     map[string]*IDProducer // attribute sources' session-id-producers
	binds   *bindings
	logger  *slog.Logger
}

func newAffinity(typ, name string, raw json.RawMessage, h scheduling.Handle) (*affinity, error) {
	var w wireParams
	if err := scheduling.DecodeParameters(raw, &w, h); err != nil {
		return nil, err
	}
	p := w.Params
	if p.Strategy == "" {
		p.Strategy = StrategyEncodedHeader
	}
	a := &affinity{Named: scheduling.Named{Type: typ, Name: name}, logger: h.Logger(), agent: agentidentity.DefaultSessionHeaders}
	switch p.Strategy {
	case StrategyEncodedHeader:
		if p.SessionIDConfig != nil {
			return nil, scheduling.ParamErrorf("sessionIdConfig", "is the %s strategy's; this plugin's strategy is %s", StrategySessionID, p.Strategy)
		}
		if p.EncodedEndpointHeaderConfig == nil {
			p.EncodedEndpointHeaderConfig = &EncodedHeaderConfig{}
		}
		if w.HeaderName != "" {
			h.Warn("parameters.headerName is deprecated (llm-d router v0.10): use encodedEndpointHeaderConfig.header")
			if p.EncodedEndpointHeaderConfig.Header == "" {
				p.EncodedEndpointHeaderConfig.Header = w.HeaderName
			}
		}
		if p.EncodedEndpointHeaderConfig.Header == "" {
			p.EncodedEndpointHeaderConfig.Header = TokenHeader
		}
		a.header = strings.ToLower(p.EncodedEndpointHeaderConfig.Header)
	case StrategySessionID:
		if p.EncodedEndpointHeaderConfig != nil || w.HeaderName != "" {
			return nil, scheduling.ParamErrorf("encodedEndpointHeaderConfig", "is the %s strategy's; this plugin's strategy is %s", StrategyEncodedHeader, p.Strategy)
		}
		if p.SessionIDConfig == nil {
			p.SessionIDConfig = &IDConfig{}
		}
		c := p.SessionIDConfig
		if len(c.Sources) == 0 {
			c.Sources = []Source{{Header: IDHeader}}
		}
		for i, s := range c.Sources {
			field := fmt.Sprintf("sessionIdConfig.sources[%d]", i)
			switch {
			case (s.Header == "") == (s.Attribute == ""):
				return nil, scheduling.ParamErrorf(field, "set one of header or attribute")
			case s.Attribute != "" && s.Attribute != AgentIdentity:
				p, err := idProducer(h, s.Attribute)
				if err != nil {
					return nil, scheduling.ParamErrorf(field+".attribute", "%v", err)
				}
				if a.ids == nil {
					a.ids = map[string]*IDProducer{}
				}
				a.ids[s.Attribute] = p
			}
			c.Sources[i].Header = strings.ToLower(s.Header)
		}
		if c.EvictionTTLSeconds == 0 {
			c.EvictionTTLSeconds = DefaultEvictionTTLSeconds
		}
		if c.EvictionSweepSeconds == 0 {
			c.EvictionSweepSeconds = DefaultEvictionSweepSeconds
		}
		if c.EvictionTTLSeconds < 0 || c.EvictionSweepSeconds < 0 {
			return nil, scheduling.ParamErrorf("sessionIdConfig", "evictionTtlSeconds and evictionSweepSeconds must be positive")
		}
		a.sources = c.Sources
		a.agent = agentHeaders(h)
		a.binds = newBindings(seconds(c.EvictionTTLSeconds), h.Now)
	default:
		return nil, scheduling.ParamErrorf("strategy", "%q is not %s or %s", p.Strategy, StrategyEncodedHeader, StrategySessionID)
	}
	a.params = p
	return a, nil
}

// agentHeaders are the session headers agent-identity reads: a declared
// agent-identity plugin's (its additionalSessionHeaders first), else the
// built-in ones.
func agentHeaders(h scheduling.Handle) []string {
	for _, p := range h.Earlier() {
		if a, ok := p.(*agentidentity.Plugin); ok {
			return a.SessionHeaders()
		}
	}
	return agentidentity.DefaultSessionHeaders
}

// idProducer is the session-id-producer an attribute source names: by its
// name, or by the type when one was declared under it.
func idProducer(h scheduling.Handle, attribute string) (*IDProducer, error) {
	p, err := h.Plugin(attribute)
	if err != nil {
		return nil, fmt.Errorf("%q: a session is read from %s (a coding agent's session headers) or a %s declared earlier: %w",
			attribute, AgentIdentity, IDProducerType, err)
	}
	id, ok := p.(*IDProducer)
	if !ok {
		return nil, fmt.Errorf("%q (type %s) is not a %s", attribute, p.TypedName().Type, IDProducerType)
	}
	return id, nil
}

// Parameters implements scheduling.ParameterReporter.
func (a *affinity) Parameters() any { return a.params }

// endpoint returns the name of the request's session endpoint, if any.
func (a *affinity) endpoint(ctx context.Context, req *scheduling.Request) (string, bool) {
	if a.binds != nil {
		id := a.sessionID(req)
		if id == "" {
			return "", false
		}
		return a.binds.lookup(bindingKey(id))
	}
	token := req.Header(a.header)
	if token == "" {
		return "", false
	}
	name, err := base64.StdEncoding.DecodeString(token)
	if err != nil {
		a.logger.LogAttrs(ctx, telemetry.LevelRequest, "ignoring malformed session token",
			slog.String("request_id", req.ID), slog.String("error", err.Error()))
		return "", false
	}
	return string(name), true
}

// sessionID is the request's session by the first source that has one.
func (a *affinity) sessionID(req *scheduling.Request) string {
	for _, s := range a.sources {
		if s.Header != "" {
			if v := req.Header(s.Header); v != "" {
				return v
			}
			continue
		}
		if p := a.ids[s.Attribute]; p != nil {
			if v := p.SessionID(req); v != "" {
				return v
			}
			continue
		}
		if v := agentidentity.Resolve(a.agent, req.Header); v != "" {
			return v
		}
	}
	return ""
}

// target is the pick the session follows: profileName's, else the
// primary.
func (a *affinity) target(res *scheduling.Result) (scheduling.Target, bool) {
	if a.params.ProfileName == "" {
		return res.Primary.Target()
	}
	for _, pr := range res.Profiles {
		if pr.Profile == a.params.ProfileName && pr.Err == nil {
			return pr.Target()
		}
	}
	return scheduling.Target{}, false
}

// PreRequest implements scheduling.PreRequest: with session_id, the
// decision binds the session to its endpoint (an effect, applied by
// ApplyEffect on every replica).
func (a *affinity) PreRequest(_ context.Context, _ *scheduling.CycleState, req *scheduling.Request, res *scheduling.Result) {
	if a.binds == nil {
		return
	}
	id := a.sessionID(req)
	t, ok := a.target(res)
	if id == "" || !ok {
		return
	}
	key := [1]uint64{bindingKey(id)}
	name := [1]string{t.Endpoint.Name}
	res.RecordEffect(a, name[:], key[:], 0)
}

// ApplyEffect implements scheduling.Projection.
func (a *affinity) ApplyEffect(_ uint64, at time.Time, e *scheduling.Effect) {
	if a.binds == nil || len(e.Blocks) != 1 || len(e.Endpoints) != 1 {
		return
	}
	a.binds.bind(e.Blocks[0], e.Endpoints[0], at)
}

// EndpointRemoved implements scheduling.EndpointRemover.
func (a *affinity) EndpointRemoved(name string) {
	if a.binds != nil {
		a.binds.removeEndpoint(name)
	}
}

// StateRetention implements scheduling.StateRetainer.
func (a *affinity) StateRetention() time.Duration {
	if a.binds == nil {
		return 0
	}
	return a.binds.ttl
}

// Scorer is session-affinity-scorer: 1 for the session's endpoint, 0 for
// the others.
type Scorer struct{ *affinity }

// NewScorer builds a session-affinity-scorer.
func NewScorer(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	a, err := newAffinity(ScorerType, name, raw, h)
	if err != nil {
		return nil, err
	}
	return &Scorer{a}, nil
}

// Score implements scheduling.Scorer.
func (s *Scorer) Score(ctx context.Context, _ *scheduling.CycleState, req *scheduling.Request, eps []*scheduling.Endpoint, scores []float64) {
	name, ok := s.endpoint(ctx, req)
	if !ok {
		return
	}
	for i, e := range eps {
		if e.Name == name {
			scores[i] = 1
		}
	}
}

// ResponseReceived implements scheduling.ResponseReceived: with
// encoded_endpoint_header, the response names its endpoint for the
// client.
func (s *Scorer) ResponseReceived(_ context.Context, _ *scheduling.Request, resp *scheduling.Response) {
	setToken(s.affinity, resp)
}

// Filter is session-affinity-filter: only the session's endpoint while it
// is a candidate, else every candidate (it never empties a profile).
type Filter struct{ *affinity }

// NewFilter builds a session-affinity-filter.
func NewFilter(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	return newFilter(FilterType)(name, raw, h)
}

func newFilter(typ string) scheduling.Factory {
	return func(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
		a, err := newAffinity(typ, name, raw, h)
		if err != nil {
			return nil, err
		}
		return &Filter{a}, nil
	}
}

// Filter implements scheduling.Filter.
func (f *Filter) Filter(ctx context.Context, _ *scheduling.CycleState, req *scheduling.Request, in, dst []*scheduling.Endpoint) []*scheduling.Endpoint {
	if name, ok := f.endpoint(ctx, req); ok {
		for _, e := range in {
			if e.Name == name {
				return append(dst, e)
			}
		}
	}
	return append(dst, in...)
}

// ResponseReceived implements scheduling.ResponseReceived.
func (f *Filter) ResponseReceived(_ context.Context, _ *scheduling.Request, resp *scheduling.Response) {
	setToken(f.affinity, resp)
}

// setToken writes the serving endpoint's token on the response
// (encoded_endpoint_header): the primary target's, or the prefill
// target's when profileName names the prefill profile.
func setToken(a *affinity, resp *scheduling.Response) {
	if a.binds != nil {
		return
	}
	t := resp.Target
	if a.params.ProfileName != "" && resp.Prefill.Endpoint != nil && a.params.ProfileName == resp.PrefillProfile {
		t = resp.Prefill
	}
	if t.Endpoint != nil {
		resp.SetHeader(a.header, Token(t.Endpoint.Name))
	}
}

// Token encodes an endpoint name as a session token.
func Token(endpoint string) string {
	return base64.StdEncoding.EncodeToString([]byte(endpoint))
}
