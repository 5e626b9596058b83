package events

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// ErrMalformed wraps every decoding error: the payload is not a KV event
// batch this package understands. The rest of the message says where.
var ErrMalformed = errors.New("malformed kv event batch")

var (
	errTruncated = errors.New("unexpected end of payload")
	errTooDeep   = fmt.Errorf("value nested deeper than %d levels", maxDepth)
)

const (
	// maxDepth bounds the nesting of values the decoder skips or captures
	// (extra_keys, unknown fields), so hostile input cannot exhaust the stack.
	maxDepth = 64
	// Interning bounds: strings longer than maxInternLen, or beyond
	// maxInterned distinct ones, are allocated on every decode.
	maxInterned  = 1024
	maxInternLen = 128
)

// Decoder decodes KV event batches. It keeps scratch state between calls so
// that, once warmed up, Decode allocates nothing. The zero value is ready to
// use. A Decoder is not safe for concurrent use; use one per goroutine.
type Decoder struct {
	rd       bytes.Reader
	dec      *msgpack.Decoder
	payload  []byte
	interned map[string]string
}

// NewDecoder returns a ready Decoder (equivalent to new(Decoder)).
func NewDecoder() *Decoder { return new(Decoder) }

// Decode decodes payload (one published batch, in any encoding vLLM has
// used) into b. It reuses b.Events and the slices inside each event, so a
// caller that decodes into the same Batch again and again allocates nothing
// in steady state; consequently the previous contents of b are overwritten.
// b does not reference payload after Decode returns.
//
// Every error wraps ErrMalformed and names the offending element, for
// example "malformed kv event batch: events[3]: block_hashes[1]: want
// integer or bytes, got string". On error the contents of b are unspecified.
func (d *Decoder) Decode(payload []byte, b *Batch) error {
	d.reset(payload)
	err := d.batch(b)
	if err == nil && d.rd.Len() != 0 {
		err = fmt.Errorf("%d trailing bytes after the batch", d.rd.Len())
	}
	d.reset(nil)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return nil
}

// reset points the decoder at p. The msgpack decoder reads straight from
// d.rd (a bytes.Reader is an io.ByteScanner, so it adds no buffering), which
// keeps d.pos and d.seek consistent with what it has consumed.
func (d *Decoder) reset(p []byte) {
	if d.dec == nil {
		d.dec = msgpack.NewDecoder(nil)
	}
	d.payload = p
	d.rd.Reset(p)
	d.dec.ResetReader(&d.rd)
}

// pos is the offset in the payload of the next unread byte.
func (d *Decoder) pos() int { return len(d.payload) - d.rd.Len() }

func (d *Decoder) seek(off int) {
	_, _ = d.rd.Seek(int64(off), io.SeekStart) // off is within the payload
}

// peek returns the msgpack code of the next value without consuming it. It
// reads the payload directly: cheaper than msgpack.Decoder.PeekCode, which
// costs two interface calls, and equivalent since the reader is unbuffered.
func (d *Decoder) peek() (byte, error) {
	off := d.pos()
	if off >= len(d.payload) {
		return 0, errTruncated
	}
	return d.payload[off], nil
}

// libErr turns the msgpack library's end-of-input errors into errTruncated.
func libErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errTruncated
	}
	return err
}

func typeErr(want string, c byte) error {
	return fmt.Errorf("want %s, got %s", want, codeName(c))
}

func fieldErr(name string, err error) error {
	return fmt.Errorf("%s: %w", name, err)
}

// codeName names the msgpack type a code starts, for error messages.
func codeName(c byte) string {
	switch {
	case c == msgpcode.Nil:
		return "nil"
	case c == msgpcode.False || c == msgpcode.True:
		return "bool"
	case isInt(c):
		return "integer"
	case c == msgpcode.Float || c == msgpcode.Double:
		return "float"
	case msgpcode.IsString(c):
		return "string"
	case msgpcode.IsBin(c):
		return "bytes"
	case isArray(c):
		return "array"
	case isMap(c):
		return "map"
	case msgpcode.IsExt(c):
		return "extension"
	default:
		return fmt.Sprintf("invalid code 0x%02x", c)
	}
}

func isInt(c byte) bool {
	return msgpcode.IsFixedNum(c) ||
		(c >= msgpcode.Uint8 && c <= msgpcode.Uint64) ||
		(c >= msgpcode.Int8 && c <= msgpcode.Int64)
}

func isArray(c byte) bool {
	return msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32
}

