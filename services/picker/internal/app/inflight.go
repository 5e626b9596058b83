package app

import (
	"context"
	"fmt"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/libs/inflight"
	"github.com/hermod/hermod/libs/plugins/leastrequest"
	"github.com/hermod/hermod/libs/scheduling"
)

// inflightSync keeps the global in-flight set's members equal to the
// registry's endpoints and repairs expired leases.
type inflightSync struct {
	store   *inflight.Store
	changed chan []string // the registry's endpoint names, latest only
}

// inflightService connects to the in-flight server (with
// --inflight-valkey-address) and provides it to valkey-least-request-picker.
func (a *app) inflightService() ([]scheduling.Option, error) {
	for _, c := range leastrequest.Collectors() {
		if err := a.reg.Register(c); err != nil {
			return nil, fmt.Errorf("in-flight metrics: %w", err)
		}
	}
	if a.cfg.InflightValkeyURL == "" {
		return nil, nil
	}
	opt, err := valkey.ParseURL(a.cfg.InflightValkeyURL)
	if err != nil {
		return nil, fmt.Errorf("--inflight-valkey-address: %w", err)
	}
	opt.DisableCache = true
	opt.ClientName = "hermod-picker-" + a.cfg.Replica
	c, err := valkey.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("--inflight-valkey-address %s: %w", a.cfg.InflightValkeyURL, err)
	}
	a.stops = append(a.stops, c.Close)
	ttl := a.cfg.InflightLeaseTTL
	if ttl <= 0 {
		ttl = inflight.DefaultLeaseTTL
	}
	s := &inflightSync{store: inflight.New(c, a.cfg.Pool, ttl), changed: make(chan []string, 1)}
	a.inflight = s
	a.bg.Add(1)
	go func() { defer a.bg.Done(); a.runInflight(a.bgCtx, s, min(max(ttl/4, time.Second), 30*time.Second)) }()
	return []scheduling.Option{scheduling.WithService(leastrequest.StoreService, s.store)}, nil
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
			if n, err := s.store.Repair(cctx); err != nil {
				a.log.Debug("in-flight lease repair failed", "error", err)
			} else if n > 0 {
				a.log.Info("in-flight counts repaired: leases expired without their completion", "leases", n)
			}
			cancel()
		}
		if pending != nil {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if _, err := s.store.Sync(cctx, pending); err != nil {
				a.log.Debug("in-flight endpoint sync failed (retried)", "error", err)
			} else {
				pending = nil
			}
			cancel()
		}
	}
}
