package app

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/kv/index"
	"github.com/hermod/hermod/services/indexer/internal/projection"
	"github.com/hermod/hermod/testkit/bustest"
	"github.com/hermod/hermod/testkit/natsembed"
)

func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs an embedded NATS server (skipped with -short)")
	}
}

// A replica starting on an empty snapshot bucket whose last-message
// request gets no answer starts at once. List would wait out its context
// there: nats.go sends the end-of-listing marker of an empty bucket only
// when that request says "not found".
func TestSnapshotsLoadAnEmptyBucketPromptly(t *testing.T) {
	skipShort(t)
	deny := &server.Permissions{Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.API.DIRECT.GET.>"}}}
	srv, err := natsembed.Start(natsembed.Options{JetStream: true, Users: []*server.User{{Username: "indexer", Password: "secret", Permissions: deny}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	_, js := bustest.ConnectWith(t, srv, nats.UserInfo("indexer", "secret"))
	s, err := newSnapshots(js, "p", "a", 0, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if p := s.load(t.Context(), index.Config{Shards: 2}, prometheus.NewRegistry()); p != nil {
		t.Fatal("restored a snapshot from an empty bucket")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("load took %s", took)
	}
	if n := testutil.ToFloat64(s.failures); n != 0 {
		t.Fatalf("%v failures on an empty bucket", n)
	}
	// the fault is real: List on that bucket waits out its context
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	if _, err := s.obs.List(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("List: %v, want it to wait out its context", err)
	}
}

// With NATS away when the replica starts, it builds its index from the
// stream; its snapshots begin once NATS is back, in a bucket with the
// streams' replica count.
func TestSnapshotsBeginWhenTheBucketComesBack(t *testing.T) {
	skipShort(t)
	srv := bustest.Start(t)
	_, js := bustest.Connect(t, srv)
	bustest.Stop(t, srv)
	s, err := newSnapshots(js, "p", "a", 1, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if p := s.load(t.Context(), index.Config{Shards: 2}, prometheus.NewRegistry()); p != nil {
		t.Fatal("restored a snapshot with NATS away")
	}
	if took := time.Since(start); took > listTimeout+time.Second {
		t.Fatalf("load took %s", took)
	}
	if n := testutil.ToFloat64(s.failures); n != 1 {
		t.Fatalf("%v failures, want 1", n)
	}
	idx, err := index.New(index.Config{Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	p, err := projection.New(idx, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	p.Apply(&eventsv1.KVEventBatch{Pod: "pod-0", Seq: 1}, 7)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.run(ctx, p, 20*time.Millisecond)
	}()
	t.Cleanup(func() { cancel(); <-done })
	time.Sleep(100 * time.Millisecond) // ticks with NATS still away
	bustest.Restart(t, srv)
	deadline := time.Now().Add(15 * time.Second)
	for testutil.ToFloat64(s.covered) != 7 {
		if time.Now().After(deadline) {
			t.Fatalf("no snapshot after NATS came back (%v failures)", testutil.ToFloat64(s.failures))
		}
		time.Sleep(20 * time.Millisecond)
	}
	obs, err := js.ObjectStore(t.Context(), SnapshotBucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := obs.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.Replicas() != 1 {
		t.Fatalf("bucket has %d replicas", st.Replicas())
	}
	restored, err := newSnapshots(js, "p", "b", 0, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if r := restored.load(t.Context(), index.Config{Shards: 2}, prometheus.NewRegistry()); r == nil || r.StreamSequence() != 7 {
		t.Fatalf("a new replica did not restore the snapshot: %v", r)
	}
}

// Events applied while a snapshot uploads are not in it: when the stream
// then goes quiet, the next tick writes one that covers them.
func TestSnapshotsCoverEventsAppliedDuringAnUpload(t *testing.T) {
	skipShort(t)
	srv := bustest.Start(t)
	_, js := bustest.Connect(t, srv)
	s, err := newSnapshots(js, "p", "a", 1, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := index.New(index.Config{Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	p, err := projection.New(idx, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	p.Apply(&eventsv1.KVEventBatch{Pod: "pod-0", Seq: 1}, 7)
	uploads := make(chan uint64, 16)
	s.uploading = func() {
		uploads <- p.StreamSequence()
		if p.StreamSequence() == 7 {
			// arrives during the first upload; nothing after it
			p.Apply(&eventsv1.KVEventBatch{Pod: "pod-0", Seq: 2}, 8)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.run(ctx, p, 10*time.Millisecond)
	}()
	t.Cleanup(func() { cancel(); <-done })
	for _, want := range []uint64{7, 8} {
		select {
		case got := <-uploads:
			if got != want {
				t.Fatalf("upload at sequence %d, want %d", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no snapshot at sequence %d (covered %v)", want, testutil.ToFloat64(s.covered))
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for testutil.ToFloat64(s.covered) != 8 {
		if time.Now().After(deadline) {
			t.Fatalf("the newest snapshot covers %v, the stream 8", testutil.ToFloat64(s.covered))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// quiet now: no more snapshots
	select {
	case got := <-uploads:
		t.Fatalf("a snapshot at %d with nothing new", got)
	case <-time.After(100 * time.Millisecond):
	}
}
