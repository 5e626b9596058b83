// Package headers holds the plugins that write routing headers:
// disagg-headers-handler (alias prefill-header-handler), which tells the
// decode pod where prefill and encode ran, and response-header-handler,
// which tells the client which pods served it.
package headers

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/hermod/hermod/libs/reservedheaders"
	"github.com/hermod/hermod/libs/scheduling"
)

// Registered plugin types.
const (
	DisaggType         = "disagg-headers-handler"
	DisaggAliasType    = "prefill-header-handler"
	ResponseHeaderType = "response-header-handler"
)

// Header names: every one is reserved (only Hermod sets them; a client's
// copies are removed at the ways in).
const (
	PrefillEndpoint     = reservedheaders.PrefillEndpoint
	EncodeEndpoints     = reservedheaders.EncodeEndpoints
	DestinationEndpoint = reservedheaders.Destination
	DecoderHostPort     = reservedheaders.DecoderHostPort
	PrefillerHostPort   = reservedheaders.PrefillerHostPort
)

func init() {
	scheduling.Register(scheduling.Registration{Type: DisaggType, Aliases: []string{DisaggAliasType}, New: newDisagg})
	scheduling.Register(scheduling.Registration{Type: ResponseHeaderType, New: func(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
		if err := scheduling.DecodeParameters(raw, &struct{}{}, h); err != nil {
			return nil, err
		}
		return &Response{scheduling.Named{Type: ResponseHeaderType, Name: name}}, nil
	}})
}

// DisaggParams are disagg-headers-handler's parameters.
type DisaggParams struct {
	PrefillProfile string `json:"prefillProfile"`
	EncodeProfile  string `json:"encodeProfile"`
}

// Disagg strips client-supplied routing headers and sets
// mif-prefill-endpoint (host:port of the prefill target) and
// mif-encode-endpoints (comma-separated encode targets) when those stages
// picked endpoints. The stages are the ones the profile handler recorded
// (Result.Prefill, Result.Encode), whatever their profiles are called;
// prefillProfile and encodeProfile name them for handlers that record none.
type Disagg struct {
	scheduling.Named
	params DisaggParams
}

func newDisagg(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	p := DisaggParams{PrefillProfile: "prefill", EncodeProfile: "encode"}
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	if p.PrefillProfile == "" {
		return nil, scheduling.ParamErrorf("prefillProfile", "must not be empty")
	}
	if p.EncodeProfile == "" {
		return nil, scheduling.ParamErrorf("encodeProfile", "must not be empty")
	}
	// Both type names build this plugin; it reports the canonical type.
	return &Disagg{Named: scheduling.Named{Type: DisaggType, Name: name}, params: p}, nil
}

// Parameters implements scheduling.ParameterReporter.
func (d *Disagg) Parameters() any { return d.params }

// PreRequest implements scheduling.PreRequest.
func (d *Disagg) PreRequest(_ context.Context, _ *scheduling.CycleState, _ *scheduling.Request, res *scheduling.Result) {
	res.RemoveHeader(PrefillEndpoint)
	res.RemoveHeader(EncodeEndpoints)
	res.RemoveHeader(DestinationEndpoint)
	if pr := stage(res, res.Prefill, d.params.PrefillProfile); pr != nil {
		if t, ok := pr.Target(); ok {
			res.SetHeader(PrefillEndpoint, t.HostPort())
		}
	}
	if pr := stage(res, res.Encode, d.params.EncodeProfile); pr != nil && len(pr.Targets) > 0 {
		var b strings.Builder
		for i, t := range pr.Targets {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(t.HostPort())
		}
		res.SetHeader(EncodeEndpoints, b.String())
	}
}

// stage returns the successful result of a stage: the one the handler
// recorded, else the profile named profile.
func stage(res *scheduling.Result, recorded *scheduling.ProfileResult, profile string) *scheduling.ProfileResult {
	pr := recorded
	if pr == nil {
		pr = res.Result(profile)
	}
	if pr == nil || pr.Err != nil || pr == res.Primary {
		return nil
	}
	return pr
}

// Response sets x-decoder-host-port (always) and x-prefiller-host-port
// (when a prefill pod was used) on responses.
type Response struct{ scheduling.Named }

// ResponseReceived implements scheduling.ResponseReceived.
func (Response) ResponseReceived(_ context.Context, _ *scheduling.Request, resp *scheduling.Response) {
	if resp.Target.Endpoint != nil {
		resp.SetHeader(DecoderHostPort, resp.Target.HostPort())
	}
	if resp.Prefill.Endpoint != nil {
		resp.SetHeader(PrefillerHostPort, resp.Prefill.HostPort())
	}
}
