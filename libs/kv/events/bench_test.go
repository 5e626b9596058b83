package events

import (
	"testing"
)

// benchBatch is a realistic hot-path batch: 64 BlockStored events of 4
// blocks of 16 tokens each, with 64-bit hashes and vocabulary-sized token ids.
func benchBatch() *Batch {
	b := &Batch{TS: 1.7e9, DataParallelRank: 0, HasDataParallelRank: true}
	h := uint64(0x9e3779b97f4a7c15)
	for i := range 64 {
		ev := Event{
			Kind:        KindBlockStored,
			BlockSize:   16,
			Medium:      MediumGPU,
			HasParent:   i > 0,
			BlockHashes: make([]uint64, 4),
			TokenIDs:    make([]uint32, 64),
		}
		if ev.HasParent {
			ev.ParentHash = h
		}
		for j := range ev.BlockHashes {
			h = h*6364136223846793005 + 1442695040888963407
			ev.BlockHashes[j] = h
		}
		for j := range ev.TokenIDs {
			ev.TokenIDs[j] = uint32((i*64 + j*7919) % 151936)
		}
		b.Events = append(b.Events, ev)
	}
	return b
}

func BenchmarkDecode(b *testing.B) {
	for _, enc := range []Encoding{EncodingArray, EncodingMap} {
		b.Run(enc.String(), func(b *testing.B) {
			src := benchBatch()
			payload, err := AppendBatch(nil, src, enc)
			if err != nil {
				b.Fatal(err)
			}
			blocks := 0
			for i := range src.Events {
				blocks += len(src.Events[i].BlockHashes)
			}
			var d Decoder
			var out Batch
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := d.Decode(payload, &out); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(blocks)*float64(b.N)/b.Elapsed().Seconds(), "blocks/s")
		})
	}
}

func BenchmarkAppendBatch(b *testing.B) {
	for _, enc := range []Encoding{EncodingArray, EncodingMap} {
		b.Run(enc.String(), func(b *testing.B) {
			src := benchBatch()
			var e Encoder
			buf, err := e.AppendBatch(nil, src, enc)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if buf, err = e.AppendBatch(buf[:0], src, enc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
