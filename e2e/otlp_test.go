package e2e

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	collectortracev1 "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

// span is one span as an OTLP exporter sent it, with its service.
type span struct {
	Service  string
	Name     string
	Kind     tracev1.Span_SpanKind
	TraceID  string // lower-case hex
	SpanID   string
	ParentID string // "" for a root span
	Attrs    map[string]string
	Status   tracev1.Status_StatusCode
	Start    uint64 // unix nanoseconds
}

func (s span) String() string {
	return fmt.Sprintf("%s %s %q span=%s parent=%s", s.Service, strings.TrimPrefix(s.Kind.String(), "SPAN_KIND_"), s.Name, s.SpanID, s.ParentID)
}

// otlpReceiver is an in-memory OTLP/gRPC trace receiver (the collector's
// TraceService) on a loopback port: every service of the stack exports
// its spans to it.
type otlpReceiver struct {
	collectortracev1.UnimplementedTraceServiceServer
	Addr string

	mu    sync.Mutex
	spans []span
}

// startOTLPReceiver serves the receiver until the test ends.
func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &otlpReceiver{Addr: lis.Addr().String()}
	gs := grpc.NewServer()
	collectortracev1.RegisterTraceServiceServer(gs, r)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(lis)
	}()
	t.Cleanup(func() {
		gs.Stop()
		<-done
	})
	return r
}

// Export implements collectortracev1.TraceServiceServer.
func (r *otlpReceiver) Export(_ context.Context, req *collectortracev1.ExportTraceServiceRequest) (*collectortracev1.ExportTraceServiceResponse, error) {
	var got []span
	for _, rs := range req.GetResourceSpans() {
		service := attrMap(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := span{Service: service, Name: s.GetName(), Kind: s.GetKind(), TraceID: hex.EncodeToString(s.GetTraceId()),
					SpanID: hex.EncodeToString(s.GetSpanId()), Attrs: attrMap(s.GetAttributes()), Status: s.GetStatus().GetCode(),
					Start: s.GetStartTimeUnixNano()}
				if p := s.GetParentSpanId(); len(p) > 0 {
					sp.ParentID = hex.EncodeToString(p)
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.mu.Unlock()
	return &collectortracev1.ExportTraceServiceResponse{}, nil
}

func attrMap(kvs []*commonv1.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch v.GetValue().(type) {
		case *commonv1.AnyValue_StringValue:
			m[kv.GetKey()] = v.GetStringValue()
		case *commonv1.AnyValue_IntValue:
			m[kv.GetKey()] = fmt.Sprint(v.GetIntValue())
		case *commonv1.AnyValue_BoolValue:
			m[kv.GetKey()] = fmt.Sprint(v.GetBoolValue())
		case *commonv1.AnyValue_DoubleValue:
			m[kv.GetKey()] = fmt.Sprint(v.GetDoubleValue())
		default:
			m[kv.GetKey()] = v.String()
		}
	}
	return m
}

// trace returns the spans of one trace received so far.
func (r *otlpReceiver) trace(traceID string) []span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []span
	for _, s := range r.spans {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	return out
}

// waitTrace waits until the trace holds every wanted span (by service,
// kind and name) and returns it; it fails the test after within.
func (r *otlpReceiver) waitTrace(t *testing.T, traceID string, within time.Duration, want ...spanKey) []span {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		spans := r.trace(traceID)
		missing := missingSpans(spans, want)
		if len(missing) == 0 {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace %s after %v lacks %v; it has:\n%s", traceID, within, missing, spanTree(spans))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// spanKey names a span: its service, kind and name.
type spanKey struct {
	Service string
	Kind    tracev1.Span_SpanKind
	Name    string
}

func (k spanKey) String() string {
	return fmt.Sprintf("%s %s %q", k.Service, strings.TrimPrefix(k.Kind.String(), "SPAN_KIND_"), k.Name)
}

func missingSpans(spans []span, want []spanKey) []spanKey {
	var missing []spanKey
	for _, k := range want {
		if _, ok := findSpan(spans, k); !ok {
			missing = append(missing, k)
		}
	}
	return missing
}

// findSpan returns the first span matching k.
func findSpan(spans []span, k spanKey) (span, bool) {
	for _, s := range spans {
		if s.Service == k.Service && s.Kind == k.Kind && s.Name == k.Name {
			return s, true
		}
	}
	return span{}, false
}

// spanTree renders spans as a tree by parent (spans whose parent is not
// in the list are roots), for failure messages and notes.
func spanTree(spans []span) string {
	byID := map[string]bool{}
	children := map[string][]span{}
	for _, s := range spans {
		byID[s.SpanID] = true
	}
	var roots []span
	spans = append([]span(nil), spans...)
	sort.SliceStable(spans, func(i, j int) bool { return spans[i].Start < spans[j].Start })
	for _, s := range spans {
		if s.ParentID == "" || !byID[s.ParentID] {
			roots = append(roots, s)
			continue
		}
		children[s.ParentID] = append(children[s.ParentID], s)
	}
	var b strings.Builder
	var walk func(s span, depth int)
	walk = func(s span, depth int) {
		fmt.Fprintf(&b, "%s%s\n", strings.Repeat("  ", depth), s)
		kids := children[s.SpanID]
		sort.SliceStable(kids, func(i, j int) bool { return kids[i].Start < kids[j].Start })
		for _, c := range kids {
			walk(c, depth+1)
		}
	}
	for _, s := range roots {
		walk(s, 0)
	}
	return b.String()
}
