package valkeyindex

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// Digest is the fingerprint index.Index.Digest computes, of the index on
// the server: an in-memory index that applied the same batches (within
// its bounds) has the same. It scans the pool's keys: for tests and
// debugging, not the request path.
func (x *Index) Digest(ctx context.Context) (uint64, error) {
	var sum uint64
	var buf []byte
	err := x.scan(ctx, x.prefix+"b:*", func(key string) error {
		m, err := x.c.Do(ctx, x.c.B().Hgetall().Key(key).Build()).AsStrMap()
		if err != nil {
			return err
		}
		k := []byte(strings.TrimPrefix(key, x.prefix+"b:"))
		if len(k) != 8 {
			return nil
		}
		tiers := map[string]byte{}
		for f, n := range m {
			if len(f) >= 2 && n != "0" {
				tiers[f[1:]] |= 1 << f[0]
			}
		}
		for pod, ts := range tiers {
			buf = append(append(append(buf[:0], k...), ts), pod...)
			sum += xxhash.Sum64(buf)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	err = x.scan(ctx, x.prefix+"e:*", func(key string) error {
		pod := strings.TrimPrefix(key, x.prefix+"e:")
		m, err := x.c.Do(ctx, x.c.B().Hgetall().Key(key).Build()).AsStrMap()
		if err != nil {
			return err
		}
		for f, v := range m {
			b, ok := decodeEngineBlock(v)
			if !ok || len(f) != 8 {
				continue
			}
			buf = append(append(buf[:0], 0xff), f...)
			buf = binary.LittleEndian.AppendUint64(buf, uint64(b.last()))
			buf = append(append(buf, b.tiers), pod...)
			sum += xxhash.Sum64(buf)
		}
		return nil
	})
	return sum, err
}

// Len counts the index's keys (a scan: debugging only).
func (x *Index) Len(ctx context.Context) (int, error) {
	n := 0
	err := x.scan(ctx, x.prefix+"b:*", func(string) error { n++; return nil })
	return n, err
}

func (x *Index) scan(ctx context.Context, match string, fn func(key string) error) error {
	var cursor uint64
	for {
		e, err := x.c.Do(ctx, x.c.B().Scan().Cursor(cursor).Match(match).Count(1000).Build()).AsScanEntry()
		if err != nil {
			return fmt.Errorf("valkey index: scan: %w", err)
		}
		for _, k := range e.Elements {
			if err := fn(k); err != nil {
				return fmt.Errorf("valkey index: %s: %w", k, err)
			}
		}
		if e.Cursor == 0 {
			return nil
		}
		cursor = e.Cursor
	}
}
