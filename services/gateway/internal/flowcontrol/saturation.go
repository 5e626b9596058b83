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
	// DefaultStaleness: an endpoint whose metrics are older does not
	// count (it left, or its collector lags); with FailClosed it counts
	// as saturated. Metrics reach the gateway at the collector's scrape
	// interval, so no staleness is shorter than this.
	DefaultStaleness = 5 * time.Second
)

// PoolSaturation folds the pool's endpoint metrics into one signal: the
// pool is saturated when every endpoint with fresh metrics is.
type PoolSaturation struct {
	QueueDepth  int
	KVCacheUtil float64
	// HoldWhenEmpty: a pool with no endpoint with fresh metrics counts as
	// saturated (requests wait for a pod: scale from zero).
	HoldWhenEmpty bool
	// FailClosed makes Level count each registered endpoint without
	// fresh metrics as saturated (1), as the llm-d router's
	// utilization-detector does, rather than leave it out.
	FailClosed bool
	// Staleness is the age past which metrics are not fresh.
	Staleness time.Duration
	now       func() time.Time

	mu   sync.Mutex
	pods map[string]podLoad
	// level is Level's last reading, good until a change or levelFor
	level     float64
	levelAt   time.Time
	levelGood bool
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
	return &PoolSaturation{QueueDepth: DefaultQueueDepth, KVCacheUtil: DefaultKVCacheUtil, Staleness: DefaultStaleness,
		now: time.Now, pods: map[string]podLoad{}}
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
	p.levelGood = false
	return !ok || old.saturated() != now.saturated()
}

// Remove forgets an endpoint.
func (p *PoolSaturation) Remove(endpoint string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.pods, endpoint)
	p.levelGood = false
}

// Retain forgets every endpoint not in names (the registry's): a pod that
// left stops counting at once, not when its metrics go stale, and its late
// samples are ignored. It reports whether any was forgotten.
func (p *PoolSaturation) Retain(names map[string]bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.registered = maps.Clone(names)
	p.levelGood = false
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
		if now.Sub(l.at) > p.Staleness {
			continue
		}
		fresh++
		if !l.saturated() {
			return false
		}
	}
	return fresh > 0 || p.HoldWhenEmpty
}

// Level is the pool's saturation as the utilization detector measures
// it: the mean load of the endpoints with fresh metrics, or (FailClosed)
// of every registered endpoint, those without fresh metrics at 1; 1 with
// none.
func (p *PoolSaturation) Level() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if p.levelGood && now.Sub(p.levelAt) < levelFor {
		return p.level
	}
	p.level, p.levelAt, p.levelGood = p.measure(now), now, true
	return p.level
}

// levelFor is how long Level's reading stands without a change (metrics
// going stale are noticed this late): admission reads it per request.
const levelFor = 20 * time.Millisecond

// measure computes Level at now. The caller holds p.mu.
func (p *PoolSaturation) measure(now time.Time) float64 {
	sum, n := 0.0, 0
	for _, l := range p.pods {
		if now.Sub(l.at) <= p.Staleness {
			sum += l.load
			n++
		}
	}
	if p.FailClosed && p.registered != nil {
		sum += float64(len(p.registered) - n)
		n = len(p.registered)
	}
	if n == 0 {
		return 1
	}
	return sum / float64(n)
}

// Endpoints is the number of endpoints in the pool: the registry's, or
// before the registry reports, those with metrics.
func (p *PoolSaturation) Endpoints() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.registered != nil {
		return len(p.registered)
	}
	return len(p.pods)
}

// Empty reports whether the pool has no endpoint at all.
func (p *PoolSaturation) Empty() bool { return p.Endpoints() == 0 }
