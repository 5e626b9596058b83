package events

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

func tokens(from, n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = from + i
	}
	return out
}

func seqU32(from, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(from + i)
	}
	return out
}

// digest returns a 32-byte digest whose last 8 bytes are tail (big-endian).
func digest(tail uint64) []byte {
	b := make([]byte, 32)
	for i := range 24 {
		b[i] = byte(0xA0 + i)
	}
	for i := range 8 {
		b[31-i] = byte(tail >> (8 * i))
	}
	return b
}

func TestDecode(t *testing.T) {
	const ts = 1712345678.25
	stored := func(fields ...any) []any { return append([]any{"BlockStored"}, fields...) }
	removed := func(fields ...any) []any { return append([]any{"BlockRemoved"}, fields...) }
	cleared := []any{"AllBlocksCleared"}
	// A typical vLLM BlockStored: two blocks of 4 tokens.
	plainStored := stored([]any{uint64(111), uint64(222)}, uint64(100), tokens(1, 8), 4, nil, "GPU", nil)
	plainStoredWant := Event{
		Kind: KindBlockStored, BlockHashes: []uint64{111, 222}, ParentHash: 100, HasParent: true,
		TokenIDs: seqU32(1, 8), BlockSize: 4, Medium: "GPU",
	}

	tests := []struct {
		name    string
		payload any
		want    Batch
	}{
		{
			name: "array batch with data parallel rank and all kinds",
			payload: []any{ts, []any{
				plainStored,
				removed([]any{uint64(111)}, "GPU", 0),
				cleared,
			}, 2},
			want: Batch{TS: ts, DataParallelRank: 2, HasDataParallelRank: true, Events: []Event{
				plainStoredWant,
				{Kind: KindBlockRemoved, BlockHashes: []uint64{111}, Medium: "GPU", HasGroupIdx: true},
				{Kind: KindAllBlocksCleared},
			}},
		},
		{
			name:    "two-element batch of old vLLM",
			payload: []any{ts, []any{plainStored}},
			want:    Batch{TS: ts, Events: []Event{plainStoredWant}},
		},
		{
			name:    "nil data parallel rank",
			payload: []any{ts, []any{cleared}, nil},
			want:    Batch{TS: ts, Events: []Event{{Kind: KindAllBlocksCleared}}},
		},
		{
			name:    "extra trailing batch elements",
			payload: []any{ts, []any{}, 1, "future", omap{"x", []any{1, 2}}},
			want:    Batch{TS: ts, DataParallelRank: 1, HasDataParallelRank: true, Events: []Event{}},
		},
		{
			name:    "integer timestamp",
			payload: []any{int64(1700000000), []any{}},
			want:    Batch{TS: 1700000000, Events: []Event{}},
		},
		{
			name:    "float32 timestamp",
			payload: []any{float32(1.5), []any{}},
			want:    Batch{TS: 1.5, Events: []Event{}},
		},
		{
			name: "map batch with map events and unknown keys",
			payload: omap{
				"ts", ts,
				"events", []any{
					omap{
						"type", "BlockStored",
						"block_hashes", []any{uint64(111), uint64(222)},
						"parent_block_hash", nil,
						"token_ids", tokens(1, 8),
						"block_size", 4,
						"lora_id", nil,
						"medium", "GPU",
						"lora_name", nil,
						"extra_keys", nil,
						"group_idx", 0,
						"kv_cache_spec_kind", "full_attention",
						"event_version", 1,
						"locality", omap{"node", "n1", "rack", []any{1, 2, omap{}}},
						"ownership", []any{"shared"},
					},
					omap{"type", "BlockRemoved", "block_hashes", []any{uint64(111)}, "medium", nil, "future", 1.5},
					omap{"type", "AllBlocksCleared", "reason", "reset"},
				},
				"data_parallel_rank", 3,
				"producer", omap{"version", "0.26.0"},
			},
			want: Batch{TS: ts, DataParallelRank: 3, HasDataParallelRank: true, Events: []Event{
				{
					Kind: KindBlockStored, BlockHashes: []uint64{111, 222}, TokenIDs: seqU32(1, 8),
					BlockSize: 4, Medium: "GPU", HasGroupIdx: true, SpecKind: "full_attention",
				},
				{Kind: KindBlockRemoved, BlockHashes: []uint64{111}, Medium: "GPU"},
				{Kind: KindAllBlocksCleared},
			}},
		},
		{
			name: "map batch in arbitrary key order, type not first",
			payload: omap{
				"data_parallel_rank", nil,
				"events", []any{
					omap{
						"medium", "CPU", "block_size", 2, "token_ids", tokens(7, 2),
						"parent_block_hash", uint64(5), "type", "BlockStored", "block_hashes", []any{uint64(9)},
					},
					omap{"block_hashes", []any{uint64(9)}, "type", "BlockRemoved", "token_ids", tokens(7, 2)},
				},
				"ts", ts,
			},
			want: Batch{TS: ts, Events: []Event{
				{
					Kind: KindBlockStored, BlockHashes: []uint64{9}, ParentHash: 5, HasParent: true,
					TokenIDs: seqU32(7, 2), BlockSize: 2, Medium: "CPU",
				},
				{Kind: KindBlockRemoved, BlockHashes: []uint64{9}, Medium: "GPU"},
			}},
		},
		{
			name: "integer hashes of every width and sign",
			payload: []any{ts, []any{removed([]any{
				5, -1, int8(-128), uint8(200), int16(-2), uint16(65535), int32(-3), uint32(4000000000),
				int64(math.MinInt64), u64(math.MaxUint64), int64(42), int8(7),
			}, "GPU")}},
			want: Batch{TS: ts, Events: []Event{{Kind: KindBlockRemoved, Medium: "GPU", BlockHashes: []uint64{
				5, math.MaxUint64, 1<<64 - 128, 200, 1<<64 - 2, 65535, 1<<64 - 3, 4000000000,
				1 << 63, math.MaxUint64, 42, 7,
			}}}},
		},
		{
			name: "digest hashes: last 8 bytes big-endian, shorter ones whole",
			payload: []any{ts, []any{stored(
				[]any{digest(0x0102030405060708), digest(0xFFFFFFFFFFFFFFFE), []byte{0x12, 0x34}, []byte{}},
				digest(77), tokens(0, 4), 1, nil, "GPU", nil,
			)}},
			want: Batch{TS: ts, Events: []Event{{
				Kind:        KindBlockStored,
				BlockHashes: []uint64{0x0102030405060708, 0xFFFFFFFFFFFFFFFE, 0x1234, 0},
				ParentHash:  77, HasParent: true, TokenIDs: seqU32(0, 4), BlockSize: 1, Medium: "GPU",
			}}},
		},
		{
			name: "nil and zero parents are chain starts",
			payload: []any{ts, []any{
				stored([]any{1}, nil, []any{}, 16, nil, "GPU", nil),
				stored([]any{2}, 0, []any{}, 16, nil, "GPU", nil),
				stored([]any{3}, u64(0), []any{}, 16, nil, "GPU", nil),
				stored([]any{4}, make([]byte, 32), []any{}, 16, nil, "GPU", nil),
				stored([]any{5}, -7, []any{}, 16, nil, "GPU", nil),
			}},
			want: Batch{TS: ts, Events: []Event{
				{Kind: KindBlockStored, BlockHashes: []uint64{1}, BlockSize: 16, Medium: "GPU"},
				{Kind: KindBlockStored, BlockHashes: []uint64{2}, BlockSize: 16, Medium: "GPU"},
				{Kind: KindBlockStored, BlockHashes: []uint64{3}, BlockSize: 16, Medium: "GPU"},
				{Kind: KindBlockStored, BlockHashes: []uint64{4}, BlockSize: 16, Medium: "GPU"},
				{Kind: KindBlockStored, BlockHashes: []uint64{5}, ParentHash: 1<<64 - 7, HasParent: true, BlockSize: 16, Medium: "GPU"},
			}},
		},
		{
			name: "old short BlockStored and BlockRemoved",
			payload: []any{ts, []any{
				stored([]any{1, 2}, 9, tokens(1, 4), 2, 3),
				stored([]any{1}, nil, tokens(1, 2), 2),
				removed([]any{1, 2}),
			}},
			want: Batch{TS: ts, Events: []Event{
				{
					Kind: KindBlockStored, BlockHashes: []uint64{1, 2}, ParentHash: 9, HasParent: true,
					TokenIDs: seqU32(1, 4), BlockSize: 2, LoRAID: 3, HasLoRAID: true, Medium: "GPU",
				},
				{Kind: KindBlockStored, BlockHashes: []uint64{1}, TokenIDs: seqU32(1, 2), BlockSize: 2, Medium: "GPU"},
				{Kind: KindBlockRemoved, BlockHashes: []uint64{1, 2}, Medium: "GPU"},
			}},
		},
		{
			name: "all optional fields and extra trailing elements",
			payload: []any{ts, []any{
				stored(
					[]any{1}, 2, tokens(10, 4), 4, 7, "CPU", "my-lora",
					[]any{[]any{"my-lora", omap{"mm", []byte{1, 2}}}},
					1, "sliding_window", 4096,
					"future-1", omap{"nested", []any{[]any{[]any{}}}}, []byte{9},
				),
				removed([]any{1}, "CPU", 1, "future", []any{1, 2}),
				append([]any{"AllBlocksCleared"}, "future", 1),
			}},
			want: Batch{TS: ts, Events: []Event{
				{
					Kind: KindBlockStored, BlockHashes: []uint64{1}, ParentHash: 2, HasParent: true,
					TokenIDs: seqU32(10, 4), BlockSize: 4, LoRAID: 7, HasLoRAID: true, LoRAName: "my-lora",
					Medium: "CPU", ExtraKeys: mp(t, []any{[]any{"my-lora", omap{"mm", []byte{1, 2}}}}),
					GroupIdx: 1, HasGroupIdx: true, SpecKind: "sliding_window", SlidingWindow: 4096,
				},
				{Kind: KindBlockRemoved, BlockHashes: []uint64{1}, Medium: "CPU", GroupIdx: 1, HasGroupIdx: true},
				{Kind: KindAllBlocksCleared},
			}},
		},
		{
			name: "unknown event types are kept as KindUnknown",
			payload: []any{ts, []any{
				[]any{"BlockMoved", []any{1, 2}, omap{"to", "CPU"}},
				plainStored,
				omap{"payload", []any{"x", omap{"y", nil}}, "type", "KVOffloaded", "block_hashes", "not-a-list"},
				[]any{""},
			}},
			want: Batch{TS: ts, Events: []Event{
				{Kind: KindUnknown, TypeName: "BlockMoved"},
				plainStoredWant,
				{Kind: KindUnknown, TypeName: "KVOffloaded"},
				{Kind: KindUnknown},
			}},
		},
		{
			name: "nil medium means GPU, other media kept",
			payload: []any{ts, []any{
				stored([]any{1}, nil, []any{}, 16, nil, nil, nil),
				removed([]any{1}, nil),
				removed([]any{1}, "CPU"),
				removed([]any{1}, ""),
			}},
			want: Batch{TS: ts, Events: []Event{
				{Kind: KindBlockStored, BlockHashes: []uint64{1}, BlockSize: 16, Medium: "GPU"},
				{Kind: KindBlockRemoved, BlockHashes: []uint64{1}, Medium: "GPU"},
				{Kind: KindBlockRemoved, BlockHashes: []uint64{1}, Medium: "CPU"},
				{Kind: KindBlockRemoved, BlockHashes: []uint64{1}, Medium: "GPU"},
			}},
		},
		{
			name:    "AllBlocksCleared alone, both encodings",
			payload: []any{ts, []any{cleared, omap{"type", "AllBlocksCleared"}}, 0},
			want: Batch{TS: ts, HasDataParallelRank: true, Events: []Event{
				{Kind: KindAllBlocksCleared}, {Kind: KindAllBlocksCleared},
			}},
		},
		{
			name:    "nil lists decode as empty",
			payload: []any{ts, []any{stored(nil, nil, nil, 16, nil, "GPU", nil)}},
			want:    Batch{TS: ts, Events: []Event{{Kind: KindBlockStored, BlockSize: 16, Medium: "GPU"}}},
		},
		{
			name: "large arrays and long strings use 16/32-bit headers",
			payload: []any{ts, []any{stored(
				[]any{1}, nil, tokens(100000, 300), 300, nil, "GPU", strings.Repeat("l", 300),
			)}},
			want: Batch{TS: ts, Events: []Event{{
				Kind: KindBlockStored, BlockHashes: []uint64{1}, TokenIDs: seqU32(100000, 300),
				BlockSize: 300, Medium: "GPU", LoRAName: strings.Repeat("l", 300),
			}}},
		},
	}
	var d Decoder
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			payload := mp(t, tt.payload)
			var got Batch
			if err := d.Decode(payload, &got); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !batchesEqual(&got, &tt.want) {
				t.Fatalf("Decode mismatch\ngot:  %s\nwant: %s", dumpBatch(&got), dumpBatch(&tt.want))
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	const ts = 1.0
	okStored := []any{"BlockStored", []any{1}, nil, []any{1}, 1, nil, "GPU", nil}
	deep := any(1)
	for range 100 {
		deep = []any{deep}
	}
	tests := []struct {
		name    string
		payload []byte
		want    string
	}{
		{"empty payload", nil, "batch: unexpected end of payload"},
		{"scalar batch", mp(t, "hello"), "batch: want array or map, got string"},
		{"one-element batch", mp(t, []any{ts}), "batch: want [ts, events, data_parallel_rank], got 1 elements"},
		{"string ts", mp(t, []any{"now", []any{}}), "ts: want float, got string"},
		{"events not a list", mp(t, []any{ts, omap{}}), "events: want array, got map"},
		{"more events than a batch takes", append([]byte{0x92, 0xcb, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0, 0xdd, 0, 1, 0, 1}, make([]byte, MaxBatchEvents+1)...),
			fmt.Sprintf("events: %d events in one batch, more than %d", MaxBatchEvents+1, MaxBatchEvents)},
		{"event not array or map", mp(t, []any{ts, []any{okStored, 5}}), "events[1]: want array or map, got integer"},
		{"empty event array", mp(t, []any{ts, []any{[]any{}}}), "events[0]: empty event array"},
		{"non-string tag", mp(t, []any{ts, []any{[]any{1, 2}}}), "events[0]: type: want string, got integer"},
		{"map event without type", mp(t, []any{ts, []any{omap{"block_hashes", []any{}}}}), "events[0]: missing type"},
		{
			"string block hash",
			mp(t, []any{ts, []any{okStored, okStored, okStored, []any{"BlockStored", []any{1, "two"}, nil, []any{}, 1, nil, nil, nil}}}),
			"events[3]: block_hashes[1]: want integer or bytes, got string",
		},
		{"nil block hash", mp(t, []any{ts, []any{[]any{"BlockRemoved", []any{nil}}}}), "events[0]: block_hashes[0]: want integer or bytes, got nil"},
		{"block hashes not a list", mp(t, []any{ts, []any{[]any{"BlockRemoved", 5}}}), "events[0]: block_hashes: want array, got integer"},
		{"string parent", mp(t, []any{ts, []any{[]any{"BlockStored", []any{1}, "p"}}}), "events[0]: parent_block_hash: want integer, bytes or nil, got string"},
		{"negative token", mp(t, []any{ts, []any{[]any{"BlockStored", []any{1}, nil, []any{1, 2, -3}}}}), "events[0]: token_ids[2]: token id out of range"},
		{"huge token", mp(t, []any{ts, []any{[]any{"BlockStored", []any{1}, nil, []any{uint64(1 << 32)}}}}), "events[0]: token_ids[0]: token id out of range"},
		{"float token", mp(t, []any{ts, []any{[]any{"BlockStored", []any{1}, nil, []any{1.5}}}}), "events[0]: token_ids[0]: want integer, got float"},
		{"nil block size", mp(t, []any{ts, []any{[]any{"BlockStored", []any{1}, nil, []any{}, nil}}}), "events[0]: block_size: want integer, got nil"},
		{"string lora id", mp(t, []any{ts, []any{[]any{"BlockStored", []any{1}, nil, []any{}, 1, "x"}}}), "events[0]: lora_id: want integer or nil, got string"},
		{"integer medium", mp(t, []any{ts, []any{[]any{"BlockRemoved", []any{1}, 5}}}), "events[0]: medium: want string or nil, got integer"},
		{"bytes spec kind", mp(t, []any{ts, []any{omap{"type", "BlockStored", "kv_cache_spec_kind", []byte("x")}}}), "events[0]: kv_cache_spec_kind: want string or nil, got bytes"},
		{"group idx out of range", mp(t, []any{ts, []any{[]any{"BlockRemoved", []any{1}, nil, u64(math.MaxUint64)}}}), "events[0]: group_idx: integer out of range"},
		{"bool data parallel rank", mp(t, []any{ts, []any{}, true}), "data_parallel_rank: want integer or nil, got bool"},
		{"map batch without events", mp(t, omap{"ts", ts}), "batch: missing events"},
		{"trailing bytes", append(mp(t, []any{ts, []any{}}), 0x01), "1 trailing bytes after the batch"},
		{"more events than bytes", mp(t, rawMP{0x92, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0xdd, 0, 0, 0, 5, 0x91}), "events: unexpected end of payload"},
		{"truncated token list", mp(t, []any{ts, []any{[]any{"BlockStored", []any{1}, nil, rawMP{0x93, 0x01, 0xcd, 0x01}}}}), "events[0]: token_ids[1]: unexpected end of payload"},
		{"token list longer than payload", mp(t, []any{ts, []any{[]any{"BlockStored", []any{1}, nil, rawMP{0x9f, 0x01}}}}), "events[0]: token_ids: unexpected end of payload"},
		{"truncated uint16 token", mp(t, []any{ts, []any{[]any{"BlockStored", []any{1}, nil, rawMP{0x91, 0xcd, 0x01}}}}), "events[0]: token_ids[0]: unexpected end of payload"},
		{"truncated string", mp(t, rawMP{0x92, 0x01, 0x91, 0x91, 0xab, 'B', 'l', 'o'}), "events[0]: type: unexpected end of payload"},
		{"deeply nested unknown field", mp(t, []any{ts, []any{append(okStored, nil, nil, nil, nil, deep)}}), "events[0]: element 12: value nested deeper than 64 levels"},
		{"deeply nested extra_keys", mp(t, []any{ts, []any{append(okStored, deep)}}), "events[0]: extra_keys: value nested deeper than 64 levels"},
		{"invalid msgpack code in unknown field", mp(t, []any{ts, []any{append(okStored, nil, nil, nil, nil, rawMP{0xc1})}}), "events[0]: element 12: msgpack: unknown code c1"},
	}
	var d Decoder
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Batch
			err := d.Decode(tt.payload, &b)
			if err == nil {
				t.Fatalf("Decode succeeded, want error %q\n%s", tt.want, dumpBatch(&b))
			}
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("error %v does not wrap ErrMalformed", err)
			}
			want := ErrMalformed.Error() + ": " + tt.want
			if !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error\n got: %v\nwant: %s", err, want)
			}
		})
	}
}

