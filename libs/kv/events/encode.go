package events

import (
	"errors"
	"fmt"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// ErrInvalidEvent is returned by the encoder for an event it cannot encode
// (KindUnknown, or ExtraKeys that are not one msgpack value).
var ErrInvalidEvent = errors.New("invalid kv event")

// appendWriter is the msgpack encoder's sink: it appends to a byte slice.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

func (w *appendWriter) WriteByte(c byte) error {
	w.b = append(w.b, c)
	return nil
}

// Encoder encodes batches the way vLLM's msgspec encoder does: integers in
// their smallest msgpack form, ts as float64, and optional fields omitted
// when they hold their default (nil). The zero value is ready to use; an
// Encoder is not safe for concurrent use, reuse one per goroutine to encode
// without allocating.
type Encoder struct {
	w   appendWriter
	enc *msgpack.Encoder
	chk Decoder // validates ExtraKeys
}

var encoderPool = sync.Pool{New: func() any { return new(Encoder) }}

// AppendBatch appends the msgpack encoding of b to dst using a pooled
// Encoder. See Encoder.AppendBatch.
func AppendBatch(dst []byte, b *Batch, enc Encoding) ([]byte, error) {
	e := encoderPool.Get().(*Encoder)
	out, err := e.AppendBatch(dst, b, enc)
	encoderPool.Put(e)
	return out, err
}

// AppendBatch appends the msgpack encoding of b to dst and returns the
// extended slice. With EncodingArray the output is what vLLM's array_like
// structs produce: [ts, events] plus data_parallel_rank when set, and each
// event as ["Type", field...] with trailing nil optional fields omitted. With
// EncodingMap it is what vLLM 0.26+ produces: maps with the "type" tag first,
// fields in declaration order, and nil optional fields omitted.
//
// Field mapping: ParentHash is written as nil unless HasParent, LoRAID as nil
// unless HasLoRAID, Medium and LoRAName as nil when "", GroupIdx only when
// HasGroupIdx, SpecKind when not "", SlidingWindow when not 0, ExtraKeys
// verbatim when not empty. On error dst is returned unchanged in length.
func (e *Encoder) AppendBatch(dst []byte, b *Batch, enc Encoding) ([]byte, error) {
	if enc != EncodingArray && enc != EncodingMap {
		return dst, fmt.Errorf("encode kv event batch: unknown encoding %d", enc)
	}
	if e.enc == nil {
		e.enc = msgpack.NewEncoder(nil)
	}
	e.w.b = dst
	e.enc.Reset(&e.w)
	err := e.batch(b, enc)
	out := e.w.b
	e.w.b = nil
	if err != nil {
		return out[:len(dst)], fmt.Errorf("encode kv event batch: %w", err)
	}
	return out, nil
}

// The appendWriter never fails and every Encode* call below only writes to
// it, so their errors are ignored; the returned errors are validation ones.

func (e *Encoder) batch(b *Batch, enc Encoding) error {
	m := e.enc
	n := 2
	if b.HasDataParallelRank {
		n = 3
	}
	if enc == EncodingMap {
		_ = m.EncodeMapLen(n)
		_ = m.EncodeString(keyTS)
	} else {
		_ = m.EncodeArrayLen(n)
	}
	_ = m.EncodeFloat64(b.TS)
	if enc == EncodingMap {
		_ = m.EncodeString(keyEvents)
	}
	_ = m.EncodeArrayLen(len(b.Events))
	for i := range b.Events {
		if err := e.event(&b.Events[i], enc); err != nil {
			return fmt.Errorf("events[%d]: %w", i, err)
		}
	}
	if b.HasDataParallelRank {
		if enc == EncodingMap {
			_ = m.EncodeString(keyDPRank)
		}
		_ = m.EncodeInt(int64(b.DataParallelRank))
	}
	return nil
}

func (e *Encoder) event(ev *Event, enc Encoding) error {
	switch ev.Kind {
	case KindBlockStored:
		if len(ev.ExtraKeys) > 0 && !e.chk.isOneValue(ev.ExtraKeys) {
			return fmt.Errorf("%w: extra_keys is not one msgpack value", ErrInvalidEvent)
		}
		if enc == EncodingMap {
			e.blockStoredMap(ev)
		} else {
			e.blockStoredArray(ev)
		}
	case KindBlockRemoved:
		e.blockRemoved(ev, enc)
	case KindAllBlocksCleared:
		if enc == EncodingMap {
			_ = e.enc.EncodeMapLen(1)
			_ = e.enc.EncodeString(keyType)
		} else {
			_ = e.enc.EncodeArrayLen(1)
		}
		_ = e.enc.EncodeString(typeAllBlocksCleared)
	default:
		return fmt.Errorf("%w: cannot encode kind %s (type %q)", ErrInvalidEvent, ev.Kind, ev.TypeName)
	}
	return nil
}

// Positions of BlockStored fields in the array encoding (0 is the tag).
const (
	posLoRAName      = 7
	posExtraKeys     = 8
	posGroupIdx      = 9
	posSpecKind      = 10
	posSlidingWindow = 11
)

// blockStoredLen returns the array length of ev in the array encoding: the
// tag, the seven required fields, then up to the last non-nil optional one.
func blockStoredLen(ev *Event) int {
	switch {
	case ev.SlidingWindow != 0:
		return posSlidingWindow + 1
	case ev.SpecKind != "":
		return posSpecKind + 1
	case ev.HasGroupIdx:
		return posGroupIdx + 1
	case len(ev.ExtraKeys) > 0:
		return posExtraKeys + 1
	default:
		return posLoRAName + 1
	}
}

func (e *Encoder) blockStoredArray(ev *Event) {
	m := e.enc
	n := blockStoredLen(ev)
	_ = m.EncodeArrayLen(n)
	_ = m.EncodeString(typeBlockStored)
	e.required(ev, EncodingArray)
	if n > posExtraKeys {
		e.extraKeys(ev)
	}
	if n > posGroupIdx {
		e.optInt(ev.GroupIdx, ev.HasGroupIdx)
	}
	if n > posSpecKind {
		e.optString(ev.SpecKind)
	}
	if n > posSlidingWindow {
		e.optInt(ev.SlidingWindow, ev.SlidingWindow != 0)
	}
}

func (e *Encoder) blockStoredMap(ev *Event) {
	m := e.enc
	n := 8 // type + seven required fields
	if len(ev.ExtraKeys) > 0 {
		n++
	}
	if ev.HasGroupIdx {
		n++
	}
	if ev.SpecKind != "" {
		n++
	}
	if ev.SlidingWindow != 0 {
		n++
	}
	_ = m.EncodeMapLen(n)
	_ = m.EncodeString(keyType)
	_ = m.EncodeString(typeBlockStored)
	e.required(ev, EncodingMap)
	if len(ev.ExtraKeys) > 0 {
		_ = m.EncodeString(keyExtraKeys)
		e.extraKeys(ev)
	}
	if ev.HasGroupIdx {
		_ = m.EncodeString(keyGroupIdx)
		_ = m.EncodeInt(int64(ev.GroupIdx))
	}
	if ev.SpecKind != "" {
		_ = m.EncodeString(keySpecKind)
		_ = m.EncodeString(ev.SpecKind)
	}
	if ev.SlidingWindow != 0 {
		_ = m.EncodeString(keySlidingWindow)
		_ = m.EncodeInt(int64(ev.SlidingWindow))
	}
}

// required writes the seven fields every BlockStored carries, preceded by
// their keys in the map encoding.
func (e *Encoder) required(ev *Event, enc Encoding) {
	m := e.enc
	e.key(enc, keyBlockHashes)
	e.hashes(ev.BlockHashes)
	e.key(enc, keyParent)
	if ev.HasParent {
		_ = m.EncodeUint(ev.ParentHash)
	} else {
		_ = m.EncodeNil()
	}
	e.key(enc, keyTokenIDs)
	_ = m.EncodeArrayLen(len(ev.TokenIDs))
	for _, t := range ev.TokenIDs {
		_ = m.EncodeUint(uint64(t))
	}
	e.key(enc, keyBlockSize)
	_ = m.EncodeInt(int64(ev.BlockSize))
	e.key(enc, keyLoRAID)
	e.optInt(ev.LoRAID, ev.HasLoRAID)
	e.key(enc, keyMedium)
	e.optString(ev.Medium)
	e.key(enc, keyLoRAName)
	e.optString(ev.LoRAName)
}

func (e *Encoder) blockRemoved(ev *Event, enc Encoding) {
	m := e.enc
	n := 3
	if ev.HasGroupIdx {
		n = 4
	}
	if enc == EncodingMap {
		_ = m.EncodeMapLen(n)
		_ = m.EncodeString(keyType)
	} else {
		_ = m.EncodeArrayLen(n)
	}
	_ = m.EncodeString(typeBlockRemoved)
	e.key(enc, keyBlockHashes)
	e.hashes(ev.BlockHashes)
	e.key(enc, keyMedium)
	e.optString(ev.Medium)
	if ev.HasGroupIdx {
		e.key(enc, keyGroupIdx)
		_ = m.EncodeInt(int64(ev.GroupIdx))
	}
}

func (e *Encoder) key(enc Encoding, k string) {
	if enc == EncodingMap {
		_ = e.enc.EncodeString(k)
	}
}

func (e *Encoder) hashes(hs []uint64) {
	_ = e.enc.EncodeArrayLen(len(hs))
	for _, h := range hs {
		_ = e.enc.EncodeUint(h)
	}
}

func (e *Encoder) optInt(v int, ok bool) {
	if ok {
		_ = e.enc.EncodeInt(int64(v))
	} else {
		_ = e.enc.EncodeNil()
	}
}

func (e *Encoder) optString(s string) {
	if s != "" {
		_ = e.enc.EncodeString(s)
	} else {
		_ = e.enc.EncodeNil()
	}
}

func (e *Encoder) extraKeys(ev *Event) {
	if len(ev.ExtraKeys) > 0 {
		_, _ = e.w.Write(ev.ExtraKeys)
	} else {
		_ = e.enc.EncodeNil()
	}
}