func isMap(c byte) bool {
	return msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32
}

// ---------------------------------------------------------------------------
// Batch

func (d *Decoder) batch(b *Batch) error {
	b.TS, b.DataParallelRank, b.HasDataParallelRank = 0, 0, false
	c, err := d.peek()
	if err != nil {
		return fieldErr("batch", err)
	}
	switch {
	case isArray(c):
		return d.arrayBatch(b)
	case isMap(c):
		return d.mapBatch(b)
	default:
		return fieldErr("batch", typeErr("array or map", c))
	}
}

func (d *Decoder) arrayBatch(b *Batch) error {
	n, _, err := d.arrayLen()
	if err != nil {
		return fieldErr("batch", err)
	}
	if n < 2 {
		return fmt.Errorf("batch: want [ts, events, data_parallel_rank], got %d elements", n)
	}
	if b.TS, err = d.ts(); err != nil {
		return fieldErr(keyTS, err)
	}
	if err := d.events(b); err != nil {
		return err
	}
	if n > 2 {
		if b.DataParallelRank, b.HasDataParallelRank, err = d.optInt(); err != nil {
			return fieldErr(keyDPRank, err)
		}
	}
	for i := 3; i < n; i++ {
		if err := d.skip(0); err != nil {
			return fmt.Errorf("batch[%d]: %w", i, err)
		}
	}
	return nil
}

func (d *Decoder) mapBatch(b *Batch) error {
	n, err := d.mapLen()
	if err != nil {
		return fieldErr("batch", err)
	}
	sawEvents := false
	for range n {
		k, err := d.key()
		if err != nil {
			return fieldErr("batch", err)
		}
		switch string(k) {
		case keyTS:
			if b.TS, err = d.ts(); err != nil {
				return fieldErr(keyTS, err)
			}
		case keyEvents:
			sawEvents = true
			if err := d.events(b); err != nil {
				return err
			}
		case keyDPRank:
			if b.DataParallelRank, b.HasDataParallelRank, err = d.optInt(); err != nil {
				return fieldErr(keyDPRank, err)
			}
		default:
			if err := d.skip(0); err != nil {
				return fieldErr(string(k), err)
			}
		}
	}
	if !sawEvents {
		return errors.New("batch: missing events")
	}
	return nil
}

func (d *Decoder) ts() (float64, error) {
	c, err := d.peek()
	if err != nil {
		return 0, err
	}
	if c != msgpcode.Float && c != msgpcode.Double && !isInt(c) {
		return 0, typeErr("float", c)
	}
	f, err := d.dec.DecodeFloat64()
	return f, libErr(err)
}

// MaxBatchEvents bounds the events of one batch: an event decodes into
// about 230 bytes whatever its encoding, so a batch claiming one event a
// byte would otherwise cost the decoder hundreds of times its size.
const MaxBatchEvents = 1 << 16

func (d *Decoder) events(b *Batch) error {
	n, _, err := d.arrayLen()
	if err != nil {
		return fieldErr(keyEvents, err)
	}
	if n > MaxBatchEvents {
		return fieldErr(keyEvents, fmt.Errorf("%d events in one batch, more than %d", n, MaxBatchEvents))
	}
	if cap(b.Events) < n {
		// Keep the events beyond len too: their slices are reusable.
		grown := make([]Event, n, max(n, 2*cap(b.Events)))
		copy(grown, b.Events[:cap(b.Events)])
		b.Events = grown
	}
	b.Events = b.Events[:n]
	for i := range b.Events {
		ev := &b.Events[i]
		ev.reset()
		if err := d.event(ev); err != nil {
			return fmt.Errorf("events[%d]: %w", i, err)
		}
	}
	return nil
}

// ---------------------------------------------------------------------------
// Events

// field identifies an event field; for BlockStored its value is also its
// position in the array encoding.
type field uint8

const (
	fUnknown field = iota // also the tag position in the array encoding
	fBlockHashes
	fParent
	fTokenIDs
	fBlockSize
	fLoRAID
	fMedium
	fLoRAName
	fExtraKeys
	fGroupIdx
	fSpecKind
	fSlidingWindow
	fType // map encoding only
)

var fieldNames = [...]string{
	fUnknown:       "?",
	fBlockHashes:   keyBlockHashes,
	fParent:        keyParent,
	fTokenIDs:      keyTokenIDs,
	fBlockSize:     keyBlockSize,
	fLoRAID:        keyLoRAID,
	fMedium:        keyMedium,
	fLoRAName:      keyLoRAName,
	fExtraKeys:     keyExtraKeys,
	fGroupIdx:      keyGroupIdx,
	fSpecKind:      keySpecKind,
	fSlidingWindow: keySlidingWindow,
	fType:          keyType,
}

