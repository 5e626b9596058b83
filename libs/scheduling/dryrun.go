package scheduling

import (
	"context"
	"sort"
)

// EndpointFilter is implemented by a Filter whose choice depends only on
// the endpoints' registered attributes (labels, address), not on the
// request, the load or the cycle: a dry run against the registered
// endpoints tells whether it keeps any (see Scheduler.Unmatched). Its Filter
// must accept a zero Request and CycleState.
type EndpointFilter interface {
	Filter
	// FiltersByEndpoint marks the filter; it does nothing.
	FiltersByEndpoint()
}

// Unmatch is a profile whose filters leave none of the endpoints of a dry
// run.
type Unmatch struct {
	// Profile is the profile's name.
	Profile string
	// Filter is the filter that removed the last endpoints.
	Filter string
	// Endpoints is how many endpoints the dry run started with.
	Endpoints int
}

// Unmatched dry-runs the filters of every profile that are EndpointFilters
// over eps and returns the profiles they leave with no endpoint, by profile
// name. The other filters (those of the request or of the load) are
// skipped: they keep everything in the dry run, so every Unmatch found is
// certain, and a request that reaches such a profile fails with KindNoMatch
// until the config or the fleet changes.
func (s *Scheduler) Unmatched(ctx context.Context, eps []*Endpoint) []Unmatch {
	names := make([]string, 0, len(s.profiles))
	for name := range s.profiles {
		names = append(names, name)
	}
	sort.Strings(names)
	var (
		out []Unmatch
		req Request
		cs  CycleState
	)
	for _, name := range names {
		in := eps
		for _, f := range s.profiles[name].filters {
			ef, ok := f.(EndpointFilter)
			if !ok {
				continue
			}
			// A fresh dst each time: a filter may hand back its input.
			in = ef.Filter(ctx, &cs, &req, in, make([]*Endpoint, 0, len(in)))
			if len(in) == 0 {
				out = append(out, Unmatch{Profile: name, Filter: f.TypedName().String(), Endpoints: len(eps)})
				break
			}
		}
	}
	return out
}
