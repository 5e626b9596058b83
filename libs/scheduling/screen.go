package scheduling

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
)

// PointScreener is the extension_point metric label of screeners.
const PointScreener = "Screener"

// Screener narrows a request's candidates before anything else looks at
// them (upstream's request-control screeners): the cycle preparers, the
// admitters and every profile see only the endpoints that every screener
// keeps. Each screener is given the same candidates and the request goes
// on with those all of them keep, in the first screener's order; when
// none is left it fails with a KindNoMatch error (503) naming the
// screener. A screener is declared in plugins only, never in a profile.
type Screener interface {
	Plugin
	// Screen appends the endpoints of in that it keeps to dst (which never
	// aliases in) and returns dst. It runs before the scheduler's critical
	// section, concurrently for many requests, and does no I/O.
	Screen(ctx context.Context, req *Request, in, dst []*Endpoint) []*Endpoint
}

// screen returns the candidates every screener keeps. A panicking
// screener fails the request with a KindInternal error.
func (s *Scheduler) screen(ctx context.Context, req *Request, candidates []*Endpoint) (kept []*Endpoint, err error) {
	defer func() {
		if p := recover(); p != nil {
			kept, err = nil, &Error{Kind: KindInternal, Msg: fmt.Sprintf("a scheduling plugin panicked: %v", p)}
			s.logger.LogAttrs(ctx, slog.LevelError, "screener panicked", slog.String("request_id", req.ID),
				slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
		}
	}()
	last := s.screeners[0].p
	for i, sc := range s.screeners {
		t := sc.t.start()
		out := sc.p.Screen(ctx, req, candidates, make([]*Endpoint, 0, len(candidates)))
		sc.t.done(t)
		if i == 0 {
			kept = out
		} else {
			keep := make(map[*Endpoint]struct{}, len(out))
			for _, e := range out {
				keep[e] = struct{}{}
			}
			kept = slices.DeleteFunc(kept, func(e *Endpoint) bool {
				_, ok := keep[e]
				return !ok
			})
		}
		last = sc.p
		if len(kept) == 0 {
			break
		}
	}
	if len(kept) == 0 {
		tn := last.TypedName()
		name := tn.Name
		if name == "" {
			name = tn.Type
		}
		return nil, &Error{Kind: KindNoMatch, Filter: name,
			Msg: fmt.Sprintf("no endpoint matched: screener %s left none of the %d ready endpoints", tn, len(candidates))}
	}
	return kept, nil
}
