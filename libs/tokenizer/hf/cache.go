package hf

import (
	"hash/maphash"
	"strings"
	"sync"
)

// wordCache remembers the ids of recently encoded words. It is sharded to
// keep lock contention low when many goroutines encode at once; a shard
// that fills up is emptied (cheap, and natural text refills it with its
// frequent words quickly).
type wordCache struct {
	seed   maphash.Seed
	shards [cacheShards]cacheShard
}

const (
	cacheShards      = 64
	cacheShardWords  = 1024 // words per shard
	cacheMaxWordSize = 64   // longer words are not cached
)

type cacheShard struct {
	mu    sync.RWMutex
	words map[string][]uint32
	_     [40]byte // keep shards on separate cache lines
}

func newWordCache() *wordCache {
	c := &wordCache{seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].words = make(map[string][]uint32)
	}
	return c
}

func (c *wordCache) shard(word string) *cacheShard {
	return &c.shards[maphash.String(c.seed, word)%cacheShards]
}

// get appends the cached ids of word to dst.
func (c *wordCache) get(dst []uint32, word string) ([]uint32, bool) {
	s := c.shard(word)
	s.mu.RLock()
	ids, ok := s.words[word]
	s.mu.RUnlock()
	if !ok {
		return dst, false
	}
	return append(dst, ids...), true
}

// put caches ids for word (the cache keeps ids: the caller must not change
// them; it copies word, which may point into a long text).
func (c *wordCache) put(word string, ids []uint32) {
	s := c.shard(word)
	s.mu.Lock()
	if len(s.words) >= cacheShardWords {
		clear(s.words)
	}
	s.words[strings.Clone(word)] = ids
	s.mu.Unlock()
}