// TestDecodeCorruptInput checks that every truncation of valid payloads fails
// and that corrupted bytes never make the decoder panic.
func TestDecodeCorruptInput(t *testing.T) {
	payloads := [][]byte{
		mp(t, []any{1.5, []any{
			[]any{"BlockStored", []any{digest(1), -5}, uint64(9), tokens(70000, 8), 4, 1, "GPU", "lora", []any{[]any{"x"}}, 0, "full_attention", 0},
			[]any{"BlockRemoved", []any{1, 2}, "CPU", 1},
			[]any{"AllBlocksCleared"},
			[]any{"Future", omap{"a", []any{1}}},
		}, 0}),
		mp(t, omap{"events", []any{
			omap{"type", "BlockStored", "block_hashes", []any{uint64(1 << 40)}, "parent_block_hash", nil, "token_ids", tokens(1, 4), "block_size", 4, "lora_id", nil, "medium", "GPU", "lora_name", nil},
			omap{"block_hashes", []any{1}, "type", "BlockRemoved"},
		}, "ts", 2.5, "data_parallel_rank", 1}),
	}
	var d Decoder
	var b Batch
	for pi, p := range payloads {
		if err := d.Decode(p, &b); err != nil {
			t.Fatalf("payload %d: valid payload failed: %v", pi, err)
		}
		for n := range len(p) {
			if err := d.Decode(p[:n], &b); err == nil {
				t.Errorf("payload %d truncated to %d of %d bytes: Decode succeeded", pi, n, len(p))
			} else if !errors.Is(err, ErrMalformed) {
				t.Errorf("payload %d truncated to %d: error %v does not wrap ErrMalformed", pi, n, err)
			}
		}
		buf := make([]byte, len(p))
		for i := range p {
			for _, x := range []byte{0x00, 0x7f, 0x80, 0x90, 0xa0, 0xc0, 0xc1, 0xc4, 0xcf, 0xd3, 0xdc, 0xdd, 0xde, 0xdf, 0xff, p[i] ^ 0x01} {
				copy(buf, p)
				buf[i] = x
				_ = d.Decode(buf, &b) // must not panic
			}
		}
	}
}

