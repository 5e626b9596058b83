package flowcontrol

import (
	"maps"
	"sync"
	"time"
)

// Saturation thresholds of the queue/kv rule: an endpoint is saturated
// when its waiting queue reaches QueueDepth or its KV cache KVCacheUtil.
const (
	DefaultQueueDepth  = 5
	DefaultKVCacheUtil = 0.8
	// staleAfter: an endpoint whose metrics are older does not count
	// (it left, or its collector lags).
	staleAfter = 5 * time.Second
)

// PoolSaturation folds the pool's endpoint metrics into one signal: the
// pool is saturated when every endpoint with fresh metrics is.
type PoolSaturation struct {
	QueueDepth  int
	KVCacheUtil float64
	// HoldWhenEmpty: a pool with no endpoint with fresh metrics counts as
	// saturated (requests wait for a pod: scale from zero).
	HoldWhenEmpty bool
	now           func() time.Time

	mu   sync.Mutex
	pods map[string]podLoad
	// registered is the registry's endpoints as Retain last saw them (nil
	// before: every endpoint counts).
	registered map[string]bool
}

type podLoad struct {
	saturated bool
	at        time.Time
}

// NewPoolSaturation returns a tracker with the default thresholds.
func NewPoolSaturation() *PoolSaturation {
	return &PoolSaturation{QueueDepth: DefaultQueueDepth, KVCacheUtil: DefaultKVCacheUtil, now: time.Now, pods: map[string]podLoad{}}
}

// Update records an endpoint's latest metrics; it reports whether the
// pool's saturation may have changed.
func (p *PoolSaturation) Update(endpoint string, waiting int64, kvUsage float64) bool {
	sat := waiting >= int64(p.QueueDepth) || kvUsage >= p.KVCacheUtil
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.registered != nil && !p.registered[endpoint] {
		// a late sample of a pod that left the registry (or of one the
		// registry does not list yet): it does not count
		return false
	}
	old, ok := p.pods[endpoint]
	p.pods[endpoint] = podLoad{saturated: sat, at: p.now()}
	return !ok || old.saturated != sat
}

// Remove forgets an endpoint.
func (p *PoolSaturation) Remove(endpoint string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.pods, endpoint)
}

// Retain forgets every endpoint not in names (the registry's): a pod that
// left stops counting at once, not when its metrics go stale, and its late
// samples are ignored. It reports whether any was forgotten.
func (p *PoolSaturation) Retain(names map[string]bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.registered = maps.Clone(names)
	if p.registered == nil {
		p.registered = map[string]bool{}
	}
	gone := false
	for name := range p.pods {
		if !names[name] {
			delete(p.pods, name)
			gone = true
		}
	}
	return gone
}

// Saturated reports whether every endpoint with fresh metrics is
// saturated. With none, it is HoldWhenEmpty (false: nothing to go by).
func (p *PoolSaturation) Saturated() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	now, fresh := p.now(), 0
	for _, l := range p.pods {
		if now.Sub(l.at) > staleAfter {
			continue
		}
		fresh++
		if !l.saturated {
			return false
		}
	}
	return fresh > 0 || p.HoldWhenEmpty
}
