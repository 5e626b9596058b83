// Package profilehandler holds the profile handlers: single-profile-handler,
// disagg-profile-handler (decode, then optional encode and prefill stages
// chosen by deciders), the legacy pd-profile-handler and llm-d's
// data-parallel-profile-handler.
package profilehandler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/hermod/hermod/libs/plugins/decider"
	"github.com/hermod/hermod/libs/plugins/headers"
	"github.com/hermod/hermod/libs/plugins/prefix"
	"github.com/hermod/hermod/libs/reservedheaders"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/telemetry"
)

// Registered plugin types.
const (
	SingleType = "single-profile-handler"
	DisaggType = "disagg-profile-handler"
	PDType     = "pd-profile-handler"
)

// HeaderDataParallelHostPort carries the decode endpoint's own address when
// pd-profile-handler rewrites the target to primaryPort (data parallelism:
// the rank behind primaryPort forwards to it).
const HeaderDataParallelHostPort = reservedheaders.DataParallelHostPort

func init() {
	scheduling.Register(scheduling.Registration{Type: SingleType, New: newSingle})
	scheduling.Register(scheduling.Registration{Type: DisaggType, New: newDisagg})
	scheduling.Register(scheduling.Registration{Type: PDType, New: newPD})
}

// Single runs the one configured profile; its result is primary.
type Single struct {
	scheduling.Named
	profile string
}

func newSingle(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	var none struct{}
	if err := scheduling.DecodeParameters(raw, &none, h); err != nil {
		return nil, err
	}
	return &Single{Named: scheduling.Named{Type: SingleType, Name: name}}, nil
}

// CheckProfiles implements scheduling.ProfileHandler.
func (s *Single) CheckProfiles(profiles []string) error {
	if len(profiles) != 1 {
		return fmt.Errorf("%s runs exactly one profile, but %d are configured (%s); use disagg-profile-handler for several",
			s.Type, len(profiles), strings.Join(profiles, ", "))
	}
	s.profile = profiles[0]
	return nil
}

// Run implements scheduling.ProfileHandler.
func (s *Single) Run(ctx context.Context, _ *scheduling.CycleState, _ *scheduling.Request, r scheduling.ProfileRunner, res *scheduling.Result) error {
	pr, err := r.RunProfile(ctx, s.profile)
	if err != nil {
		return err
	}
	res.Primary = pr
	return nil
}

// DisaggParams are disagg-profile-handler's parameters (nested form; the
// legacy flat keys map onto it).
type DisaggParams struct {
	Profiles struct {
		Decode  string `json:"decode"`
		Prefill string `json:"prefill"`
		Encode  string `json:"encode"`
	} `json:"profiles"`
	Deciders struct {
		Prefill string `json:"prefill,omitempty"`
		Encode  string `json:"encode,omitempty"`
	} `json:"deciders"`
}

// disaggWire is what the config may hold: the nested form, and the legacy
// flat keys that map onto it.
type disaggWire struct {
	Profiles struct {
		Decode  *string `json:"decode"`
		Prefill *string `json:"prefill"`
		Encode  *string `json:"encode"`
	} `json:"profiles"`
	Deciders struct {
		Prefill *string `json:"prefill"`
		Encode  *string `json:"encode"`
	} `json:"deciders"`
	DecodeProfile            *string `json:"decodeProfile"`
	PrefillProfile           *string `json:"prefillProfile"`
	EncodeProfile            *string `json:"encodeProfile"`
	PrefillDeciderPluginName *string `json:"prefillDeciderPluginName"`
	EncodeDeciderPluginName  *string `json:"encodeDeciderPluginName"`
	DeciderPluginName        *string `json:"deciderPluginName"`
}

