package index

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/cespare/xxhash/v2"

	"github.com/hermod/hermod/libs/kv/blockkey"
)

// Snapshot format, little-endian, counts and lengths as uvarints:
//
//	magic "HKVIDX01"
//	blockSize, seed (8 bytes)
//	pods: count, then per pod: name, blocks: count, then per block:
//	      engine hash (8), last key (8), more keys: count + 8 each, tiers (1)
//	keys: count, then per key, oldest stored first: key (8),
//	      holders: count, then per holder: pod index, refs per tier
//	checksum: XXH64 of everything before it (8)
const snapshotMagic = "HKVIDX01"

// Limits a snapshot reader enforces, so that a corrupt file fails rather
// than exhausts memory.
const (
	maxSnapshotPods    = 1 << 20
	maxSnapshotName    = 1 << 10
	maxSnapshotMore    = 1 << 10
	maxSnapshotHolders = 1 << 8
)

// ErrSnapshot wraps every error of reading a snapshot.
var ErrSnapshot = errors.New("index snapshot")

// WriteSnapshot writes the confirmed index (not the speculative entries).
// The caller must keep Apply and ClearPod from running meanwhile (the
// projection holds its apply lock); Match may run.
func (x *Index) WriteSnapshot(w io.Writer) error {
	sw := &summingWriter{w: bufio.NewWriterSize(w, 1<<16), h: xxhash.New()}
	sw.raw([]byte(snapshotMagic))
	sw.uvarint(uint64(x.cfg.BlockSize))
	sw.u64(x.cfg.Seed)
	x.podsMu.RLock()
	names := append([]string(nil), x.podNames...)
	pods := make([]*pod, len(names))
	for i, n := range names {
		pods[i] = x.pods[n]
	}
	x.podsMu.RUnlock()
	sw.uvarint(uint64(len(pods)))
	for _, p := range pods {
		p.mu.Lock()
		sw.bytes([]byte(p.name))
		sw.uvarint(uint64(len(p.blocks)))
		for h, b := range p.blocks {
			sw.u64(h)
			sw.u64(uint64(b.last))
			sw.uvarint(uint64(len(b.more)))
			for _, k := range b.more {
				sw.u64(uint64(k))
			}
			sw.raw([]byte{byte(b.tiers)})
		}
		p.mu.Unlock()
	}
	n := 0
	for i := range x.shards {
		s := &x.shards[i]
		s.mu.RLock()
		n += len(s.slots)
		s.mu.RUnlock()
	}
	sw.uvarint(uint64(n))
	written := 0
	for i := range x.shards {
		s := &x.shards[i]
		s.mu.RLock()
		for j := s.tail; j != none && written < n; j = s.entries[j].prev {
			e := &s.entries[j]
			sw.u64(uint64(e.key))
			sw.uvarint(uint64(len(e.pods)))
			for _, r := range e.pods {
				sw.uvarint(uint64(r.pod))
				for _, c := range r.refs {
					sw.uvarint(uint64(c))
				}
			}
			written++
		}
		s.mu.RUnlock()
	}
	if written != n {
		return fmt.Errorf("index snapshot: the index changed while it was written (%d of %d keys)", written, n)
	}
	return sw.finish()
}

// ReadSnapshot builds an index from a snapshot with cfg's bounds; the
// snapshot's block size and seed must be cfg's (keys would not match).
func ReadSnapshot(r io.Reader, cfg Config) (*Index, error) {
	x, err := New(cfg)
	if err != nil {
		return nil, err
	}
	sr := &summingReader{r: bufio.NewReaderSize(r, 1<<16), h: xxhash.New()}
	if magic := sr.raw(len(snapshotMagic)); sr.err == nil && string(magic) != snapshotMagic {
		return nil, fmt.Errorf("%w: not a snapshot (magic %q)", ErrSnapshot, magic)
	}
	bs, seed := sr.uvarint(), sr.u64()
	if sr.err == nil && (int(bs) != x.cfg.BlockSize || seed != x.cfg.Seed) {
		return nil, fmt.Errorf("%w: taken with block size %d and seed %d, the index is configured with %d and %d", ErrSnapshot, bs, seed, x.cfg.BlockSize, x.cfg.Seed)
	}
	npods := sr.count(maxSnapshotPods)
	for range npods {
		name := string(sr.bytesN(maxSnapshotName))
		if sr.err != nil {
			break
		}
		if x.pod(name, false) != nil {
			return nil, fmt.Errorf("%w: pod %q twice", ErrSnapshot, name)
		}
		p := x.pod(name, true)
		nb := sr.count(1 << 40)
		for range nb {
			h, last := sr.u64(), blockkey.Key(sr.u64())
			var more []blockkey.Key
			if m := sr.count(maxSnapshotMore); m > 0 {
				more = make([]blockkey.Key, m)
				for i := range more {
					more[i] = blockkey.Key(sr.u64())
				}
			}
			tiers := tierSet(sr.raw(1)[0])
			if sr.err != nil {
				break
			}
			p.blocks[h] = podBlock{last: last, more: more, tiers: tiers}
		}
	}
	nkeys := sr.count(1 << 40)
	for range nkeys {
		k := blockkey.Key(sr.u64())
		nh := sr.count(maxSnapshotHolders)
		for range nh {
			id := sr.uvarint()
			var refs [numTiers]uint64
			for t := range refs {
				refs[t] = sr.uvarint()
			}
			if sr.err != nil {
				break
			}
			if id >= npods {
				return nil, fmt.Errorf("%w: key %x held by pod %d of %d", ErrSnapshot, k, id, npods)
			}
			s := x.shardOf(k)
			for t, c := range refs {
				for range min(c, 1<<16) {
					s.store(k, uint32(id), Tier(t))
				}
			}
		}
		if sr.err != nil {
			break
		}
	}
	if err := sr.finish(); err != nil {
		return nil, err
	}
	return x, nil
}

