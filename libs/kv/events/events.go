// Package events is the model of vLLM's KV-cache events as published over ZMQ
// (spec/vllm-wire.md §1): a msgpack encoder that produces exactly what vLLM
// emits (used by the vLLM simulator) and a reusable, allocation-free decoder
// that accepts every encoding vLLM has shipped (used by the indexer).
//
// A payload is one batch: [ts, [event...], data_parallel_rank] in the array
// encoding (the 2-element form of old vLLM is accepted too) or
// {"ts", "events", "data_parallel_rank"} in the map encoding. Events are
// msgspec tagged structs: arrays whose first element is the type name, or maps
// whose "type" key holds it. Unknown fields and trailing elements are ignored;
// unknown event types decode as KindUnknown so a caller can count and drop
// them without losing the rest of the batch.
package events

import "strconv"

// Kind is the type of a KV-cache event.
type Kind uint8

// Event kinds. The zero value is KindUnknown so that a zero Event is never
// mistaken for a real one.
const (
	// KindUnknown is an event whose type name this package does not know;
	// Event.TypeName holds the name and all other fields are zero.
	KindUnknown Kind = iota
	// KindBlockStored reports newly full blocks stored in the prefix cache.
	KindBlockStored
	// KindBlockRemoved reports blocks evicted from the prefix cache.
	KindBlockRemoved
	// KindAllBlocksCleared reports a prefix-cache reset: forget the pod's blocks.
	KindAllBlocksCleared
)

// Wire type names (msgspec tags) of the known kinds.
const (
	typeBlockStored      = "BlockStored"
	typeBlockRemoved     = "BlockRemoved"
	typeAllBlocksCleared = "AllBlocksCleared"
)

// String returns the vLLM type name of k, or "Unknown".
func (k Kind) String() string {
	switch k {
	case KindBlockStored:
		return typeBlockStored
	case KindBlockRemoved:
		return typeBlockRemoved
	case KindAllBlocksCleared:
		return typeAllBlocksCleared
	default:
		return "Unknown"
	}
}

// MediumGPU is the storage tier vLLM means when medium is absent or nil.
const MediumGPU = "GPU"

// KV cache spec kinds that the prefix index serves (see Event.FullAttention).
const (
	SpecFullAttention = "full_attention"
	SpecMLAAttention  = "mla_attention"
)

// Event is one KV-cache event. Which fields are meaningful depends on Kind:
//
//   - KindBlockStored: all fields except TypeName.
//   - KindBlockRemoved: BlockHashes, Medium, GroupIdx/HasGroupIdx.
//   - KindAllBlocksCleared: none.
//   - KindUnknown: TypeName only.
//
// Block hashes are the engine's 64-bit hashes: integers of any msgpack width
// (negative ones as two's complement) or, for byte-string hashes, the last 8
// bytes big-endian.
type Event struct {
	Kind Kind

	// BlockHashes are the engine hashes of the stored or removed blocks, in
	// chain order for BlockStored.
	BlockHashes []uint64
	// ParentHash is the engine hash of the block preceding BlockHashes[0];
	// meaningful only when HasParent. A nil or 0 parent on the wire means the
	// chain starts at the root, and decodes as HasParent == false.
	ParentHash uint64
	HasParent  bool
	// TokenIDs covers len(BlockHashes) * BlockSize tokens.
	TokenIDs  []uint32
	BlockSize int
	// LoRAID is vLLM's deprecated numeric adapter id (LoRAName supersedes it).
	LoRAID    int
	HasLoRAID bool
	// LoRAName is the adapter name, "" when the request used the base model.
	LoRAName string
	// Medium is the storage tier ("GPU", "CPU", ...); "GPU" when absent.
	Medium string
	// ExtraKeys is the raw msgpack encoding of extra_keys (per-block extra
	// hash inputs: multimodal hashes, LoRA name, cache salt, ...), or empty
	// when absent or nil. It is a copy, not a view of the payload.
	ExtraKeys []byte
	// GroupIdx is the KV cache group of hybrid models, when HasGroupIdx.
	GroupIdx    int
	HasGroupIdx bool
	// SpecKind is kv_cache_spec_kind ("full_attention", "mla_attention",
	// "sliding_window", ...), "" when absent.
	SpecKind string
	// SlidingWindow is kv_cache_spec_sliding_window, 0 when absent.
	SlidingWindow int

	// TypeName is the wire type name of a KindUnknown event ("" otherwise).
	TypeName string
}

// FullAttention reports whether the event belongs to a full-attention KV
// cache group, the only kind a prefix index should track: SpecKind absent,
// "full_attention" or "mla_attention".
func (e *Event) FullAttention() bool {
	switch e.SpecKind {
	case "", SpecFullAttention, SpecMLAAttention:
		return true
	default:
		return false
	}
}

// reset clears e for reuse, keeping the capacity of its slices.
func (e *Event) reset() {
	*e = Event{
		BlockHashes: e.BlockHashes[:0],
		TokenIDs:    e.TokenIDs[:0],
		ExtraKeys:   e.ExtraKeys[:0],
	}
}

// Batch is one published payload.
type Batch struct {
	// TS is the publish time in seconds since the Unix epoch.
	TS     float64
	Events []Event
	// DataParallelRank is the engine's data parallel rank, when
	// HasDataParallelRank (absent in old vLLM).
	DataParallelRank    int
	HasDataParallelRank bool
}

// Encoding selects the msgpack layout of a batch and its events.
type Encoding uint8

const (
	// EncodingArray is msgspec's array_like layout: [ts, events, rank] and
	// ["BlockStored", field...] with trailing default fields omitted.
	EncodingArray Encoding = iota
	// EncodingMap is msgspec's default struct layout (vLLM 0.26+):
	// {"ts", "events", "data_parallel_rank"} and {"type": "BlockStored", ...}
	// with default-valued optional fields omitted.
	EncodingMap
)

// String returns "array" or "map".
func (e Encoding) String() string {
	switch e {
	case EncodingArray:
		return "array"
	case EncodingMap:
		return "map"
	default:
		return "Encoding(" + strconv.Itoa(int(e)) + ")"
	}
}

// Wire field names.
const (
	keyTS            = "ts"
	keyEvents        = "events"
	keyDPRank        = "data_parallel_rank"
	keyType          = "type"
	keyBlockHashes   = "block_hashes"
	keyParent        = "parent_block_hash"
	keyTokenIDs      = "token_ids"
	keyBlockSize     = "block_size"
	keyLoRAID        = "lora_id"
	keyMedium        = "medium"
	keyLoRAName      = "lora_name"
	keyExtraKeys     = "extra_keys"
	keyGroupIdx      = "group_idx"
	keySpecKind      = "kv_cache_spec_kind"
	keySlidingWindow = "kv_cache_spec_sliding_window"
)