// resolve maps the wire form onto DisaggParams: a nested key wins, then
// the legacy keys in priority order (each with a deprecation warning; one
// shadowed by a nested key is reported as ignored), then the default.
func (w *disaggWire) resolve(h scheduling.Handle) DisaggParams {
	type legacy struct {
		key string
		v   *string
	}
	pick := func(nestedKey string, nested *string, def string, legacies ...legacy) string {
		out := def
		for i := len(legacies) - 1; i >= 0; i-- { // lowest priority first
			if l := legacies[i]; l.v != nil {
				if nested != nil {
					h.Warn(fmt.Sprintf("parameters.%s is deprecated and ignored: parameters.%s is set", l.key, nestedKey))
					continue
				}
				h.Warn(fmt.Sprintf("parameters.%s is deprecated; use parameters.%s", l.key, nestedKey))
				out = *l.v
			}
		}
		if nested != nil {
			out = *nested
		}
		return out
	}
	var p DisaggParams
	p.Profiles.Decode = pick("profiles.decode", w.Profiles.Decode, "decode", legacy{"decodeProfile", w.DecodeProfile})
	p.Profiles.Prefill = pick("profiles.prefill", w.Profiles.Prefill, "prefill", legacy{"prefillProfile", w.PrefillProfile})
	p.Profiles.Encode = pick("profiles.encode", w.Profiles.Encode, "encode", legacy{"encodeProfile", w.EncodeProfile})
	// deciderPluginName has lower priority than prefillDeciderPluginName
	p.Deciders.Prefill = pick("deciders.prefill", w.Deciders.Prefill, "",
		legacy{"prefillDeciderPluginName", w.PrefillDeciderPluginName}, legacy{"deciderPluginName", w.DeciderPluginName})
	p.Deciders.Encode = pick("deciders.encode", w.Deciders.Encode, "", legacy{"encodeDeciderPluginName", w.EncodeDeciderPluginName})
	return p
}

// Disagg runs decode first (primary), then encode when the encode decider
// says so, then prefill when the prefill decider says so. A failed optional
// stage leaves the request decode-only. When a prefix-cache plugin is
// declared before it, the prefill decider sees its match for the decode pod
// even if no profile runs the prefix scorer.
type Disagg struct {
	scheduling.Named
	params  DisaggParams
	prefill scheduling.PrefillDecider
	encode  scheduling.EncodeDecider
	prefix  scheduling.PrefixMatcher
	logger  *slog.Logger
}

func newDisagg(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	var wire disaggWire
	if err := scheduling.DecodeParameters(raw, &wire, h); err != nil {
		return nil, err
	}
	w := wire.resolve(h)
	d := &Disagg{Named: scheduling.Named{Type: DisaggType, Name: name}, params: w, logger: h.Logger()}
	for _, f := range []struct{ field, v string }{{"profiles.decode", w.Profiles.Decode}, {"profiles.prefill", w.Profiles.Prefill}, {"profiles.encode", w.Profiles.Encode}} {
		if f.v == "" {
			return nil, scheduling.ParamErrorf(f.field, "must not be empty")
		}
	}
	if w.Deciders.Prefill != "" {
		p, err := h.Plugin(w.Deciders.Prefill)
		if err != nil {
			return nil, scheduling.ParamErrorf("deciders.prefill", "%v", err)
		}
		dec, ok := p.(scheduling.PrefillDecider)
		if !ok {
			return nil, scheduling.ParamErrorf("deciders.prefill", "plugin %q (type %s) is not a prefill decider", w.Deciders.Prefill, p.TypedName().Type)
		}
		d.prefill = dec
	}
	if w.Deciders.Encode != "" {
		p, err := h.Plugin(w.Deciders.Encode)
		if err != nil {
			return nil, scheduling.ParamErrorf("deciders.encode", "%v", err)
		}
		dec, ok := p.(scheduling.EncodeDecider)
		if !ok {
			return nil, scheduling.ParamErrorf("deciders.encode", "plugin %q (type %s) is not an encode decider", w.Deciders.Encode, p.TypedName().Type)
		}
		d.encode = dec
	}
	if d.prefill != nil || d.encode != nil {
		if err := ensureHeadersHandler(h, w.Profiles.Prefill, w.Profiles.Encode); err != nil {
			return nil, err
		}
	}
	for _, p := range h.Earlier() {
		if m, ok := p.(scheduling.PrefixMatcher); ok {
			d.prefix = m
			break
		}
	}
	return d, nil
}

// ensureHeadersHandler makes sure the decode pod learns where the prefill
// or encode stage ran. A disagg-headers-handler declared earlier does it.
// Without one the handler adds its own, as upstream's disagg handler sets
// the headers itself; one declared later (against Heimdall's order rule)
// does the job all the same, with a warning.
func ensureHeadersHandler(h scheduling.Handle, prefillProfile, encodeProfile string) error {
	for _, p := range h.Earlier() {
		if t := p.TypedName().Type; t == headers.DisaggType || t == headers.DisaggAliasType {
			return nil
		}
	}
	for _, typ := range []string{headers.DisaggType, headers.DisaggAliasType} {
		if _, err := h.Plugin(typ); errors.Is(err, scheduling.ErrDeclaredLater) {
			h.Warn(typ + " is declared after the profile handler; Heimdall requires it before (it sets the headers all the same)")
			return nil
		}
	}
	params, err := json.Marshal(headers.DisaggParams{PrefillProfile: prefillProfile, EncodeProfile: encodeProfile})
	if err != nil {
		return err
	}
	if _, err := h.NewPlugin(headers.DisaggType, headers.DisaggType, params); err != nil {
		return fmt.Errorf("add the disaggregation headers handler: %w", err)
	}
	return nil
}

