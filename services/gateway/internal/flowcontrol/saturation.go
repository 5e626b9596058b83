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
	// load is the larger of waiting/QueueDepth and kv/KVCacheUtil: at 1
	// or more the endpoint is saturated.
	load float64
	at   time.Time
}

func (l podLoad) saturated() bool { return l.load >= 1 }

// NewPoolSaturation returns a tracker with the default thresholds.
func NewPoolSaturation() *PoolSaturation {
	return &PoolSaturation{QueueDepth: DefaultQueueDepth, KVCacheUtil: DefaultKVCacheUtil, now: time.Now, pods: map[string]podLoad{}}
}

// Update records an endpoint's latest metrics; it reports whether the
// pool's saturation may have changed.
func (p *PoolSaturation) Update(endpoint string, waiting int64, kvUsage float64) bool {
	load := max(float64(waiting)/float64(p.QueueDepth), kvUsage/p.KVCacheUtil)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.registered != nil && !p.registered[endpoint] {
		// a late sample of a pod that left the registry (or of one the
		// registry does not list yet): it does not count
		return false
	}
	old, ok := p.pods[endpoint]
	now := podLoad{load: load, at: p.now()}
	p.pods[endpoint] = now
	return !ok || old.saturated() != now.saturated()
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
		if !l.saturated() {
			return false
		}
	}
	return fresh > 0 || p.HoldWhenEmpty
}

// Level is the pool's saturation as GIE's detector measures it: the mean
// load of the endpoints with fresh metrics (1 with none).
func (p *PoolSaturation) Level() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	now, sum, fresh := p.now(), 0.0, 0
	for _, l := range p.pods {
		if now.Sub(l.at) <= staleAfter {
			sum += l.load
			fresh++
		}
	}
	if fresh == 0 {
		return 1
	}
	return sum / float64(fresh)
}
