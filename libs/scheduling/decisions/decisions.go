// Package decisions converts between scheduling results and the
// RoutingDecision events published on hermod.decisions.<pool>: what was
// decided, by which profile, with every scorer's score per endpoint (for
// audit), and what the decision changed in stateful plugins (for the
// projections of every picker replica).
package decisions

import (
	"fmt"
	"sort"
	"strconv"

	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/scheduling"
)

// Event builds the RoutingDecision event of one scheduling result. Call it
// before res is released; the event shares nothing with res.
func Event(pool string, req *scheduling.Request, res *scheduling.Result) *eventsv1.RoutingDecision {
	d := &eventsv1.RoutingDecision{
		DecisionId: ID(res.DecisionID),
		RequestId:  req.ID,
		Pool:       pool,
		Model:      req.Model,
		Adapter:    req.Adapter,
		Time:       timestamppb.New(res.Time),
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
	if len(res.Effects) > 0 {
		d.Effects = make([]*eventsv1.PluginEffect, len(res.Effects))
		for i, e := range res.Effects {
			d.Effects[i] = &eventsv1.PluginEffect{
				Plugin:    e.Plugin.Name,
				Type:      e.Plugin.Type,
				Endpoints: append([]string(nil), e.Endpoints...),
				Blocks:    append([]uint64(nil), e.Blocks...),
				Capacity:  e.Capacity,
				Values:    append([]float64(nil), e.Values...),
			}
		}
	}
	return d
}

// Effects returns the plugin effects a decision event carries, for
// Scheduler.ApplyEffects. They share the event's slices.
func Effects(d *eventsv1.RoutingDecision) []scheduling.Effect {
	if len(d.GetEffects()) == 0 {
		return nil
	}
	out := make([]scheduling.Effect, len(d.GetEffects()))
	for i, e := range d.GetEffects() {
		out[i] = scheduling.Effect{
			Plugin:    scheduling.TypedName{Name: e.GetPlugin(), Type: e.GetType()},
			Endpoints: e.GetEndpoints(),
			Blocks:    e.GetBlocks(),
			Capacity:  e.GetCapacity(),
			Values:    e.GetValues(),
		}
	}
	return out
}

// ID formats a decision id as events carry it: 16 hex digits.
func ID(id uint64) string {
	return fmt.Sprintf("%016x", id)
}

// ParseID parses a decision id formatted by ID. The zero id is invalid.
func ParseID(s string) (uint64, error) {
	if len(s) != 16 {
		return 0, fmt.Errorf("decision id %q: want 16 hex digits", s)
	}
	id, err := strconv.ParseUint(s, 16, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("decision id %q: want 16 hex digits, not zero", s)
	}
	return id, nil
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
	preds := res.Predictions()
	for i, e := range pr.Endpoints {
		es := &eventsv1.EndpointScores{Name: e.Name, Address: e.HostPort(), Scores: make([]float64, len(scorers)), Total: pr.Totals[i]}
		for s := range scorers {
			es.Scores[s] = pr.Score(s, i)
		}
		if pd, ok := preds.Get(e.Name); ok {
			es.Prediction = &eventsv1.LatencyPrediction{
				TtftSeconds: pd.TTFT.Seconds(), TpotSeconds: pd.TPOT.Seconds(),
				TtftHeadroomSeconds: pd.TTFTHeadroom.Seconds(), TpotHeadroomSeconds: pd.TPOTHeadroom.Seconds(),
				MeetsSlo: pd.MeetsSLO,
			}
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
