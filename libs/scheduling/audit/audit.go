// Package audit turns scheduling results into RoutingDecision events: what
// was decided, by which profile, with every scorer's score per endpoint.
package audit

import (
	"fmt"
	"sort"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/scheduling"
)

// Decision builds the RoutingDecision event of one scheduling result. Call
// it before res is released.
func Decision(pool string, at time.Time, req *scheduling.Request, res *scheduling.Result) *eventsv1.RoutingDecision {
	d := &eventsv1.RoutingDecision{
		DecisionId: DecisionID(res.DecisionID),
		RequestId:  req.ID,
		Pool:       pool,
		Model:      req.Model,
		Adapter:    req.Adapter,
		Time:       timestamppb.New(at),
	}
	if t, ok := res.Primary.Target(); ok {
		d.PrimaryEndpoint = t.HostPort()
		d.PrimaryName = t.Endpoint.Name
	}
	if t, ok := res.Prefill.Target(); ok {
		d.PrefillEndpoint = t.HostPort()
	}
	if res.Encode != nil {
		for _, t := range res.Encode.Targets {
			d.EncodeEndpoints = append(d.EncodeEndpoints, t.HostPort())
		}
	}
	for _, pr := range res.Profiles {
		d.Profiles = append(d.Profiles, profile(res, pr))
	}
	if len(res.Headers) > 0 {
		d.Headers = make(map[string]string, len(res.Headers))
		for k, v := range res.Headers {
			d.Headers[k] = v
		}
	}
	if len(res.RemoveHeaders) > 0 {
		d.RemovedHeaders = append([]string(nil), res.RemoveHeaders...)
		sort.Strings(d.RemovedHeaders)
	}
	return d
}

// DecisionID formats a decision id as events carry it: 16 hex digits.
func DecisionID(id uint64) string {
	return fmt.Sprintf("%016x", id)
}

func profile(res *scheduling.Result, pr *scheduling.ProfileResult) *eventsv1.ProfileDecision {
	p := &eventsv1.ProfileDecision{Profile: pr.Profile, Role: role(res, pr)}
	if pr.Err != nil {
		p.Error = pr.Err.Error()
	}
	scorers := pr.Scorers()
	for _, s := range scorers {
		p.Scorers = append(p.Scorers, &eventsv1.Scorer{Name: s.Name, Type: s.Type, Weight: s.Weight})
	}
	// A profile whose filters left nothing has no endpoints to report.
	for i, e := range pr.Endpoints {
		es := &eventsv1.EndpointScores{Name: e.Name, Address: e.HostPort(), Scores: make([]float64, len(scorers)), Total: pr.Totals[i]}
		for s := range scorers {
			es.Scores[s] = pr.Score(s, i)
		}
		p.Endpoints = append(p.Endpoints, es)
	}
	for _, t := range pr.Targets {
		p.Targets = append(p.Targets, t.HostPort())
	}
	return p
}

func role(res *scheduling.Result, pr *scheduling.ProfileResult) eventsv1.ProfileRole {
	switch pr {
	case res.Primary:
		return eventsv1.ProfileRole_PROFILE_ROLE_PRIMARY
	case res.Prefill:
		return eventsv1.ProfileRole_PROFILE_ROLE_PREFILL
	case res.Encode:
		return eventsv1.ProfileRole_PROFILE_ROLE_ENCODE
	}
	return eventsv1.ProfileRole_PROFILE_ROLE_UNUSED
}