// Parameters implements scheduling.ParameterReporter.
func (d *Disagg) Parameters() any { return d.params }

// CheckProfiles implements scheduling.ProfileHandler.
func (d *Disagg) CheckProfiles(profiles []string) error {
	need := []struct{ field, name string }{{"profiles.decode", d.params.Profiles.Decode}}
	if d.prefill != nil {
		need = append(need, struct{ field, name string }{"profiles.prefill", d.params.Profiles.Prefill})
	}
	if d.encode != nil {
		need = append(need, struct{ field, name string }{"profiles.encode", d.params.Profiles.Encode})
	}
	for _, n := range need {
		if !slices.Contains(profiles, n.name) {
			return fmt.Errorf("parameters.%s: no scheduling profile named %q (profiles: %s)", n.field, n.name, strings.Join(profiles, ", "))
		}
	}
	return nil
}

// Run implements scheduling.ProfileHandler.
func (d *Disagg) Run(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, r scheduling.ProfileRunner, res *scheduling.Result) error {
	decode, err := r.RunProfile(ctx, d.params.Profiles.Decode)
	if err != nil {
		return err
	}
	res.Primary = decode
	target, _ := decode.Target()
	if d.encode != nil && d.encode.ShouldEncode(ctx, cs, req) {
		if enc, err := r.RunProfile(ctx, d.params.Profiles.Encode); err == nil {
			res.Encode = enc
		} else {
			stageFailed(ctx, d.logger, req, "encode", err)
		}
	}
	if d.prefill != nil && d.prefix != nil {
		d.prefix.MatchPrefix(ctx, cs, req, decode.Endpoints)
	}
	if d.prefill != nil && d.prefill.ShouldPrefill(ctx, cs, req, target) {
		cs.Write(scheduling.PeerEndpointKey, target.Endpoint) // the prefill stage places near the decode pod
		if pf, err := r.RunProfile(ctx, d.params.Profiles.Prefill); err == nil {
			res.Prefill = pf
		} else {
			stageFailed(ctx, d.logger, req, "prefill", err)
		}
	}
	return nil
}

func stageFailed(ctx context.Context, l *slog.Logger, req *scheduling.Request, stage string, err error) {
	l.LogAttrs(ctx, telemetry.V(2), "disaggregated stage found no endpoint; serving without it",
		slog.String("stage", stage), slog.String("request_id", req.ID), slog.String("error", err.Error()))
}

// PDParams are pd-profile-handler's (flat) parameters.
type PDParams struct {
	DecodeProfile     string `json:"decodeProfile"`
	PrefillProfile    string `json:"prefillProfile"`
	PrefixPluginType  string `json:"prefixPluginType"`
	PrefixPluginName  string `json:"prefixPluginName"`
	PrimaryPort       int    `json:"primaryPort"`
	DeciderPluginName string `json:"deciderPluginName"`
}

// PD is the legacy prefill/decode handler: decode first, then prefill when
// its prefill decider says so. primaryPort rewrites the decode target's port
// (the original address travels in x-data-parallel-host-port).
type PD struct {
	scheduling.Named
	params  PDParams
	decider scheduling.PrefillDecider
	prefix  scheduling.PrefixMatcher
	logger  *slog.Logger
}

