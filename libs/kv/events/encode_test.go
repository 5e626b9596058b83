package events

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
)

// TestAppendBatchWireFormat pins the encoder's output to the layout vLLM's
// msgspec encoder produces, built by hand with the msgpack library.
func TestAppendBatchWireFormat(t *testing.T) {
	const ts = 1712345678.5
	plain := Event{
		Kind: KindBlockStored, BlockHashes: []uint64{1, math.MaxUint64}, ParentHash: 300, HasParent: true,
		TokenIDs: []uint32{5, 70000}, BlockSize: 1, Medium: "GPU",
	}
	plainFields := []any{[]any{uint64(1), uint64(math.MaxUint64)}, uint64(300), []any{5, 70000}, 1, nil, "GPU", nil}
	plainMap := omap{
		"type", "BlockStored",
		"block_hashes", []any{uint64(1), uint64(math.MaxUint64)},
		"parent_block_hash", uint64(300),
		"token_ids", []any{5, 70000},
		"block_size", 1,
		"lora_id", nil,
		"medium", "GPU",
		"lora_name", nil,
	}
	withGroup := plain
	withGroup.HasGroupIdx = true // group 0 is set, not default
	withKind := plain
	withKind.SpecKind = "full_attention"
	full := plain
	full.HasParent, full.ParentHash = false, 0
	full.LoRAID, full.HasLoRAID, full.LoRAName = 3, true, "my-lora"
	full.ExtraKeys = mp(t, []any{[]any{"my-lora"}, nil})
	full.GroupIdx, full.HasGroupIdx, full.SpecKind, full.SlidingWindow = 1, true, "sliding_window", 4096
	extraOnly := plain
	extraOnly.ExtraKeys = mp(t, []any{nil, nil})

	tests := []struct {
		name  string
		batch Batch
		enc   Encoding
		want  any
	}{
		{
			name:  "array: old two-element batch without rank",
			batch: Batch{TS: ts, Events: []Event{plain}},
			enc:   EncodingArray,
			want:  []any{ts, []any{append([]any{"BlockStored"}, plainFields...)}},
		},
		{
			name:  "array: rank, trailing defaults omitted",
			batch: Batch{TS: ts, DataParallelRank: 0, HasDataParallelRank: true, Events: []Event{plain}},
			enc:   EncodingArray,
			want:  []any{ts, []any{append([]any{"BlockStored"}, plainFields...)}, 0},
		},
		{
			name:  "array: group_idx set forces nil extra_keys before it",
			batch: Batch{TS: ts, Events: []Event{withGroup}},
			enc:   EncodingArray,
			want:  []any{ts, []any{append(append([]any{"BlockStored"}, plainFields...), nil, 0)}},
		},
		{
			name:  "array: spec kind without group",
			batch: Batch{TS: ts, Events: []Event{withKind}},
			enc:   EncodingArray,
			want:  []any{ts, []any{append(append([]any{"BlockStored"}, plainFields...), nil, nil, "full_attention")}},
		},
		{
			name:  "array: extra_keys only",
			batch: Batch{TS: ts, Events: []Event{extraOnly}},
			enc:   EncodingArray,
			want:  []any{ts, []any{append(append([]any{"BlockStored"}, plainFields...), []any{nil, nil})}},
		},
		{
			name:  "array: every field",
			batch: Batch{TS: ts, HasDataParallelRank: true, DataParallelRank: 3, Events: []Event{full}},
			enc:   EncodingArray,
			want: []any{ts, []any{[]any{
				"BlockStored", []any{uint64(1), uint64(math.MaxUint64)}, nil, []any{5, 70000}, 1, 3, "GPU", "my-lora",
				[]any{[]any{"my-lora"}, nil}, 1, "sliding_window", 4096,
			}}, 3},
		},
		{
			name: "array: removed and cleared",
			batch: Batch{TS: ts, HasDataParallelRank: true, Events: []Event{
				{Kind: KindBlockRemoved, BlockHashes: []uint64{7}, Medium: "CPU"},
				{Kind: KindBlockRemoved, BlockHashes: []uint64{7}, GroupIdx: 0, HasGroupIdx: true},
				{Kind: KindAllBlocksCleared},
			}},
			enc: EncodingArray,
			want: []any{ts, []any{
				[]any{"BlockRemoved", []any{7}, "CPU"},
				[]any{"BlockRemoved", []any{7}, nil, 0},
				[]any{"AllBlocksCleared"},
			}, 0},
		},
		{
			name:  "map: required fields always, optional ones omitted",
			batch: Batch{TS: ts, HasDataParallelRank: true, Events: []Event{plain}},
			enc:   EncodingMap,
			want:  omap{"ts", ts, "events", []any{plainMap}, "data_parallel_rank", 0},
		},
		{
			name:  "map: no rank, group 0 and full_attention written when set",
			batch: Batch{TS: ts, Events: []Event{func() Event { e := withGroup; e.SpecKind = "full_attention"; return e }()}},
			enc:   EncodingMap,
			want:  omap{"ts", ts, "events", []any{append(append(omap{}, plainMap...), "group_idx", 0, "kv_cache_spec_kind", "full_attention")}},
		},
		{
			name:  "map: every field",
			batch: Batch{TS: ts, Events: []Event{full}},
			enc:   EncodingMap,
			want: omap{"ts", ts, "events", []any{omap{
				"type", "BlockStored",
				"block_hashes", []any{uint64(1), uint64(math.MaxUint64)},
				"parent_block_hash", nil,
				"token_ids", []any{5, 70000},
				"block_size", 1,
				"lora_id", 3,
				"medium", "GPU",
				"lora_name", "my-lora",
				"extra_keys", []any{[]any{"my-lora"}, nil},
				"group_idx", 1,
				"kv_cache_spec_kind", "sliding_window",
				"kv_cache_spec_sliding_window", 4096,
			}}},
		},
		{
			name: "map: removed and cleared",
			batch: Batch{TS: ts, Events: []Event{
				{Kind: KindBlockRemoved, BlockHashes: []uint64{7}, Medium: "GPU", GroupIdx: 2, HasGroupIdx: true},
				{Kind: KindAllBlocksCleared},
			}},
			enc: EncodingMap,
			want: omap{"ts", ts, "events", []any{
				omap{"type", "BlockRemoved", "block_hashes", []any{7}, "medium", "GPU", "group_idx", 2},
				omap{"type", "AllBlocksCleared"},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := AppendBatch(nil, &tt.batch, tt.enc)
			if err != nil {
				t.Fatalf("AppendBatch: %v", err)
			}
			if want := mp(t, tt.want); !bytes.Equal(got, want) {
				t.Fatalf("AppendBatch bytes\n got: %x\nwant: %x", got, want)
			}
		})
	}
}

func roundTripBatches() map[string]*Batch {
	return map[string]*Batch{
		"empty":         {TS: 0, Events: []Event{}},
		"no rank":       {TS: 1.25, Events: []Event{{Kind: KindAllBlocksCleared}}},
		"negative rank": {TS: -1, DataParallelRank: -1, HasDataParallelRank: true, Events: []Event{}},
		"bench":         benchBatch(),
		"mixed": {TS: 1712345678.123, DataParallelRank: 7, HasDataParallelRank: true, Events: []Event{
			{
				Kind: KindBlockStored, BlockHashes: []uint64{0, 1, 127, 128, 255, 256, 65535, 65536, 1 << 32, math.MaxUint64},
				ParentHash: 1 << 63, HasParent: true, TokenIDs: []uint32{0, 127, 128, 65535, 65536, math.MaxUint32},
				BlockSize: 16, LoRAID: -1, HasLoRAID: true, LoRAName: "adapter", Medium: "CPU",
				ExtraKeys: []byte{0x92, 0x91, 0xa1, 'x', 0xc0}, GroupIdx: 2, HasGroupIdx: true,
				SpecKind: "sliding_window", SlidingWindow: 1024,
			},
			{Kind: KindBlockStored, BlockHashes: []uint64{5}, TokenIDs: []uint32{}, BlockSize: 0, Medium: "GPU", SpecKind: "mla_attention"},
			{Kind: KindBlockStored, BlockHashes: []uint64{6}, BlockSize: 16, Medium: "GPU", SlidingWindow: 64},
			{Kind: KindBlockRemoved, BlockHashes: []uint64{1, 2, 3}, Medium: "GPU"},
			{Kind: KindBlockRemoved, BlockHashes: []uint64{}, Medium: "DISK", GroupIdx: 0, HasGroupIdx: true},
			{Kind: KindAllBlocksCleared},
		}},
		"long strings and lists": {TS: 3, Events: []Event{{
			Kind: KindBlockStored, BlockHashes: make([]uint64, 70000), TokenIDs: make([]uint32, 300),
			BlockSize: 300, Medium: strings.Repeat("m", 40), LoRAName: strings.Repeat("l", 70000),
		}}},
	}
}

func TestRoundTrip(t *testing.T) {
	for name, src := range roundTripBatches() {
		for _, enc := range []Encoding{EncodingArray, EncodingMap} {
			t.Run(name+"/"+enc.String(), func(t *testing.T) {
				var e Encoder
				payload, err := e.AppendBatch(nil, src, enc)
				if err != nil {
					t.Fatalf("AppendBatch: %v", err)
				}
				var d Decoder
				var got Batch
				if err := d.Decode(payload, &got); err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if !batchesEqual(&got, src) {
					t.Fatalf("round trip mismatch\ngot:  %.2000s\nwant: %.2000s", dumpBatch(&got), dumpBatch(src))
				}
				again, err := e.AppendBatch(nil, &got, enc)
				if err != nil {
					t.Fatalf("AppendBatch of decoded batch: %v", err)
				}
				if !bytes.Equal(again, payload) {
					t.Fatalf("re-encoding the decoded batch changed the bytes")
				}
			})
		}
	}
}

func TestAppendBatchAppends(t *testing.T) {
	prefix := []byte("prefix")
	b := &Batch{TS: 1, Events: []Event{{Kind: KindAllBlocksCleared}}}
	out, err := AppendBatch(append([]byte(nil), prefix...), b, EncodingArray)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(out, prefix) {
		t.Fatalf("output %q lost the prefix", out)
	}
	var got Batch
	if err := new(Decoder).Decode(out[len(prefix):], &got); err != nil || !batchesEqual(&got, b) {
		t.Fatalf("decode appended batch: %v\n%s", err, dumpBatch(&got))
	}
}

func TestAppendBatchErrors(t *testing.T) {
	tests := []struct {
		name  string
		batch Batch
		enc   Encoding
		want  string
		inval bool
	}{
		{
			name:  "unknown kind",
			batch: Batch{Events: []Event{{Kind: KindAllBlocksCleared}, {Kind: KindUnknown, TypeName: "Mystery"}}},
			want:  `encode kv event batch: events[1]: invalid kv event: cannot encode kind Unknown (type "Mystery")`,
			inval: true,
		},
		{
			name:  "extra_keys not one value",
			batch: Batch{Events: []Event{{Kind: KindBlockStored, ExtraKeys: []byte{0x92, 0x01}}}},
			want:  "encode kv event batch: events[0]: invalid kv event: extra_keys is not one msgpack value",
			inval: true,
		},
		{
			name:  "extra_keys with trailing bytes",
			batch: Batch{Events: []Event{{Kind: KindBlockStored, ExtraKeys: []byte{0x01, 0x02}}}},
			enc:   EncodingMap,
			want:  "encode kv event batch: events[0]: invalid kv event: extra_keys is not one msgpack value",
			inval: true,
		},
		{
			name:  "bad encoding",
			batch: Batch{},
			enc:   Encoding(7),
			want:  "encode kv event batch: unknown encoding 7",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := []byte("keep")
			out, err := AppendBatch(dst, &tt.batch, tt.enc)
			if err == nil {
				t.Fatal("AppendBatch succeeded")
			}
			if err.Error() != tt.want {
				t.Errorf("error\n got: %v\nwant: %s", err, tt.want)
			}
			if errors.Is(err, ErrInvalidEvent) != tt.inval {
				t.Errorf("errors.Is(err, ErrInvalidEvent) = %v, want %v", !tt.inval, tt.inval)
			}
			if string(out) != "keep" {
				t.Errorf("dst not restored on error: %q", out)
			}
		})
	}
}

func TestAppendBatchAllocs(t *testing.T) {
	src := benchBatch()
	src.Events[0].ExtraKeys = []byte{0x91, 0xc0}
	for _, enc := range []Encoding{EncodingArray, EncodingMap} {
		var e Encoder
		buf, err := e.AppendBatch(nil, src, enc)
		if err != nil {
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(50, func() {
			if buf, err = e.AppendBatch(buf[:0], src, enc); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: steady-state AppendBatch allocates %.1f times per call, want 0", enc, allocs)
		}
	}
}
