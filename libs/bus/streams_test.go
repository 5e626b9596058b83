package bus

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/testkit/bustest"
)

// server starts a server without streams.
func server(t *testing.T) (jetstream.JetStream, func() jetstream.JetStream) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs an embedded NATS server (skipped with -short)")
	}
	srv := bustest.Start(t)
	_, js := bustest.Connect(t, srv)
	return js, func() jetstream.JetStream {
		_, js := bustest.Connect(t, srv)
		return js
	}
}

func streamConfig(t *testing.T, js jetstream.JetStream, name string) jetstream.StreamConfig {
	t.Helper()
	s, err := js.Stream(testContext(t), name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	return s.CachedInfo().Config
}

func TestEnsureStreamsCreates(t *testing.T) {
	t.Parallel()
	js, _ := server(t)
	ctx := testContext(t)
	if err := EnsureStreams(ctx, js, Limits{}); err != nil {
		t.Fatal(err)
	}
	def := DefaultLimits()
	for _, tc := range []struct {
		name, subject string
		limits        StreamLimits
	}{
		{KVStream, "hermod.kv.>", def.KV},
		{DecisionsStream, "hermod.decisions.>", def.Decisions},
		{CompletionsStream, "hermod.completions.>", def.Completions},
		{ScalingStream, "hermod.scaling.>", def.Scaling},
	} {
		cfg := streamConfig(t, js, tc.name)
		if len(cfg.Subjects) != 1 || cfg.Subjects[0] != tc.subject {
			t.Errorf("%s: subjects %v, want [%s]", tc.name, cfg.Subjects, tc.subject)
		}
		if cfg.MaxAge != tc.limits.MaxAge || cfg.MaxBytes != tc.limits.MaxBytes {
			t.Errorf("%s: max age %s, max bytes %d, want %s, %d", tc.name, cfg.MaxAge, cfg.MaxBytes, tc.limits.MaxAge, tc.limits.MaxBytes)
		}
		if cfg.Duplicates != DefaultDuplicateWindow || cfg.Discard != jetstream.DiscardOld ||
			cfg.Storage != jetstream.FileStorage || cfg.Replicas != 1 || cfg.Retention != jetstream.LimitsPolicy {
			t.Errorf("%s: config %+v", tc.name, cfg)
		}
	}
	kv, err := js.KeyValue(ctx, MetricsBucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.TTL() != DefaultMetricsTTL || st.History() != 1 {
		t.Errorf("metrics bucket: ttl %s, history %d", st.TTL(), st.History())
	}
	// Default limits documented in the brief.
	if def.Decisions != (StreamLimits{24 * time.Hour, 1 << 30}) || def.Scaling != (StreamLimits{30 * 24 * time.Hour, 64 << 20}) ||
		def.KV != (StreamLimits{time.Hour, 1 << 30}) || def.MetricsTTL != time.Minute || def.DuplicateWindow != 2*time.Minute {
		t.Errorf("DefaultLimits() = %+v", def)
	}
}

func TestEnsureStreamsIdempotent(t *testing.T) {
	t.Parallel()
	js, _ := server(t)
	ctx := testContext(t)
	if err := EnsureStreams(ctx, js, Limits{}); err != nil {
		t.Fatal(err)
	}
	before := streamConfig(t, js, DecisionsStream)
	s, err := js.Stream(ctx, DecisionsStream)
	if err != nil {
		t.Fatal(err)
	}
	created := s.CachedInfo().Created
	publishDecisions(t, js, "p", 0, 3)
	for range 3 {
		if err := EnsureStreams(ctx, js, Limits{}); err != nil {
			t.Fatal(err)
		}
	}
	s, err = js.Stream(ctx, DecisionsStream)
	if err != nil {
		t.Fatal(err)
	}
	if !s.CachedInfo().Created.Equal(created) || !streamMatches(s.CachedInfo().Config, before) {
		t.Fatalf("stream changed: %+v", s.CachedInfo())
	}
	if n := s.CachedInfo().State.Msgs; n != 3 {
		t.Fatalf("stream holds %d messages, want 3", n)
	}
}

func TestEnsureStreamsUpdatesChangedLimits(t *testing.T) {
	t.Parallel()
	js, _ := server(t)
	ctx := testContext(t)
	if err := EnsureStreams(ctx, js, Limits{}); err != nil {
		t.Fatal(err)
	}
	publishDecisions(t, js, "p", 0, 3)
	l := Limits{
		Decisions:       StreamLimits{MaxAge: 48 * time.Hour, MaxBytes: 2 << 30},
		Scaling:         StreamLimits{MaxAge: time.Minute},
		MetricsTTL:      30 * time.Second,
		DuplicateWindow: 5 * time.Minute,
	}
	if err := EnsureStreams(ctx, js, l); err != nil {
		t.Fatal(err)
	}
	if cfg := streamConfig(t, js, DecisionsStream); cfg.MaxAge != 48*time.Hour || cfg.MaxBytes != 2<<30 || cfg.Duplicates != 5*time.Minute {
		t.Errorf("decisions not updated: %+v", cfg)
	}
	// The duplicate window is capped at a stream's max age.
	if cfg := streamConfig(t, js, ScalingStream); cfg.MaxAge != time.Minute || cfg.MaxBytes != DefaultScalingMaxBytes || cfg.Duplicates != time.Minute {
		t.Errorf("scaling not updated: %+v", cfg)
	}
	if got := streamMsgs(t, js, DecisionsStream); got != 3 {
		t.Errorf("update lost messages: %d left", got)
	}
	kv, err := js.KeyValue(ctx, MetricsBucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.TTL() != 30*time.Second {
		t.Errorf("metrics ttl %s, want 30s", st.TTL())
	}
}

func TestEnsureStreamsRefusesStorageChange(t *testing.T) {
	t.Parallel()
	js, _ := server(t)
	ctx := testContext(t)
	if err := EnsureStreams(ctx, js, Limits{}); err != nil {
		t.Fatal(err)
	}
	err := EnsureStreams(ctx, js, Limits{Storage: jetstream.MemoryStorage})
	if err == nil {
		t.Fatal("changing the storage type succeeded")
	}
	t.Logf("error (as expected): %v", err)
}

func TestEnsureStreamsConcurrent(t *testing.T) {
	t.Parallel()
	for round := range 3 {
		js, connect := server(t)
		ctx := testContext(t)
		// Two services race with the same limits, a third with other ones:
		// every call succeeds and the streams end up with one of them.
		limits := []Limits{{}, {}, {Decisions: StreamLimits{MaxAge: 2 * time.Hour}}}
		jss := []jetstream.JetStream{js, connect(), connect()}
		var wg sync.WaitGroup
		errs := make([]error, len(jss))
		for i := range jss {
			wg.Go(func() { errs[i] = EnsureStreams(ctx, jss[i], limits[i]) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if age := streamConfig(t, js, DecisionsStream).MaxAge; age != 2*time.Hour && age != DefaultDecisionsMaxAge {
			t.Fatalf("round %d: max age %s", round, age)
		}
	}
}

func TestEnsureStreamsDeduplicates(t *testing.T) {
	t.Parallel()
	e := integration(t)
	ctx := testContext(t)
	subject, _ := DecisionsSubject("p")
	data := mustMarshal(t, decision("p", 1))
	for range 3 {
		if _, err := e.js.Publish(ctx, subject, data, jetstream.WithMsgID("p-1")); err != nil {
			t.Fatal(err)
		}
	}
	if n := streamMsgs(t, e.js, DecisionsStream); n != 1 {
		t.Fatalf("stream holds %d messages, want 1", n)
	}
}

func TestMetricsBucketKeysAgeOut(t *testing.T) {
	t.Parallel()
	js, _ := server(t)
	ctx := testContext(t)
	if err := EnsureStreams(ctx, js, Limits{MetricsTTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, MetricsBucket)
	if err != nil {
		t.Fatal(err)
	}
	key, err := MetricsKey("pool.a", "10.0.0.5:8000")
	if err != nil {
		t.Fatal(err)
	}
	m := &eventsv1.PodMetrics{Pool: "pool.a", Endpoint: "vllm-0", Address: "10.0.0.5:8000", WaitingRequests: 3}
	if _, err := kv.Put(ctx, key, mustMarshal(t, m)); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	entry, err := kv.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var got eventsv1.PodMetrics
	if err := proto.Unmarshal(entry.Value(), &got); err != nil || got.GetWaitingRequests() != 3 {
		t.Fatalf("got %v, %v", &got, err)
	}
	eventually(t, 5*time.Second, "metrics key did not age out", func() bool {
		_, err := kv.Get(ctx, key)
		return errors.Is(err, jetstream.ErrKeyNotFound)
	})
}

func TestEnsureStreamsNeedsJetStream(t *testing.T) {
	if err := EnsureStreams(context.Background(), nil, Limits{}); err == nil {
		t.Fatal("nil JetStream accepted")
	}
}

// A look-up that gets no answer (a stream without a leader yet) is asked
// again until it gets one; one that gets an answer, even an error, is not;
// the caller's context bounds it all.
func TestLookupAsksAgainWhileUnanswered(t *testing.T) {
	defer func(d time.Duration) { lookupTimeout = d }(lookupTimeout)
	lookupTimeout = 20 * time.Millisecond
	calls := 0
	v, err := Lookup(t.Context(), func(ctx context.Context) (int, error) {
		if calls++; calls < 3 {
			<-ctx.Done() // no answer
			return 0, ctx.Err()
		}
		return 7, nil
	})
	if v != 7 || err != nil || calls != 3 {
		t.Fatalf("lookup = %d, %v after %d calls; want 7 after 3", v, err, calls)
	}
	calls = 0
	if _, err := Lookup(t.Context(), func(context.Context) (int, error) { calls++; return 0, jetstream.ErrStreamNotFound }); !errors.Is(err, jetstream.ErrStreamNotFound) || calls != 1 {
		t.Fatalf("an answer is not asked again: %v after %d calls", err, calls)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := Lookup(ctx, func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() }); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
		t.Fatalf("never answered: %v after %s", err, time.Since(start))
	}
}

// EnsureObjectStore creates a store, keeps its objects when called again,
// updates a changed description in place, and refuses a replica count
// JetStream does not allow.
func TestEnsureObjectStore(t *testing.T) {
	t.Parallel()
	js, _ := server(t)
	ctx := testContext(t)
	cfg := jetstream.ObjectStoreConfig{Bucket: "SNAPS", Description: "snapshots"}
	obs, err := EnsureObjectStore(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutBytes(ctx, "p.a", []byte("index")); err != nil {
		t.Fatal(err)
	}
	st, err := obs.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Replicas() != DefaultReplicas || st.Storage() != jetstream.FileStorage {
		t.Fatalf("created with %d replicas, storage %v", st.Replicas(), st.Storage())
	}
	cfg.Description = "index snapshots"
	for range 2 {
		if obs, err = EnsureObjectStore(ctx, js, cfg); err != nil {
			t.Fatal(err)
		}
	}
	if st, err = obs.Status(ctx); err != nil || st.Description() != "index snapshots" {
		t.Fatalf("description %q (%v), want the updated one", st.Description(), err)
	}
	if b, err := obs.GetBytes(ctx, "p.a"); err != nil || string(b) != "index" {
		t.Fatalf("object after ensure: %q, %v", b, err)
	}
	for _, r := range []int{-1, MaxReplicas + 1} {
		cfg.Replicas = r
		if _, err := EnsureObjectStore(ctx, js, cfg); !errors.Is(err, ErrInvalidReplicas) {
			t.Errorf("replicas %d: %v, want ErrInvalidReplicas", r, err)
		}
	}
	cfg.Replicas = 3 // a single server cannot hold 3
	if _, err := EnsureObjectStore(ctx, js, cfg); err == nil {
		t.Error("3 replicas on one server: no error")
	}
	if _, err := EnsureObjectStore(ctx, nil, cfg); err == nil {
		t.Error("nil JetStream: no error")
	}
}

// Services that start together race to create the store: each gets it.
func TestEnsureObjectStoreConcurrent(t *testing.T) {
	t.Parallel()
	js, connect := server(t)
	ctx := testContext(t)
	jss := []jetstream.JetStream{js, connect(), connect(), connect()}
	errs := make([]error, len(jss))
	var wg sync.WaitGroup
	for i := range jss {
		wg.Go(func() { _, errs[i] = EnsureObjectStore(ctx, jss[i], jetstream.ObjectStoreConfig{Bucket: "SNAPS"}) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if _, err := js.ObjectStore(ctx, "SNAPS"); err != nil {
		t.Fatal(err)
	}
}