// TestDecoderReuse decodes different batches into the same Batch and checks
// that nothing leaks from one decode into the next.
func TestDecoderReuse(t *testing.T) {
	big := mp(t, []any{1.0, []any{
		[]any{"BlockStored", []any{1, 2, 3}, 7, tokens(1, 12), 4, 5, "CPU", "lora", []any{"x"}, 2, "sliding_window", 128},
		[]any{"BlockRemoved", []any{4, 5}, "CPU", 3},
		[]any{"Mystery"},
	}, 1})
	small := mp(t, []any{2.0, []any{
		[]any{"BlockStored", []any{9}, nil, tokens(1, 4), 4, nil, nil, nil},
	}})
	var d Decoder
	var b Batch
	for range 3 {
		if err := d.Decode(big, &b); err != nil {
			t.Fatal(err)
		}
		if len(b.Events) != 3 || b.Events[2].TypeName != "Mystery" || b.Events[0].SlidingWindow != 128 {
			t.Fatalf("big batch decoded wrong:\n%s", dumpBatch(&b))
		}
		if err := d.Decode(small, &b); err != nil {
			t.Fatal(err)
		}
		want := Batch{TS: 2, Events: []Event{{Kind: KindBlockStored, BlockHashes: []uint64{9}, TokenIDs: seqU32(1, 4), BlockSize: 4, Medium: "GPU"}}}
		if !batchesEqual(&b, &want) {
			t.Fatalf("small batch after big one:\ngot:  %s\nwant: %s", dumpBatch(&b), dumpBatch(&want))
		}
		if b.Events[0].ExtraKeys == nil && cap(b.Events) < 3 {
			t.Fatalf("events capacity not reused: cap %d", cap(b.Events))
		}
	}
}

