package app

import (
	"context"
	"fmt"
	"time"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/services/picker/internal/projection"
)

// replayWindow is how much of the streams a rebuild replays: the flag, or
// longer when a plugin's state lives longer (a request timeout).
func (a *app) replayWindow() time.Duration {
	lease := a.loader.Acquire()
	defer lease.Release()
	return max(a.cfg.ReplayWindow, lease.Scheduler().StateRetention())
}

// followStreams replays the last replay window of completions and
// decisions into the projections, then follows both streams. The picker is
// ready once the replay is done.
func (a *app) followStreams(ctx context.Context) error {
	completions, err := bus.CompletionsSubject(a.cfg.Pool)
	if err != nil {
		return err
	}
	decisions, err := bus.DecisionsSubject(a.cfg.Pool)
	if err != nil {
		return err
	}
	window := a.replayWindow()
	since := time.Now().Add(-window)
	// What was applied already (this replica's own decisions, what came
	// by RPC or the live path first) is passed over undecoded.
	cc, err := bus.Consume(ctx, a.js, bus.ConsumeOptions{Stream: bus.CompletionsStream, FilterSubject: completions, Start: since, Logger: a.log, Registerer: a.reg,
		Skip: func(id string) bool { return a.folder.CompletionSeen(id, projection.SourceStream) }},
		func(c *eventsv1.RequestCompleted, _ bus.Meta) {
			if !a.cfg.LocalView {
				a.folder.Completion(ctx, c, projection.SourceStream)
			}
		})
	if err != nil {
		return fmt.Errorf("follow completions: %w", err)
	}
	a.boot.OnClose(cc.Close)
	dc, err := bus.Consume(ctx, a.js, bus.ConsumeOptions{Stream: bus.DecisionsStream, FilterSubject: decisions, Start: since, Logger: a.log, Skip: a.folder.DecisionSeen},
		func(d *eventsv1.RoutingDecision, _ bus.Meta) {
			if !a.cfg.LocalView || d.GetReplica() == a.cfg.Replica {
				a.folder.Decision(d)
			}
		})
	if err != nil {
		return fmt.Errorf("follow decisions: %w", err)
	}
	a.boot.OnClose(dc.Close)
	if err := a.followLive(completions, decisions); err != nil {
		return err
	}
	a.consumers = []*bus.Consumer{cc, dc}
	a.following.Store(true)
	a.boot.Go(func(context.Context) {
		start := time.Now()
		if caughtUp(a.bgCtx, cc, dc) {
			a.caughtUp.Store(true)
			a.log.Info("projections rebuilt from the streams", "window", window, "took", time.Since(start).Round(time.Millisecond))
		}
	})
	return nil
}

// followLive subscribes to the decision and completion subjects over core
// NATS as well: the server hands a message to core subscribers as it
// receives it, before the stream has stored it and its consumers have
// delivered it, so another replica's decision is counted here sooner (on a
// busy machine the stream's extra hops cost milliseconds, during which
// this replica would route as if the request were not in flight). The
// streams still deliver everything (replays, and what the live path drops
// when this replica is slow); the Folder applies each event once, whichever
// way comes first.
func (a *app) followLive(completions, decisions string) error {
	cs, err := bus.Subscribe(a.nc, completions, func(c *eventsv1.RequestCompleted, _ string) {
		if !a.cfg.LocalView {
			a.folder.Completion(a.bgCtx, c, projection.SourceLive)
		}
	}, bus.WithLogger(a.log), bus.WithSkip(func(id string) bool { return a.folder.CompletionSeen(id, projection.SourceLive) }))
	if err != nil {
		return fmt.Errorf("follow completions live: %w", err)
	}
	a.boot.OnClose(func() { _ = cs.Close() })
	ds, err := bus.Subscribe(a.nc, decisions, func(d *eventsv1.RoutingDecision, _ string) {
		if !a.cfg.LocalView || d.GetReplica() == a.cfg.Replica {
			a.folder.Decision(d)
		}
	}, bus.WithLogger(a.log), bus.WithSkip(a.folder.DecisionSeen))
	if err != nil {
		return fmt.Errorf("follow decisions live: %w", err)
	}
	a.boot.OnClose(func() { _ = ds.Close() })
	return nil
}

// caughtUp waits until every consumer delivered what its stream held when
// it started; false if ctx ended or a consumer stopped first.
func caughtUp(ctx context.Context, cs ...*bus.Consumer) bool {
	for _, c := range cs {
		select {
		case <-c.CaughtUp():
		case <-c.Done():
			return false
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// reloaded runs after a new config is put in force. Projections that
// started empty (new plugins, or plugins whose state could not carry over)
// are rebuilt from the last replay window of the streams, as a restarted
// replica would rebuild them, so that every replica holds the same state.
func (a *app) reloaded(s *scheduling.Scheduler) {
	fresh := s.Fresh()
	if len(fresh) == 0 || !a.following.Load() {
		return // the initial replay covers a config loaded before it
	}
	a.boot.Go(func(context.Context) {
		if err := a.rebuild(s); err != nil && a.bgCtx.Err() == nil {
			a.log.Warn("rebuilding the state of a reloaded config failed; it builds up from new decisions", "error", err)
		}
	})
	a.log.Info("rebuilding the state of the reloaded config's new plugins from the streams", "plugins", fmt.Sprint(fresh))
}

// rebuild replays the replay window into s. Projections are idempotent, so
// the plugins that kept their state are not disturbed.
func (a *app) rebuild(s *scheduling.Scheduler) error {
	ctx := a.bgCtx
	completions, err := bus.CompletionsSubject(a.cfg.Pool)
	if err != nil {
		return err
	}
	decisions, err := bus.DecisionsSubject(a.cfg.Pool)
	if err != nil {
		return err
	}
	window := max(a.cfg.ReplayWindow, s.StateRetention())
	since := time.Now().Add(-window)
	start := time.Now()
	cc, err := bus.Consume(ctx, a.js, bus.ConsumeOptions{Stream: bus.CompletionsStream, FilterSubject: completions, Start: since, Logger: a.log},
		func(c *eventsv1.RequestCompleted, _ bus.Meta) {
			if !a.cfg.LocalView {
				a.folder.ReplayCompletion(ctx, s, c)
			}
		})
	if err != nil {
		return err
	}
	defer cc.Close()
	dc, err := bus.Consume(ctx, a.js, bus.ConsumeOptions{Stream: bus.DecisionsStream, FilterSubject: decisions, Start: since, Logger: a.log},
		func(d *eventsv1.RoutingDecision, _ bus.Meta) {
			if !a.cfg.LocalView || d.GetReplica() == a.cfg.Replica {
				a.folder.Replay(s, d)
			}
		})
	if err != nil {
		return err
	}
	defer dc.Close()
	if !caughtUp(ctx, cc, dc) {
		return fmt.Errorf("replay stopped before catching up")
	}
	a.log.Info("reloaded config's state rebuilt from the streams", "window", window, "took", time.Since(start).Round(time.Millisecond))
	return nil
}
