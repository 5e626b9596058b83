package cli

import (
	"context"
	"fmt"
	"io"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/libs/scheduling"
)

// warnUnmatched dry-runs the config's endpoint filters (label and role
// filters) against the pool's registered endpoints and warns on stderr
// about every profile they leave with no endpoint: the requests that
// profile serves would fail with 503 no_endpoint_matched. It returns how
// many profiles it warned about. When the endpoints cannot be listed it
// says so and checks nothing: the check is advice, not a gate.
func warnUnmatched(ctx context.Context, cli *clientv3.Client, pool string, data []byte, stderr io.Writer) int {
	lctx, cancel := context.WithTimeout(ctx, dialTimeout)
	snap, err := coord.LoadSnapshot(lctx, cli, pool)
	cancel()
	if err != nil {
		fmt.Fprintf(stderr, "note: the filters were not checked against the registered endpoints (%v)\n", err)
		return 0
	}
	if len(snap.Endpoints) == 0 {
		fmt.Fprintf(stderr, "note: pool %s has no registered endpoints; the filters were not checked against any\n", pool)
		return 0
	}
	s, err := buildConfig(data)
	if err != nil { // validated already: cannot happen
		fmt.Fprintf(stderr, "note: the filters were not checked: %v\n", err)
		return 0
	}
	defer func() { _ = s.Close() }()
	eps := make([]*scheduling.Endpoint, 0, len(snap.Endpoints))
	for _, e := range snap.Sorted() {
		eps = append(eps, scheduling.NewEndpoint(e.GetName(), e.GetAddress(), int(e.GetPort()), e.GetLabels()))
	}
	unmatched := s.Unmatched(ctx, eps)
	for _, u := range unmatched {
		fmt.Fprintf(stderr, "warning: profile %q: filter %s matches none of the %d registered endpoints of pool %s; "+
			"the requests this profile serves would fail with 503 %s\n", u.Profile, u.Filter, u.Endpoints, pool, openai.CodeNoEndpointMatched)
	}
	return len(unmatched)
}