// removedFields are BlockRemoved's fields in array order (after the tag).
var removedFields = [...]field{fBlockHashes, fMedium, fGroupIdx}

func fieldByName(k []byte) field {
	switch string(k) {
	case keyType:
		return fType
	case keyBlockHashes:
		return fBlockHashes
	case keyParent:
		return fParent
	case keyTokenIDs:
		return fTokenIDs
	case keyBlockSize:
		return fBlockSize
	case keyLoRAID:
		return fLoRAID
	case keyMedium:
		return fMedium
	case keyLoRAName:
		return fLoRAName
	case keyExtraKeys:
		return fExtraKeys
	case keyGroupIdx:
		return fGroupIdx
	case keySpecKind:
		return fSpecKind
	case keySlidingWindow:
		return fSlidingWindow
	default:
		return fUnknown
	}
}

// accepts reports whether events of kind k carry field f.
func accepts(k Kind, f field) bool {
	switch k {
	case KindBlockStored:
		return f >= fBlockHashes && f <= fSlidingWindow
	case KindBlockRemoved:
		return f == fBlockHashes || f == fMedium || f == fGroupIdx
	default:
		return false
	}
}

func (d *Decoder) event(ev *Event) error {
	c, err := d.peek()
	if err != nil {
		return err
	}
	switch {
	case isArray(c):
		err = d.arrayEvent(ev)
	case isMap(c):
		err = d.mapEvent(ev)
	default:
		return typeErr("array or map", c)
	}
	if err != nil {
		return err
	}
	if (ev.Kind == KindBlockStored || ev.Kind == KindBlockRemoved) && ev.Medium == "" {
		ev.Medium = MediumGPU
	}
	return nil
}

func (d *Decoder) arrayEvent(ev *Event) error {
	n, _, err := d.arrayLen()
	if err != nil {
		return err
	}
	if n == 0 {
		return errors.New("empty event array, want the type tag first")
	}
	if err := d.tag(ev); err != nil {
		return fieldErr(keyType, err)
	}
	for i := 1; i < n; i++ {
		f := fUnknown
		switch ev.Kind {
		case KindBlockStored:
			if i <= int(fSlidingWindow) {
				f = field(i)
			}
		case KindBlockRemoved:
			if i <= len(removedFields) {
				f = removedFields[i-1]
			}
		}
		if f == fUnknown {
			if err := d.skip(0); err != nil {
				return fmt.Errorf("element %d: %w", i, err)
			}
			continue
		}
		if err := d.field(ev, f); err != nil {
			return err
		}
	}
	return nil
}

// mapEvent decodes a map-encoded event. Fields may come in any order, but
// decoding them depends on the type, so when "type" is not the first key
// (msgspec always writes it first) the map is scanned for it and then
// decoded from the start again.
func (d *Decoder) mapEvent(ev *Event) error {
	n, err := d.mapLen()
	if err != nil {
		return err
	}
	start := d.pos()
	typeAt := -1
	for i := range n {
		k, err := d.key()
		if err != nil {
			return err
		}
		if string(k) == keyType {
			if err := d.tag(ev); err != nil {
				return fieldErr(keyType, err)
			}
			typeAt = i
			break
		}
		if err := d.skip(0); err != nil {
			return fieldErr(string(k), err)
		}
	}
	if typeAt < 0 {
		return errors.New("missing type")
	}
	first := 1
	if typeAt > 0 {
		d.seek(start)
		first = 0
	}
	for i := first; i < n; i++ {
		k, err := d.key()
		if err != nil {
			return err
		}
		f := fieldByName(k)
		if !accepts(ev.Kind, f) {
			if err := d.skip(0); err != nil {
				return fieldErr(string(k), err)
			}
			continue
		}
		if err := d.field(ev, f); err != nil {
			return err
		}
	}
	return nil
}

// tag reads the event's type name and sets ev.Kind (and ev.TypeName for an
// unknown type).
func (d *Decoder) tag(ev *Event) error {
	c, err := d.peek()
	if err != nil {
		return err
	}
	if !msgpcode.IsString(c) {
		return typeErr("string", c)
	}
	s, _, err := d.optStr()
	if err != nil {
		return err
	}
	switch string(s) {
	case typeBlockStored:
		ev.Kind = KindBlockStored
	case typeBlockRemoved:
		ev.Kind = KindBlockRemoved
	case typeAllBlocksCleared:
		ev.Kind = KindAllBlocksCleared
	default:
		ev.Kind = KindUnknown
		ev.TypeName = d.intern(s)
	}
	return nil
}

