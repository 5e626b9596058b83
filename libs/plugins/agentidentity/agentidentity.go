// Package agentidentity is the llm-d router's agent-identity plugin: a
// request's session identity from the headers coding agents send, so that
// every turn of an agent's session is one flow (fairness id) in flow
// control when the request names no fairness id itself. The picker loads
// it; the gateway's flow control, reading the same EndpointPickerConfig
// (hermod-gateway --flow-control), applies it.
package agentidentity

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hermod/hermod/libs/scheduling"
)

// Type is the plugin type.
const Type = "agent-identity"

// DefaultSessionHeaders are the agents' session headers, in the order they
// are looked at: Claude Code's, OpenCode's, Codex's and Codex's older one.
var DefaultSessionHeaders = []string{"x-claude-code-session-id", "x-session-affinity", "session-id", "session_id"}

// maxAdditionalHeaders bounds additionalSessionHeaders (each is a lookup
// per request).
const maxAdditionalHeaders = 32

func init() {
	scheduling.Register(scheduling.Registration{Type: Type, New: func(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
		p, err := Parse(raw, h)
		if err != nil {
			return nil, err
		}
		return &Plugin{Named: scheduling.Named{Type: Type, Name: name}, params: p}, nil
	}})
}

// Params are agent-identity's parameters.
type Params struct {
	// AdditionalSessionHeaders are looked at before the defaults, in order.
	AdditionalSessionHeaders []string `json:"additionalSessionHeaders"`
}

// Parse reads and checks agent-identity's parameters (h, which may be nil,
// hears the warnings).
func Parse(raw json.RawMessage, h scheduling.Handle) (Params, error) {
	var p Params
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return Params{}, err
	}
	if len(p.AdditionalSessionHeaders) > maxAdditionalHeaders {
		return Params{}, scheduling.ParamErrorf("additionalSessionHeaders", "at most %d headers (got %d)", maxAdditionalHeaders, len(p.AdditionalSessionHeaders))
	}
	for i, name := range p.AdditionalSessionHeaders {
		if !validHeaderName(name) {
			return Params{}, scheduling.ParamErrorf(fmt.Sprintf("additionalSessionHeaders[%d]", i), "%q is not a header name", name)
		}
		p.AdditionalSessionHeaders[i] = strings.ToLower(name)
	}
	return p, nil
}

// Headers are the headers looked at, in order: the additional ones, then
// the defaults.
func (p Params) Headers() []string {
	return append(append(make([]string, 0, len(p.AdditionalSessionHeaders)+len(DefaultSessionHeaders)), p.AdditionalSessionHeaders...), DefaultSessionHeaders...)
}

// Resolve is the first non-empty value of headers that get returns ("":
// none).
func Resolve(headers []string, get func(name string) string) string {
	for _, h := range headers {
		if v := strings.TrimSpace(get(h)); v != "" {
			return v
		}
	}
	return ""
}

// Plugin is a declared agent-identity. In the picker it takes part in no
// scheduling cycle.
type Plugin struct {
	scheduling.Named
	params Params
}

// Parameters implements scheduling.ParameterReporter.
func (p *Plugin) Parameters() any { return p.params }

// SessionHeaders are the headers the plugin reads, in order (the
// session-affinity plugins' session_id strategy reads the same).
func (p *Plugin) SessionHeaders() []string { return p.params.Headers() }

// validHeaderName reports whether name is an HTTP field name (RFC 9110
// token).
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range []byte(name) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
