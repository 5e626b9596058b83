package ingest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/kv/events"
	"github.com/hermod/hermod/libs/kv/index"
	"github.com/hermod/hermod/libs/kv/kvzmq"
)

const model = "m"

// gatedSink collects batches; while closed it blocks the follower, so the
// SUB socket's queue fills past its high-water mark and ZMQ drops batches.
type gatedSink struct {
	mu      sync.Mutex
	got     []*eventsv1.KVEventBatch
	gate    chan struct{}
	newData chan struct{}
}

func newGatedSink() *gatedSink {
	return &gatedSink{gate: make(chan struct{}), newData: make(chan struct{}, 1)}
}

func (s *gatedSink) Emit(b *eventsv1.KVEventBatch) {
	s.mu.Lock()
	gate := s.gate
	s.mu.Unlock()
	<-gate
	s.mu.Lock()
	s.got = append(s.got, b)
	s.mu.Unlock()
	select {
	case s.newData <- struct{}{}:
	default:
	}
}

func (s *gatedSink) batches() []*eventsv1.KVEventBatch {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*eventsv1.KVEventBatch(nil), s.got...)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// workload is a pod's event history: prompts stored in chains of blocks,
// some removed later.
func workload(n int, seed uint64) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	var out [][]byte
	var held []uint64
	next := uint64(1)
	for range n {
		var b events.Batch
		if len(held) > 8 && rng.IntN(4) == 0 {
			i := rng.IntN(len(held))
			b.Events = append(b.Events, events.Event{Kind: events.KindBlockRemoved, BlockHashes: []uint64{held[i]}})
			held = append(held[:i], held[i+1:]...)
		} else {
			hashes := []uint64{next, next + 1}
			next += 2
			tokens := make([]uint32, 32)
			for i := range tokens {
				tokens[i] = uint32(rng.IntN(50000))
			}
			b.Events = append(b.Events, events.Event{Kind: events.KindBlockStored, BlockHashes: hashes, TokenIDs: tokens, BlockSize: 16})
			held = append(held, hashes...)
		}
		p, err := events.AppendBatch(nil, &b, events.EncodingArray)
		if err != nil {
			panic(err)
		}
		out = append(out, p)
	}
	return out
}

func project(t *testing.T, batches []*eventsv1.KVEventBatch) *index.Index {
	t.Helper()
	x, err := index.New(index.Config{Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	dec := events.NewDecoder()
	var b events.Batch
	for _, kb := range batches {
		if kb.GetClearPod() {
			x.ClearPod(kb.GetPod())
		}
		if err := dec.Decode(kb.GetPayload(), &b); err != nil {
			t.Fatal(err)
		}
		x.Apply(kb.GetPod(), kb.GetModel(), &b)
	}
	return x
}

// A subscriber too slow for the publisher loses batches; replay fills the
// gaps, and the index built from what ingest hands on equals the index of
// every batch the engine published.
func TestIngestRepairsDroppedBatchesExactly(t *testing.T) {
	evPort, rpPort := freePort(t), freePort(t)
	pub, err := kvzmq.NewPublisher(kvzmq.PublisherConfig{
		Endpoint: fmt.Sprintf("tcp://*:%d", evPort), ReplayEndpoint: fmt.Sprintf("tcp://127.0.0.1:%d", rpPort),
		Topic: "kv@pod-a@m", HWM: 8,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	sink := newGatedSink()
	// asks of a quiet pod's replay socket are an hour apart: only the gap
	// seen when the last batch arrives repairs the stream
	mg, err := NewManager(Config{Pool: "p", Replica: "r1", Sink: sink, HWM: 8, PodQueue: 8, IdleCheck: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer mg.Close()
	mg.SetTargets([]Target{{Pod: "pod-a", Model: model, Events: fmt.Sprintf("tcp://127.0.0.1:%d", evPort), Replay: fmt.Sprintf("tcp://127.0.0.1:%d", rpPort)}})

	payloads := workload(3000, 7)
	// the subscription takes a moment to reach the publisher: the first
	// batches may be lost before it, as with any late subscriber
	time.Sleep(100 * time.Millisecond)
	for _, p := range payloads[:len(payloads)-1] {
		if _, err := pub.Publish(p); err != nil {
			t.Fatal(err)
		}
	}
	// let the follower go: the SUB queue overflowed meanwhile
	sink.mu.Lock()
	close(sink.gate)
	sink.mu.Unlock()
	// what got through is handed on; then the last batch shows the gap
	for n := -1; n != len(sink.batches()); time.Sleep(200 * time.Millisecond) {
		n = len(sink.batches())
	}
	if _, err := pub.Publish(payloads[len(payloads)-1]); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(20 * time.Second)
	for {
		got := sink.batches()
		if n := len(got); n > 0 && got[n-1].GetSeq() == uint64(len(payloads)-1) {
			break
		}
		select {
		case <-sink.newData:
		case <-deadline:
			t.Fatalf("ingest handed on %d batches, not up to seq %d", len(sink.batches()), len(payloads)-1)
		case <-time.After(100 * time.Millisecond):
		}
	}
	got := sink.batches()
	for i, b := range got {
		if b.GetSeq() != uint64(i) {
			t.Fatalf("batch %d has seq %d: not every batch once in order", i, b.GetSeq())
		}
		if b.GetClearPod() != (i == 0) || b.GetPod() != "pod-a" || b.GetModel() != model || b.GetPool() != "p" || b.GetReplica() != "r1" {
			t.Fatalf("batch %d: %v", i, b)
		}
	}
	f := stopPod(t, mg, "pod-a") // its counts are read below
	if f.seq.stats.gaps == 0 {
		t.Fatalf("no gap to repair: the test did not overflow the subscriber (stats %+v)", f.seq.stats)
	}
	want := make([]*eventsv1.KVEventBatch, len(payloads))
	for i, p := range payloads {
		want[i] = &eventsv1.KVEventBatch{Pod: "pod-a", Model: model, Seq: uint64(i), Payload: p}
	}
	if project(t, got).Digest() != project(t, want).Digest() {
		t.Fatal("the index of the ingested batches differs from the index of the published ones")
	}
	t.Logf("repairs: %+v", f.seq.stats)
}