// field decodes the value of field f into ev. Errors name the field (list
// fields name the element too).
func (d *Decoder) field(ev *Event, f field) error {
	var err error
	switch f {
	case fBlockHashes:
		ev.BlockHashes, err = d.hashes(ev.BlockHashes)
		return listErr(keyBlockHashes, err)
	case fTokenIDs:
		ev.TokenIDs, err = d.tokens(ev.TokenIDs)
		return listErr(keyTokenIDs, err)
	case fParent:
		var isNil bool
		ev.ParentHash, isNil, err = d.hash(true)
		ev.HasParent = !isNil && ev.ParentHash != 0
	case fBlockSize:
		ev.BlockSize, err = d.reqInt()
	case fLoRAID:
		ev.LoRAID, ev.HasLoRAID, err = d.optInt()
	case fMedium:
		ev.Medium, err = d.optInternedStr()
	case fLoRAName:
		ev.LoRAName, err = d.optInternedStr()
	case fExtraKeys:
		ev.ExtraKeys, err = d.raw(ev.ExtraKeys[:0])
	case fGroupIdx:
		ev.GroupIdx, ev.HasGroupIdx, err = d.optInt()
	case fSpecKind:
		ev.SpecKind, err = d.optInternedStr()
	case fSlidingWindow:
		ev.SlidingWindow, _, err = d.optInt()
	default:
		err = d.skip(0)
	}
	if err != nil {
		return fieldErr(fieldNames[f], err)
	}
	return nil
}

// ---------------------------------------------------------------------------
// Values. These return errors without context; callers add the field name.

// arrayLen reads an array header; nil reads as an empty array.
func (d *Decoder) arrayLen() (n int, isNil bool, err error) {
	c, err := d.peek()
	if err != nil {
		return 0, false, err
	}
	if c == msgpcode.Nil {
		_ = d.dec.DecodeNil()
		return 0, true, nil
	}
	if !isArray(c) {
		return 0, false, typeErr("array", c)
	}
	n, err = d.dec.DecodeArrayLen()
	if err != nil {
		return 0, false, libErr(err)
	}
	if n > d.rd.Len() { // every element takes at least one byte
		return 0, false, errTruncated
	}
	return n, false, nil
}

func (d *Decoder) mapLen() (int, error) {
	c, err := d.peek()
	if err != nil {
		return 0, err
	}
	if !isMap(c) {
		return 0, typeErr("map", c)
	}
	n, err := d.dec.DecodeMapLen()
	if err != nil {
		return 0, libErr(err)
	}
	if n > d.rd.Len()/2 { // every key and value takes at least one byte
		return 0, errTruncated
	}
	return n, nil
}

// key reads a map key (a view of the payload). A key that is not a string
// is skipped and returned as nil, which matches no field.
func (d *Decoder) key() ([]byte, error) {
	c, err := d.peek()
	if err != nil {
		return nil, err
	}
	if !msgpcode.IsString(c) {
		return nil, d.skip(0)
	}
	s, _, err := d.optStr()
	return s, err
}

// optStr reads a string or nil; s is a view of the payload.
func (d *Decoder) optStr() (s []byte, ok bool, err error) {
	c, err := d.peek()
	if err != nil {
		return nil, false, err
	}
	if c == msgpcode.Nil {
		_ = d.dec.DecodeNil()
		return nil, false, nil
	}
	if !msgpcode.IsString(c) {
		return nil, false, typeErr("string or nil", c)
	}
	n, err := d.dec.DecodeBytesLen()
	if err != nil {
		return nil, false, libErr(err)
	}
	s, err = d.view(n)
	return s, err == nil, err
}

// view consumes the next n raw bytes and returns them as a view of the
// payload, valid until Decode returns.
func (d *Decoder) view(n int) ([]byte, error) {
	off := d.pos()
	if n > len(d.payload)-off {
		return nil, errTruncated
	}
	d.seek(off + n)
	return d.payload[off : off+n], nil
}

func (d *Decoder) optInternedStr() (string, error) {
	s, ok, err := d.optStr()
	if err != nil || !ok {
		return "", err
	}
	return d.intern(s), nil
}