func TestDecodeAllocs(t *testing.T) {
	src := benchBatch()
	src.Events[0].LoRAName = "adapter-7"
	src.Events[0].SpecKind = "sliding_window"
	src.Events[0].ExtraKeys = mp(t, []any{[]any{"adapter-7"}, nil})
	src.Events = append(src.Events, Event{Kind: KindBlockRemoved, BlockHashes: []uint64{1, 2}, Medium: "CPU"})
	for _, enc := range []Encoding{EncodingArray, EncodingMap} {
		payload, err := AppendBatch(nil, src, enc)
		if err != nil {
			t.Fatal(err)
		}
		var d Decoder
		var b Batch
		allocs := testing.AllocsPerRun(50, func() {
			if err := d.Decode(payload, &b); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: steady-state Decode allocates %.1f times per call, want 0", enc, allocs)
		}
	}
}

func TestKindString(t *testing.T) {
	tests := []struct {
		k    Kind
		want string
	}{
		{KindUnknown, "Unknown"},
		{KindBlockStored, "BlockStored"},
		{KindBlockRemoved, "BlockRemoved"},
		{KindAllBlocksCleared, "AllBlocksCleared"},
		{Kind(200), "Unknown"},
	}
	for _, tt := range tests {
		if got := tt.k.String(); got != tt.want {
			t.Errorf("Kind(%d).String() = %q, want %q", tt.k, got, tt.want)
		}
	}
	if EncodingArray.String() != "array" || EncodingMap.String() != "map" || Encoding(9).String() != "Encoding(9)" {
		t.Errorf("Encoding.String: %q %q %q", EncodingArray, EncodingMap, Encoding(9))
	}
}

func TestFullAttention(t *testing.T) {
	tests := []struct {
		kind string
		want bool
	}{
		{"", true},
		{"full_attention", true},
		{"mla_attention", true},
		{"sliding_window", false},
		{"chunked_local_attention", false},
		{"mamba", false},
	}
	for _, tt := range tests {
		e := Event{Kind: KindBlockStored, SpecKind: tt.kind}
		if got := e.FullAttention(); got != tt.want {
			t.Errorf("FullAttention() with SpecKind %q = %v, want %v", tt.kind, got, tt.want)
		}
	}
}
