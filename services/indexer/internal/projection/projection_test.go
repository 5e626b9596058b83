package projection

import (
	"bytes"
	"errors"
	"testing"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/kv/events"
	"github.com/hermod/hermod/libs/kv/index"
)

func payload(t *testing.T, evs ...events.Event) []byte {
	t.Helper()
	b, err := events.AppendBatch(nil, &events.Batch{Events: evs}, events.EncodingMap)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func tokens(from int) []uint32 {
	out := make([]uint32, 16)
	for i := range out {
		out[i] = uint32(from + i)
	}
	return out
}

func newProjector(t *testing.T) *Projector {
	t.Helper()
	x, err := index.New(index.Config{Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(x, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestApplyClearsMalformedAndSnapshots(t *testing.T) {
	p := newProjector(t)
	p.Apply(&eventsv1.KVEventBatch{Pod: "a", Model: "m", Seq: 0, ClearPod: true, Payload: payload(t, events.Event{Kind: events.KindBlockStored, BlockHashes: []uint64{1}, TokenIDs: tokens(0), BlockSize: 16})}, 1)
	p.Apply(&eventsv1.KVEventBatch{Pod: "b", Model: "m", Seq: 7, Payload: payload(t, events.Event{Kind: events.KindBlockStored, BlockHashes: []uint64{1}, TokenIDs: tokens(0), BlockSize: 16})}, 2)
	p.Apply(&eventsv1.KVEventBatch{Pod: "b", Model: "m", Seq: 8, Payload: []byte{0xc1}}, 3) // not msgpack
	if st := p.Stats(); st.Stored != 2 || p.Index().Len() != 1 || p.StreamSequence() != 3 {
		t.Fatalf("stats %+v, %d keys, stream %d", st, p.Index().Len(), p.StreamSequence())
	}
	if s, ok := p.PodSeq("b"); !ok || s != 8 {
		t.Fatalf("pod b at %d, %v", s, ok)
	}
	var buf bytes.Buffer
	seq, err := p.WriteSnapshot(&buf)
	if err != nil || seq != 3 {
		t.Fatalf("snapshot at %d: %v", seq, err)
	}
	q, err := ReadSnapshot(bytes.NewReader(buf.Bytes()), index.Config{Shards: 8}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if q.StreamSequence() != 3 || q.Index().Digest() != p.Index().Digest() {
		t.Fatalf("restored at %d", q.StreamSequence())
	}
	if s, _ := q.PodSeq("a"); s != 0 {
		t.Fatalf("pod a restored at %d", s)
	}
	// a reset clears the pod in both
	next := &eventsv1.KVEventBatch{Pod: "a", Model: "m", Seq: 0, ClearPod: true}
	p.Apply(next, 4)
	q.Apply(next, 4)
	if p.Index().Digest() != q.Index().Digest() || p.Index().Len() != 1 {
		t.Fatal("projections diverged after the snapshot")
	}
	if _, err := ReadSnapshot(bytes.NewReader([]byte("garbage")), index.Config{}, nil); !errors.Is(err, index.ErrSnapshot) {
		t.Fatalf("garbage: %v", err)
	}
	if _, err := ReadSnapshot(bytes.NewReader(buf.Bytes()[:len(buf.Bytes())-3]), index.Config{}, nil); !errors.Is(err, index.ErrSnapshot) {
		t.Fatalf("truncated: %v", err)
	}
}
