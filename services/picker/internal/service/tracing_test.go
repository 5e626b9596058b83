package service

import (
	"context"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	indexerv1 "github.com/hermod/hermod/libs/api/hermod/indexer/v1"
	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/plugins/preciseprefix"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/tokenizer"
	"github.com/hermod/hermod/services/picker/internal/endpoints"
	"github.com/hermod/hermod/services/picker/internal/projection"
	"github.com/hermod/hermod/services/picker/internal/schedconfig"
)

const preciseConfig = `
plugins:
- type: precise-prefix-cache-scorer
  parameters:
    tokenProcessorConfig: {blockSize: 16}
    indexerConfig: {tokenizersPoolConfig: {modelName: builtin}}
- type: queue-scorer
- type: max-score-picker
schedulingProfiles:
- name: decode
  plugins:
  - {pluginRef: precise-prefix-cache-scorer, weight: 3}
  - pluginRef: queue-scorer
  - pluginRef: max-score-picker
`

// spanIndexer is an indexer that records the span context of each Score
// call's context.
type spanIndexer struct {
	mu    sync.Mutex
	calls []trace.SpanContext
}

func (s *spanIndexer) Score(ctx context.Context, _ *indexerv1.ScoreRequest) (*indexerv1.ScoreResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, trace.SpanContextFromContext(ctx))
	return &indexerv1.ScoreResponse{}, nil
}

// tracedServer is a Server over pod-a and pod-b with precise prefix
// scoring against idx and the given tracer.
func tracedServer(t *testing.T, tracer trace.Tracer, idx preciseprefix.Indexer) *Server {
	t.Helper()
	set := endpoints.New(endpoints.Options{})
	t.Cleanup(set.Close)
	set.SetRegistry(1, map[string]*registryv1.Endpoint{"pod-a": ep("pod-a", "10.0.0.1"), "pod-b": ep("pod-b", "10.0.0.2")})
	loader, err := schedconfig.New(schedconfig.Version{Source: schedconfig.SourceFile, Data: []byte(preciseConfig)},
		schedconfig.Options{Pool: "pool", Replica: "r1", Logger: quiet, SchedulerOptions: []scheduling.Option{
			scheduling.WithLogger(quiet), preciseprefix.IndexerService.Provide(idx),
			preciseprefix.TokenizerService.Provide(preciseprefix.Fixed{Tok: tokenizer.Builtin{}, Tmpl: tokenizer.Llama3Template{}}),
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = loader.Close() })
	folder := projection.New(loader, projection.Options{Pool: "pool", Replica: "r1", Logger: quiet,
		Lookup: func(n string) (*scheduling.Endpoint, bool) { return set.View().Lookup(n) }})
	return New(Options{Pool: "pool", Replica: "r1", Endpoints: set, Loader: loader, Folder: folder, Decisions: discard{},
		Logger: quiet, Tracer: tracer})
}

// A Pick with a tracer is a "scheduling cycle" span under the caller's
// span, with the pool, model, profile and chosen endpoint, and the
// plugins' calls to the indexer are its children.
func TestPickTracesSchedulingCycle(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	idx := &spanIndexer{}
	srv := tracedServer(t, tp.Tracer("test"), idx)

	ctx, rpc := tp.Tracer("test").Start(context.Background(), "hermod.picker.v1.PickerService/Pick")
	prompt := strings.Repeat("a long shared system prompt, more than one block of tokens. ", 8)
	out, err := srv.Pick(ctx, pick(`{"model": "llama", "prompt": "`+prompt+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	rpc.End()
	var cycle sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == CycleSpan {
			if cycle != nil {
				t.Fatal("two cycle spans for one Pick")
			}
			cycle = s
		}
	}
	if cycle == nil {
		t.Fatalf("no %q span among %d", CycleSpan, len(rec.Ended()))
	}
	if cycle.Parent().SpanID() != rpc.SpanContext().SpanID() || cycle.SpanContext().TraceID() != rpc.SpanContext().TraceID() {
		t.Errorf("cycle span's parent %s, want the Pick's %s", cycle.Parent().SpanID(), rpc.SpanContext().SpanID())
	}
	attrs := map[attribute.Key]attribute.Value{}
	for _, kv := range cycle.Attributes() {
		attrs[kv.Key] = kv.Value
	}
	want := map[attribute.Key]string{AttrPool: "pool", AttrModel: "llama", AttrRequestID: "req-1", AttrProfile: "decode",
		AttrEndpoint: out.GetTargets()[0].GetAddress(), AttrDecisionID: out.GetDecisionId()}
	for k, v := range want {
		if attrs[k].String() != v {
			t.Errorf("%s = %q, want %q", k, attrs[k].String(), v)
		}
	}
	if attrs[AttrCandidates].AsInt64() != 2 {
		t.Errorf("%s = %v", AttrCandidates, attrs[AttrCandidates].String())
	}
	if len(idx.calls) != 1 || idx.calls[0].SpanID() != cycle.SpanContext().SpanID() {
		t.Errorf("indexer calls %v: want one, under the cycle span %s", idx.calls, cycle.SpanContext().SpanID())
	}

	// a failed cycle is an error span
	srv.o.Endpoints.SetRegistry(2, nil)
	if _, err := srv.Pick(context.Background(), pick(`{"model": "llama", "prompt": "x"}`)); err == nil {
		t.Fatal("a Pick over no endpoint succeeded")
	}
	last := rec.Ended()[len(rec.Ended())-1]
	if last.Name() != CycleSpan || last.Status().Code != otelcodes.Error || len(last.Events()) == 0 {
		t.Errorf("failed cycle: span %q status %v events %d", last.Name(), last.Status(), len(last.Events()))
	}
}

// Without a tracer (tracing off) nothing reaches the plugins' contexts.
func TestPickWithoutTracingHasNoSpan(t *testing.T) {
	idx := &spanIndexer{}
	srv := tracedServer(t, nil, idx)
	if srv.o.Tracer != nil {
		t.Fatal("a tracer without tracing")
	}
	prompt := strings.Repeat("a long shared system prompt, more than one block of tokens. ", 8)
	if _, err := srv.Pick(context.Background(), pick(`{"model": "llama", "prompt": "`+prompt+`"}`)); err != nil {
		t.Fatal(err)
	}
	if len(idx.calls) != 1 || idx.calls[0].IsValid() {
		t.Errorf("indexer calls %v", idx.calls)
	}
}
