package events

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzDecode feeds arbitrary payloads to the decoder. The seed corpus in
// testdata/fuzz/FuzzDecode holds real-looking batches in both encodings.
// Properties: Decode never panics; every error wraps ErrMalformed; a batch
// that decodes re-encodes (without its unknown events) in both encodings to
// bytes that decode to an equal batch and re-encode to the same bytes.
func FuzzDecode(f *testing.F) {
	for _, enc := range []Encoding{EncodingArray, EncodingMap} {
		for _, b := range roundTripBatches() {
			if len(b.Events) > 100 || (len(b.Events) == 1 && len(b.Events[0].BlockHashes) > 100) {
				continue // keep the in-code seeds small
			}
			p, err := AppendBatch(nil, b, enc)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(p)
		}
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		var d Decoder
		var b Batch
		if err := d.Decode(payload, &b); err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		known := knownOnly(&b)
		for _, enc := range []Encoding{EncodingArray, EncodingMap} {
			p, err := AppendBatch(nil, known, enc)
			if err != nil {
				t.Fatalf("%s: re-encode decoded batch: %v\n%s", enc, err, dumpBatch(known))
			}
			var again Batch
			if err := d.Decode(p, &again); err != nil {
				t.Fatalf("%s: decode re-encoded batch: %v", enc, err)
			}
			if !batchesEqual(&again, known) {
				t.Fatalf("%s: round trip mismatch\ngot:  %s\nwant: %s", enc, dumpBatch(&again), dumpBatch(known))
			}
			p2, err := AppendBatch(nil, &again, enc)
			if err != nil || !bytes.Equal(p, p2) {
				t.Fatalf("%s: encoding is not stable (err %v)", enc, err)
			}
		}
	})
}
