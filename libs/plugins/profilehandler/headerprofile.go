package profilehandler

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/hermod/hermod/libs/scheduling"
)

// HeaderType is header-profile-handler (llm-d router v0.10): the request
// chooses its profile by a header.
const HeaderType = "header-profile-handler"

// Defaults of header-profile-handler.
const (
	DefaultProfileHeader  = "EPP-Profile"
	DefaultHeaderFallback = "decode"
)

func init() {
	scheduling.Register(scheduling.Registration{Type: HeaderType, New: newHeaderProfile})
}

// HeaderProfileParams are header-profile-handler's parameters.
type HeaderProfileParams struct {
	HeaderName     string `json:"headerName"`
	DefaultProfile string `json:"defaultProfile"`
}

// HeaderProfile runs the one profile a request's header names: with one
// profile configured, always that one; without the header, defaultProfile;
// a header naming no configured profile is the client's error (400: the
// request says which profiles there are).
type HeaderProfile struct {
	scheduling.Named
	params   HeaderProfileParams
	header   string
	profiles []string
}

func newHeaderProfile(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	p := HeaderProfileParams{HeaderName: DefaultProfileHeader, DefaultProfile: DefaultHeaderFallback}
	if err := scheduling.DecodeParameters(raw, &p, h); err != nil {
		return nil, err
	}
	if p.HeaderName == "" {
		return nil, scheduling.ParamErrorf("headerName", "must not be empty")
	}
	return &HeaderProfile{Named: scheduling.Named{Type: HeaderType, Name: name}, params: p, header: strings.ToLower(p.HeaderName)}, nil
}

// Parameters implements scheduling.ParameterReporter.
func (hp *HeaderProfile) Parameters() any { return hp.params }

// CheckProfiles implements scheduling.ProfileHandler: with several
// profiles, defaultProfile must be one of them.
func (hp *HeaderProfile) CheckProfiles(profiles []string) error {
	hp.profiles = append([]string(nil), profiles...)
	if len(profiles) > 1 && !slices.Contains(profiles, hp.params.DefaultProfile) {
		return fmt.Errorf("defaultProfile %q is not a configured profile (%s)", hp.params.DefaultProfile, strings.Join(profiles, ", "))
	}
	return nil
}

// Run implements scheduling.ProfileHandler.
func (hp *HeaderProfile) Run(ctx context.Context, _ *scheduling.CycleState, req *scheduling.Request, r scheduling.ProfileRunner, res *scheduling.Result) error {
	profile := hp.profiles[0]
	if len(hp.profiles) > 1 {
		profile = strings.TrimSpace(req.Header(hp.header))
		switch {
		case profile == "":
			profile = hp.params.DefaultProfile
		case !slices.Contains(hp.profiles, profile):
			return &scheduling.Error{Kind: scheduling.KindBadRequest,
				Msg: fmt.Sprintf("%s: %q is not a profile of this pool (%s)", hp.params.HeaderName, profile, strings.Join(hp.profiles, ", "))}
		}
	}
	pr, err := r.RunProfile(ctx, profile)
	if err != nil {
		return err
	}
	res.Primary = pr
	return nil
}
