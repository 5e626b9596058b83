package events

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// Hand-built msgpack: tests describe payloads as Go values and encode them
// with the msgpack library's low-level Encoder, never with this package's
// encoder, so the decoder is tested independently of it.
//
//	nil -> nil            string -> str         []byte -> bin
//	int -> smallest int   uint64 -> smallest uint
//	int8/16/32/64, uint8/16/32 -> that exact msgpack width (u64 for uint64 width)
//	float64 -> float 64   float32 -> float 32   bool -> bool
//	[]any -> array        omap -> map with keys in the given order
//	rawMP -> the bytes verbatim
type (
	omap  []any // alternating keys and values
	rawMP []byte
	u64   uint64 // a uint64 written with the full 9-byte width
)

func mp(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	if err := mpWrite(e, &buf, v); err != nil {
		t.Fatalf("build msgpack: %v", err)
	}
	return buf.Bytes()
}

func mpWrite(e *msgpack.Encoder, buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		return e.EncodeNil()
	case string:
		return e.EncodeString(x)
	case []byte:
		return e.EncodeBytes(x)
	case int:
		return e.EncodeInt(int64(x))
	case uint64:
		return e.EncodeUint(x)
	case int8:
		return e.EncodeInt8(x)
	case int16:
		return e.EncodeInt16(x)
	case int32:
		return e.EncodeInt32(x)
	case int64:
		return e.EncodeInt64(x)
	case uint8:
		return e.EncodeUint8(x)
	case uint16:
		return e.EncodeUint16(x)
	case uint32:
		return e.EncodeUint32(x)
	case u64:
		return e.EncodeUint64(uint64(x))
	case float64:
		return e.EncodeFloat64(x)
	case float32:
		return e.EncodeFloat32(x)
	case bool:
		return e.EncodeBool(x)
	case []any:
		if err := e.EncodeArrayLen(len(x)); err != nil {
			return err
		}
		for _, it := range x {
			if err := mpWrite(e, buf, it); err != nil {
				return err
			}
		}
		return nil
	case omap:
		if len(x)%2 != 0 {
			return fmt.Errorf("omap with odd length %d", len(x))
		}
		if err := e.EncodeMapLen(len(x) / 2); err != nil {
			return err
		}
		for _, it := range x {
			if err := mpWrite(e, buf, it); err != nil {
				return err
			}
		}
		return nil
	case rawMP:
		buf.Write(x)
		return nil
	default:
		return fmt.Errorf("unsupported value %T", v)
	}
}

// batchesEqual compares batches treating nil and empty slices alike and
// timestamps by bit pattern (so NaN equals itself).
func batchesEqual(a, b *Batch) bool {
	if math.Float64bits(a.TS) != math.Float64bits(b.TS) ||
		a.DataParallelRank != b.DataParallelRank ||
		a.HasDataParallelRank != b.HasDataParallelRank ||
		len(a.Events) != len(b.Events) {
		return false
	}
	for i := range a.Events {
		if !eventsEqual(&a.Events[i], &b.Events[i]) {
			return false
		}
	}
	return true
}

func eventsEqual(a, b *Event) bool {
	return a.Kind == b.Kind &&
		slices.Equal(a.BlockHashes, b.BlockHashes) &&
		a.ParentHash == b.ParentHash && a.HasParent == b.HasParent &&
		slices.Equal(a.TokenIDs, b.TokenIDs) &&
		a.BlockSize == b.BlockSize &&
		a.LoRAID == b.LoRAID && a.HasLoRAID == b.HasLoRAID &&
		a.LoRAName == b.LoRAName &&
		a.Medium == b.Medium &&
		bytes.Equal(a.ExtraKeys, b.ExtraKeys) &&
		a.GroupIdx == b.GroupIdx && a.HasGroupIdx == b.HasGroupIdx &&
		a.SpecKind == b.SpecKind &&
		a.SlidingWindow == b.SlidingWindow &&
		a.TypeName == b.TypeName
}

func dumpBatch(b *Batch) string {
	var sb bytes.Buffer
	fmt.Fprintf(&sb, "ts=%v dp=%d/%v events=%d\n", b.TS, b.DataParallelRank, b.HasDataParallelRank, len(b.Events))
	for i := range b.Events {
		fmt.Fprintf(&sb, "  [%d] %+v\n", i, b.Events[i])
	}
	return sb.String()
}

// knownOnly returns a copy of b without KindUnknown events (the encoder
// cannot write them).
func knownOnly(b *Batch) *Batch {
	out := *b
	out.Events = nil
	for _, ev := range b.Events {
		if ev.Kind != KindUnknown {
			out.Events = append(out.Events, ev)
		}
	}
	return &out
}