func newPD(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	var p PDParams
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	prefixNameSet, deciderSet := p.PrefixPluginName != "", p.DeciderPluginName != ""
	if p.DecodeProfile == "" {
		p.DecodeProfile = "decode"
	}
	if p.PrefillProfile == "" {
		p.PrefillProfile = "prefill"
	}
	if p.PrefixPluginType == "" {
		p.PrefixPluginType = prefix.Type
	}
	if p.PrefixPluginName == "" {
		p.PrefixPluginName = p.PrefixPluginType
	}
	if p.DeciderPluginName == "" {
		p.DeciderPluginName = decider.PrefixBasedType
	}
	if p.PrimaryPort != 0 && (p.PrimaryPort < 1 || p.PrimaryPort > 65535) {
		return nil, scheduling.ParamErrorf("primaryPort", "must be between 1 and 65535 (got %d)", p.PrimaryPort)
	}
	pd := &PD{Named: scheduling.Named{Type: PDType, Name: name}, params: p, logger: h.Logger()}

	// The decider: an explicitly named one must be declared earlier; left at
	// its default and not declared at all, the handler makes one itself.
	dp, err := h.Plugin(p.DeciderPluginName)
	switch {
	case err == nil:
	case !deciderSet && errors.Is(err, scheduling.ErrNotDeclared):
		dp, err = h.NewPlugin(decider.PrefixBasedType, p.DeciderPluginName, nil)
		if err != nil {
			return nil, scheduling.ParamErrorf("deciderPluginName", "making the default decider: %v", err)
		}
		h.Warn(fmt.Sprintf("no plugin named %s is declared; using a default %s (nonCachedTokens 0: never disaggregates)", p.DeciderPluginName, decider.PrefixBasedType))
	default:
		return nil, scheduling.ParamErrorf("deciderPluginName", "%v", err)
	}
	dec, ok := dp.(scheduling.PrefillDecider)
	if !ok {
		return nil, scheduling.ParamErrorf("deciderPluginName", "plugin %q (type %s) is not a prefill decider", p.DeciderPluginName, dp.TypedName().Type)
	}
	pd.decider = dec
	if !deciderSet {
		// the effective parameters name it only as the config did: named, it
		// also brings the headers handler
		pd.params.DeciderPluginName = ""
	}
	if deciderSet {
		if err := ensureHeadersHandler(h, p.PrefillProfile, "encode"); err != nil {
			return nil, err
		}
	}

	// The prefix plugin the decider's cached-token count comes from: needed
	// when named explicitly; by default used if declared.
	pp, err := h.Plugin(p.PrefixPluginName)
	switch {
	case err == nil:
		m, ok := pp.(scheduling.PrefixMatcher)
		if !ok || pp.TypedName().Type != p.PrefixPluginType {
			return nil, scheduling.ParamErrorf("prefixPluginName", "plugin %q has type %s, not a %s prefix plugin", p.PrefixPluginName, pp.TypedName().Type, p.PrefixPluginType)
		}
		pd.prefix = m
	case !prefixNameSet && errors.Is(err, scheduling.ErrNotDeclared):
		// no prefix plugin: the decider sees no cached tokens (and the
		// effective parameters name none)
		pd.params.PrefixPluginName = ""
	default:
		return nil, scheduling.ParamErrorf("prefixPluginName", "%v", err)
	}
	return pd, nil
}

// Parameters implements scheduling.ParameterReporter.
func (pd *PD) Parameters() any { return pd.params }

// CheckProfiles implements scheduling.ProfileHandler.
func (pd *PD) CheckProfiles(profiles []string) error {
	for _, n := range []struct{ field, name string }{{"decodeProfile", pd.params.DecodeProfile}, {"prefillProfile", pd.params.PrefillProfile}} {
		if !slices.Contains(profiles, n.name) {
			return fmt.Errorf("parameters.%s: no scheduling profile named %q (profiles: %s)", n.field, n.name, strings.Join(profiles, ", "))
		}
	}
	return nil
}

// Run implements scheduling.ProfileHandler.
func (pd *PD) Run(ctx context.Context, cs *scheduling.CycleState, req *scheduling.Request, r scheduling.ProfileRunner, res *scheduling.Result) error {
	decode, err := r.RunProfile(ctx, pd.params.DecodeProfile)
	if err != nil {
		return err
	}
	res.Primary = decode
	target, _ := decode.Target()
	if pd.prefix != nil {
		pd.prefix.MatchPrefix(ctx, cs, req, decode.Endpoints)
	}
	if pd.decider.ShouldPrefill(ctx, cs, req, target) {
		cs.Write(scheduling.PeerEndpointKey, target.Endpoint)
		if pf, err := r.RunProfile(ctx, pd.params.PrefillProfile); err == nil {
			res.Prefill = pf
		} else {
			stageFailed(ctx, pd.logger, req, "prefill", err)
		}
	}
	if pd.params.PrimaryPort != 0 {
		toPrimaryPort(res, decode, pd.params.PrimaryPort)
	}
	return nil
}
