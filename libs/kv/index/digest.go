package index

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// Digest is a fingerprint of the confirmed index: every key's holders and
// tiers, and every pod's engine blocks. Two indexes that applied the same
// events have the same digest, whatever their sharding and however their
// maps iterate; replicas compare digests to check they agree.
func (x *Index) Digest() uint64 {
	x.podsMu.RLock()
	names := append([]string(nil), x.podNames...)
	pods := make([]*pod, 0, len(x.pods))
	for _, p := range x.pods {
		pods = append(pods, p)
	}
	x.podsMu.RUnlock()
	var sum uint64
	var buf []byte
	for i := range x.shards {
		s := &x.shards[i]
		s.mu.RLock()
		for k, slot := range s.slots {
			for _, r := range s.entries[slot].pods {
				buf = binary.LittleEndian.AppendUint64(buf[:0], uint64(k))
				buf = append(buf, byte(r.tiers()))
				buf = append(buf, names[r.pod]...)
				sum += xxhash.Sum64(buf)
			}
		}
		s.mu.RUnlock()
	}
	for _, p := range pods {
		p.mu.Lock()
		for h, b := range p.blocks {
			buf = append(buf[:0], 0xff)
			buf = binary.LittleEndian.AppendUint64(buf, h)
			buf = binary.LittleEndian.AppendUint64(buf, uint64(b.last))
			buf = append(buf, byte(b.tiers))
			buf = append(buf, p.name...)
			sum += xxhash.Sum64(buf)
		}
		p.mu.Unlock()
	}
	return sum
}
