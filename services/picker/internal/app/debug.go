package app

import (
	"encoding/json"
	"net/http"

	"github.com/hermod/hermod/libs/plugins/activerequest"
	"github.com/hermod/hermod/libs/plugins/nohitlru"
	"github.com/hermod/hermod/libs/plugins/predictedlatency"
	"github.com/hermod/hermod/libs/plugins/prefix"
)

// ProjectionState is what /debug/projection shows: the replica's view of
// the state every replica should share. Two replicas fed the same events
// show the same endpoints.
type ProjectionState struct {
	Replica        string                   `json:"replica"`
	ConfigSource   string                   `json:"config_source"`
	ConfigRevision int64                    `json:"config_revision"`
	InFlight       int                      `json:"in_flight"`
	Endpoints      map[string]EndpointState `json:"endpoints"`
	// LatencyModel is predicted-latency-scorer's model, when configured.
	LatencyModel *predictedlatency.ModelState `json:"latency_model,omitempty"`
}

// EndpointState is one endpoint's share of the projections.
type EndpointState struct {
	InFlight     int `json:"in_flight"`
	PrefixBlocks int `json:"prefix_blocks"`
	// ColdRank is the endpoint's no-hit-lru score for a cold request over
	// every registered endpoint (1 = next in line).
	ColdRank float64 `json:"cold_rank,omitempty"`
}

func (a *app) projectionState() ProjectionState {
	lease := a.loader.Acquire()
	defer lease.Release()
	view := a.set.View()
	st := ProjectionState{Replica: a.cfg.Replica, Endpoints: map[string]EndpointState{}}
	v := lease.Version()
	st.ConfigSource, st.ConfigRevision = v.Source, v.Revision
	names := view.Names()
	for _, name := range names {
		st.Endpoints[name] = EndpointState{}
	}
	for _, p := range lease.Scheduler().Plugins() {
		switch p := p.(type) {
		case *activerequest.Scorer:
			st.InFlight = p.Tracker().Len()
			for _, n := range names {
				e := st.Endpoints[n]
				e.InFlight = p.Tracker().InFlight(n)
				st.Endpoints[n] = e
			}
		case *prefix.Plugin:
			for _, n := range names {
				e := st.Endpoints[n]
				e.PrefixBlocks = p.Index().Blocks(n)
				st.Endpoints[n] = e
			}
		case *predictedlatency.Plugin:
			m := p.Model(names)
			st.LatencyModel = &m
		case *nohitlru.Scorer:
			for n, r := range p.ColdRanks(names) {
				e := st.Endpoints[n]
				e.ColdRank = r
				st.Endpoints[n] = e
			}
		}
	}
	return st
}

func (a *app) debugHandler(ops http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", ops)
	mux.HandleFunc("GET /debug/projection", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(a.projectionState())
	})
	return mux
}
