package engine

import (
	"sync"
	"time"
)

// Triggers of an evaluation.
const (
	TriggerMetrics     = "metrics"
	TriggerQueue       = "queue"
	TriggerCompletions = "completions"
	TriggerFromZero    = "scale-from-zero"
	TriggerConfig      = "config"
	TriggerResync      = "resync"
	TriggerRegistry    = "registry"
)

// trigger is why an evaluation runs: the first event since the last one.
type trigger struct {
	kind      string
	published time.Time // the event's own time
	received  time.Time // when the autoscaler got it
	urgent    bool      // skip the minimum interval (scale from zero)
}

// pending coalesces triggers between evaluations, keeping the earliest
// (the reaction time is measured from it) and whether any was urgent.
type pending struct {
	mu   sync.Mutex
	t    *trigger
	wake chan struct{}
}

func newPending() *pending { return &pending{wake: make(chan struct{}, 1)} }

func (p *pending) add(t trigger) {
	p.mu.Lock()
	if p.t == nil {
		p.t = &t
	} else if t.urgent && !p.t.urgent {
		p.t = &t // the urgent one decides the kind and timing
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// take returns the pending trigger and clears it.
func (p *pending) take() (trigger, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.t == nil {
		return trigger{}, false
	}
	t := *p.t
	p.t = nil
	return t, true
}

// urgent reports whether the pending trigger skips the interval.
func (p *pending) urgent() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.t != nil && p.t.urgent
}
