package app

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/libs/inflight"
	"github.com/hermod/hermod/libs/plugins/leastrequest"
	"github.com/hermod/hermod/libs/scheduling"
)

// inflightSync keeps the global in-flight set's members equal to the
// registry's endpoints and repairs expired leases. Until the server has
// been reached once, picks fall back to scores (store is nil).
type inflightSync struct {
	store   atomic.Pointer[inflight.Store]
	changed chan []string // the registry's endpoint names, latest only
}

var errNotConnected = errors.New("the in-flight server has not been reached yet")

// Pick implements leastrequest.Counter.
func (s *inflightSync) Pick(ctx context.Context, requestID string, candidates []string, limit int) (string, int64, error) {
	st := s.store.Load()
	if st == nil {
		return "", 0, errNotConnected
	}
	return st.Pick(ctx, requestID, candidates, limit)
}

// Release implements leastrequest.Counter.
func (s *inflightSync) Release(ctx context.Context, requestIDs ...string) (int, error) {
	st := s.store.Load()
	if st == nil {
		return 0, errNotConnected
	}
	return st.Release(ctx, requestIDs...)
}

// inflightService provides the in-flight server (with
// --inflight-valkey-address) to valkey-least-request-picker. The picker
// starts whether the server answers or not: it connects in the
// background, and picks fall back to scores meanwhile.
func (a *app) inflightService() ([]scheduling.Option, error) {
	if a.cfg.InflightValkeyURL == "" {
		return nil, nil
	}
	opt, err := a.cfg.InflightValkey.ClientOption(a.cfg.InflightValkeyURL)
	if err != nil {
		return nil, fmt.Errorf("--inflight-valkey-address: %w", err)
	}
	opt.DisableCache = true
	opt.ClientName = "hermod-picker-" + a.cfg.Replica
	ttl := a.cfg.InflightLeaseTTL
	if ttl <= 0 {
		ttl = inflight.DefaultLeaseTTL
	}
	s := &inflightSync{changed: make(chan []string, 1)}
	a.inflight = s
	a.boot.Go(func(context.Context) {
		c := a.connectInflight(a.bgCtx, opt)
		if c == nil {
			return
		}
		defer c.Close()
		s.store.Store(inflight.New(c, a.cfg.Pool, ttl))
		a.runInflight(a.bgCtx, s, min(max(ttl/4, time.Second), 30*time.Second))
	})
	return []scheduling.Option{leastrequest.StoreService.Provide(leastrequest.Counter(s))}, nil
}

// connectInflight dials the server until it answers or ctx ends.
func (a *app) connectInflight(ctx context.Context, opt valkey.ClientOption) valkey.Client {
	for warned := false; ; {
		c, err := valkey.NewClient(opt)
		if err == nil {
			if warned {
				a.log.Info("the in-flight server answers", "address", a.cfg.InflightValkeyURL)
			}
			return c
		}
		if !warned {
			a.log.Warn("the in-flight server does not answer: picking from scores until it does", "address", a.cfg.InflightValkeyURL, "error", err)
			warned = true
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// syncInflight hands the registry's endpoints to the sync loop.
func (a *app) syncInflight(snap coord.Snapshot) {
	s := a.inflight
	if s == nil {
		return
	}
	names := make([]string, 0, len(snap.Endpoints))
	for _, ep := range snap.Endpoints {
		names = append(names, ep.GetName())
	}
	select {
	case <-s.changed: // superseded
	default:
	}
	s.changed <- names
}

func (a *app) runInflight(ctx context.Context, s *inflightSync, repairEvery time.Duration) {
	t := time.NewTicker(repairEvery)
	defer t.Stop()
	var pending []string // names not synced yet (the server was down)
	for {
		select {
		case <-ctx.Done():
			return
		case names := <-s.changed:
			pending = names
		case <-t.C:
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if n, err := s.store.Load().Repair(cctx); err != nil {
				a.log.Debug("in-flight lease repair failed", "error", err)
			} else if n > 0 {
				a.log.Info("in-flight counts repaired: leases expired without their completion", "leases", n)
			}
			cancel()
		}
		if pending != nil {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if _, err := s.store.Load().Sync(cctx, pending); err != nil {
				a.log.Debug("in-flight endpoint sync failed (retried)", "error", err)
			} else {
				pending = nil
			}
			cancel()
		}
	}
}
