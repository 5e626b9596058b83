package session

import (
	"math"
	"sync"
	"time"
)

// maxBindings bounds the sessions a pool's bindings hold: session ids are
// the clients' to choose. Past it, the binding written longest ago goes.
const maxBindings = 1 << 20

// bindings maps sessions (by key) to their endpoints, each until ttl
// after the last decision that bound it. It is safe for concurrent use.
type bindings struct {
	mu    sync.Mutex
	ttl   time.Duration
	now   func() time.Time
	byKey map[uint64]binding
	order []stamped // bind order, for expiry and the bound
	head  int
}

type binding struct {
	endpoint string
	at       time.Time
}

type stamped struct {
	key uint64
	at  time.Time
}

func newBindings(ttl time.Duration, now func() time.Time) *bindings {
	if now == nil {
		now = time.Now
	}
	return &bindings{ttl: ttl, now: now, byKey: map[uint64]binding{}}
}

// bindingKey is a session id's key. It is a stable hash (not maphash's
// per-process seed): every replica must compute the same key.
func bindingKey(id string) uint64 {
	// FNV-1a, 64 bits
	h := uint64(14695981039346656037)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 1099511628211
	}
	return h
}

func (b *bindings) bind(key uint64, endpoint string, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if at.IsZero() || at.After(now) {
		at = now
	}
	if cur, ok := b.byKey[key]; ok && cur.at.After(at) {
		return // a later decision bound it already
	}
	b.byKey[key] = binding{endpoint: endpoint, at: at}
	b.order = append(b.order, stamped{key, at})
	b.expire(now)
}

func (b *bindings) lookup(key uint64) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expire(b.now())
	cur, ok := b.byKey[key]
	return cur.endpoint, ok
}

func (b *bindings) removeEndpoint(endpoint string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, v := range b.byKey {
		if v.endpoint == endpoint {
			delete(b.byKey, k)
		}
	}
}

// expire drops the bindings older than the ttl and, past maxBindings, the
// oldest; an order entry whose binding was renewed since only goes.
func (b *bindings) expire(now time.Time) {
	for b.head < len(b.order) {
		o := b.order[b.head]
		if now.Sub(o.at) < b.ttl && len(b.byKey) <= maxBindings {
			break
		}
		if cur, ok := b.byKey[o.key]; ok && cur.at.Equal(o.at) {
			delete(b.byKey, o.key)
		}
		b.head++
	}
	if b.head > len(b.order)/2 && b.head > 1024 {
		b.order = append(b.order[:0], b.order[b.head:]...)
		b.head = 0
	}
}

func seconds(s float64) time.Duration {
	return time.Duration(math.Round(s * float64(time.Second)))
}