// intern returns b as a string without allocating for values seen before
// (media, cache spec kinds, LoRA names and type names repeat endlessly).
func (d *Decoder) intern(b []byte) string {
	switch string(b) {
	case "":
		return ""
	case MediumGPU:
		return MediumGPU
	case SpecFullAttention:
		return SpecFullAttention
	case SpecMLAAttention:
		return SpecMLAAttention
	}
	if s, ok := d.interned[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(s) <= maxInternLen && len(d.interned) < maxInterned {
		if d.interned == nil {
			d.interned = make(map[string]string)
		}
		d.interned[s] = s
	}
	return s
}

// reqInt reads an integer that must be present.
func (d *Decoder) reqInt() (int, error) {
	v, ok, err := d.optInt()
	if err == nil && !ok {
		return 0, errors.New("want integer, got nil")
	}
	return v, err
}

// optInt reads an integer or nil.
func (d *Decoder) optInt() (v int, ok bool, err error) {
	c, err := d.peek()
	if err != nil {
		return 0, false, err
	}
	if c == msgpcode.Nil {
		_ = d.dec.DecodeNil()
		return 0, false, nil
	}
	if !isInt(c) {
		return 0, false, typeErr("integer or nil", c)
	}
	n, err := d.dec.DecodeInt64()
	if err != nil {
		return 0, false, libErr(err)
	}
	if (c == msgpcode.Uint64 && n < 0) || int64(int(n)) != n {
		return 0, false, errors.New("integer out of range")
	}
	return int(n), true, nil
}

// hash reads a block hash: an integer of any width (negative values as
// two's complement) or a byte string (its last 8 bytes, big-endian). With
// allowNil, nil reads as isNil.
func (d *Decoder) hash(allowNil bool) (h uint64, isNil bool, err error) {
	c, err := d.peek()
	if err != nil {
		return 0, false, err
	}
	switch {
	case isInt(c):
		h, err = d.dec.DecodeUint64() // sign-extends signed codes
		return h, false, libErr(err)
	case msgpcode.IsBin(c):
		n, err := d.dec.DecodeBytesLen()
		if err != nil {
			return 0, false, libErr(err)
		}
		b, err := d.view(n)
		if err != nil {
			return 0, false, err
		}
		return digestTail(b), false, nil
	case c == msgpcode.Nil && allowNil:
		_ = d.dec.DecodeNil()
		return 0, true, nil
	case allowNil:
		return 0, false, typeErr("integer, bytes or nil", c)
	default:
		return 0, false, typeErr("integer or bytes", c)
	}
}

// digestTail folds a byte-string hash into 64 bits: the last 8 bytes
// big-endian, or all of them when shorter.
func digestTail(b []byte) uint64 {
	if len(b) > 8 {
		b = b[len(b)-8:]
	}
	var h uint64
	for _, x := range b {
		h = h<<8 | uint64(x)
	}
	return h
}

// indexError is an error in element i of a list.
type indexError struct {
	i   int
	err error
}

func (e *indexError) Error() string { return "[" + strconv.Itoa(e.i) + "]: " + e.err.Error() }
func (e *indexError) Unwrap() error { return e.err }

// listErr names the list an error occurred in: "name: msg" for the list
// itself, "name[i]: msg" for one of its elements.
func listErr(name string, err error) error {
	if err == nil {
		return nil
	}
	var ie *indexError
	if errors.As(err, &ie) {
		return fmt.Errorf("%s%w", name, err)
	}
	return fieldErr(name, err)
}

// The two list readers below are the hot path (millions of elements per
// second): integers are parsed straight from the payload with one seek per
// list instead of several msgpack.Decoder calls per element. Anything else
// goes through the general readers.

func (d *Decoder) hashes(dst []uint64) ([]uint64, error) {
	n, _, err := d.arrayLen()
	if err != nil {
		return dst, err
	}
	if cap(dst) < n {
		dst = make([]uint64, n)
	}
	dst = dst[:n]
	p, off := d.payload, d.pos()
	for i := range dst {
		if v, _, w := parseInt(p, off); w > 0 {
			dst[i] = v
			off += w
			continue
		}
		d.seek(off)
		h, _, err := d.hash(false)
		if err != nil {
			return dst, &indexError{i, err}
		}
		dst[i] = h
		off = d.pos()
	}
	d.seek(off)
	return dst, nil
}

func (d *Decoder) tokens(dst []uint32) ([]uint32, error) {
	n, _, err := d.arrayLen()
	if err != nil {
		return dst, err
	}
	if cap(dst) < n {
		dst = make([]uint32, n)
	}
	dst = dst[:n]
	p, off := d.payload, d.pos()
	for i := range dst {
		v, neg, w := parseInt(p, off)
		if w <= 0 {
			d.seek(off)
			if w < 0 {
				return dst, &indexError{i, errTruncated}
			}
			return dst, &indexError{i, typeErr("integer", p[off])}
		}
		if neg || v > math.MaxUint32 {
			d.seek(off)
			return dst, &indexError{i, errors.New("token id out of range")}
		}
		dst[i] = uint32(v)
		off += w
	}
	d.seek(off)
	return dst, nil
}

// parseInt parses the msgpack integer at p[off]. It returns the value as
// uint64 (two's complement when negative), whether it is negative, and its
// width in bytes: 0 when p[off] starts no integer, -1 when the integer is
// truncated or off is past the end.
func parseInt(p []byte, off int) (v uint64, neg bool, width int) {
	if off >= len(p) {
		return 0, false, -1
	}
	c, b := p[off], p[off+1:]
	switch {
	case c <= msgpcode.PosFixedNumHigh:
		return uint64(c), false, 1
	case c >= msgpcode.NegFixedNumLow:
		return uint64(int64(int8(c))), true, 1
	}
	switch c {
	case msgpcode.Uint8:
		if len(b) >= 1 {
			return uint64(b[0]), false, 2
		}
	case msgpcode.Uint16:
		if len(b) >= 2 {
			return uint64(binary.BigEndian.Uint16(b)), false, 3
		}
	case msgpcode.Uint32:
		if len(b) >= 4 {
			return uint64(binary.BigEndian.Uint32(b)), false, 5
		}
	case msgpcode.Uint64:
		if len(b) >= 8 {
			return binary.BigEndian.Uint64(b), false, 9
		}
	case msgpcode.Int8:
		if len(b) >= 1 {
			n := int64(int8(b[0]))
			return uint64(n), n < 0, 2
		}
	case msgpcode.Int16:
		if len(b) >= 2 {
			n := int64(int16(binary.BigEndian.Uint16(b)))
			return uint64(n), n < 0, 3
		}
	case msgpcode.Int32:
		if len(b) >= 4 {
			n := int64(int32(binary.BigEndian.Uint32(b)))
			return uint64(n), n < 0, 5
		}
	case msgpcode.Int64:
		if len(b) >= 8 {
			n := int64(binary.BigEndian.Uint64(b))
			return uint64(n), n < 0, 9
		}
	default:
		return 0, false, 0
	}
	return 0, false, -1
}

// raw captures the next value verbatim, appended to dst; nil captures
// nothing.
func (d *Decoder) raw(dst []byte) ([]byte, error) {
	c, err := d.peek()
	if err != nil {
		return dst, err
	}
	start := d.pos()
	if err := d.skip(0); err != nil {
		return dst, err
	}
	if c == msgpcode.Nil {
		return dst, nil
	}
	return append(dst, d.payload[start:d.pos()]...), nil
}

// skip skips the next value, refusing to nest deeper than maxDepth.
func (d *Decoder) skip(depth int) error {
	c, err := d.peek()
	if err != nil {
		return err
	}
	switch {
	case isArray(c), isMap(c):
		if depth >= maxDepth {
			return errTooDeep
		}
		var n int
		if isArray(c) {
			n, err = d.dec.DecodeArrayLen()
		} else {
			n, err = d.dec.DecodeMapLen()
			n *= 2
		}
		if err != nil {
			return libErr(err)
		}
		if n > d.rd.Len() {
			return errTruncated
		}
		for range n {
			if err := d.skip(depth + 1); err != nil {
				return err
			}
		}
		return nil
	case msgpcode.IsString(c), msgpcode.IsBin(c):
		n, err := d.dec.DecodeBytesLen()
		if err != nil {
			return libErr(err)
		}
		if n > d.rd.Len() {
			return errTruncated
		}
		d.seek(d.pos() + n)
		return nil
	default: // scalars and extensions: the library skips them flat
		return libErr(d.dec.Skip())
	}
}

// isOneValue reports whether p holds exactly one well-formed msgpack value.
func (d *Decoder) isOneValue(p []byte) bool {
	d.reset(p)
	err := d.skip(0)
	ok := err == nil && d.rd.Len() == 0
	d.reset(nil)
	return ok
}