type summingWriter struct {
	w   *bufio.Writer
	h   *xxhash.Digest
	err error
	buf [binary.MaxVarintLen64]byte
}

func (s *summingWriter) raw(p []byte) {
	if s.err != nil {
		return
	}
	_, _ = s.h.Write(p)
	_, s.err = s.w.Write(p)
}

func (s *summingWriter) uvarint(v uint64) { s.raw(s.buf[:binary.PutUvarint(s.buf[:], v)]) }

func (s *summingWriter) u64(v uint64) {
	binary.LittleEndian.PutUint64(s.buf[:8], v)
	s.raw(s.buf[:8])
}

func (s *summingWriter) bytes(p []byte) {
	s.uvarint(uint64(len(p)))
	s.raw(p)
}

func (s *summingWriter) finish() error {
	if s.err != nil {
		return fmt.Errorf("index snapshot: %w", s.err)
	}
	var sum [8]byte
	binary.LittleEndian.PutUint64(sum[:], s.h.Sum64())
	if _, err := s.w.Write(sum[:]); err != nil {
		return fmt.Errorf("index snapshot: %w", err)
	}
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("index snapshot: %w", err)
	}
	return nil
}

type summingReader struct {
	r   *bufio.Reader
	h   *xxhash.Digest
	err error
	buf [8]byte
}

func (s *summingReader) fail(err error) {
	if s.err == nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		s.err = fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
}

func (s *summingReader) raw(n int) []byte {
	if s.err != nil {
		return make([]byte, n)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(s.r, p); err != nil {
		s.fail(err)
		return p
	}
	_, _ = s.h.Write(p)
	return p
}

func (s *summingReader) u64() uint64 {
	if s.err != nil {
		return 0
	}
	if _, err := io.ReadFull(s.r, s.buf[:8]); err != nil {
		s.fail(err)
		return 0
	}
	_, _ = s.h.Write(s.buf[:8])
	return binary.LittleEndian.Uint64(s.buf[:8])
}

func (s *summingReader) uvarint() uint64 {
	if s.err != nil {
		return 0
	}
	v, err := binary.ReadUvarint(byteCounter{s})
	if err != nil {
		s.fail(err)
		return 0
	}
	return v
}

// count reads a count and checks it against limit.
func (s *summingReader) count(limit uint64) uint64 {
	n := s.uvarint()
	if n > limit {
		s.fail(fmt.Errorf("a count of %d is over %d", n, limit))
		return 0
	}
	return n
}

func (s *summingReader) bytesN(limit uint64) []byte {
	n := s.count(limit)
	return s.raw(int(n))
}

func (s *summingReader) finish() error {
	if s.err != nil {
		return s.err
	}
	want := s.h.Sum64()
	if _, err := io.ReadFull(s.r, s.buf[:8]); err != nil {
		s.fail(err)
		return s.err
	}
	if got := binary.LittleEndian.Uint64(s.buf[:8]); got != want {
		return fmt.Errorf("%w: checksum %x, content sums to %x", ErrSnapshot, got, want)
	}
	if _, err := s.r.ReadByte(); err != io.EOF {
		return fmt.Errorf("%w: data after the checksum", ErrSnapshot)
	}
	return nil
}

// byteCounter feeds ReadUvarint from the reader, summing what it reads.
type byteCounter struct{ s *summingReader }

func (b byteCounter) ReadByte() (byte, error) {
	c, err := b.s.r.ReadByte()
	if err == nil {
		_, _ = b.s.h.Write([]byte{c})
	}
	return c, err
}
