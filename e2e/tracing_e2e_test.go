package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
)

// Span names the stack's instrumentation gives (otelgrpc names a call's
// spans by its full method; the gateway names its server span by method
// and path; the picker names its scheduling cycle).
const (
	pickMethod  = "hermod.picker.v1.PickerService/Pick"
	scoreMethod = "hermod.indexer.v1.IndexerService/Score"
	putMethod   = "hermod.responses.v1.ResponsesStore/Put"
	cycleSpan   = "scheduling cycle"
)

const (
	server   = tracev1.Span_SPAN_KIND_SERVER
	client   = tracev1.Span_SPAN_KIND_CLIENT
	internal = tracev1.Span_SPAN_KIND_INTERNAL
)

// One request's trace across the processes: every service of the devstack
// exports its spans over OTLP/gRPC to a receiver in the test. A chat
// completion sent with a client's traceparent is one trace (the client's
// trace id) of gateway server span -> Pick client span -> picker server
// span -> scheduling cycle -> Score client span -> indexer server span,
// each the parent of the next; a /v1/responses request adds the responses
// service's Put under the gateway's client span. The request logs of the
// gateway and the picker carry the trace id.
func TestTracesAcrossServices(t *testing.T) {
	recv := startOTLPReceiver(t)
	// the exporters' batch delay (the SDK reads it from the environment,
	// which devstack hands to its children): spans arrive within ~100 ms
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	config := filepath.Join(t.TempDir(), "precise.yaml")
	if err := os.WriteFile(config, []byte(preciseConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startStack(t, "--pods", "2", "--slow-pods", "0", "--pickers", "1", "--speed", "10", "--config", config,
		"--otlp-endpoint", recv.Addr, "-v", "4")
	ctx := context.Background()
	system := strings.Repeat("You are the support assistant of a large company; answer precisely and cite the manual. ", 4)
	chat := fmt.Sprintf(`{"model":%q,"messages":[{"role":"system","content":%q},{"role":"user","content":"where is my order?"}],"max_tokens":4}`, s.state.Model, system)

	// A first request opens the picker's connection to the indexer (lazily,
	// as gRPC connects): its Score may exceed the scorer's 50 ms budget.
	if r := s.send(ctx, "/v1/chat/completions", chat, false); !r.ok() {
		t.Fatalf("warm-up request: %d %v %s", r.status, r.err, r.body)
	}

	traceID, parentID := newTraceID(t), newSpanID(t)
	status, servedBy, body := sendTraced(t, s.url("/v1/chat/completions"), chat, traceID, parentID)
	if status != http.StatusOK {
		t.Fatalf("traced request: %d %s", status, body)
	}
	spans := recv.waitTrace(t, traceID, 10*time.Second,
		spanKey{"hermod-gateway", server, "POST /v1/chat/completions"},
		spanKey{"hermod-gateway", client, pickMethod},
		spanKey{"hermod-picker", server, pickMethod},
		spanKey{"hermod-picker", internal, cycleSpan},
		spanKey{"hermod-picker", client, scoreMethod},
		spanKey{"hermod-indexer", server, scoreMethod})
	t.Logf("chat completion trace %s:\n%s", traceID, spanTree(spans))

	gwServer := mustSpan(t, spans, spanKey{"hermod-gateway", server, "POST /v1/chat/completions"})
	gwPick := mustSpan(t, spans, spanKey{"hermod-gateway", client, pickMethod})
	pkServer := mustSpan(t, spans, spanKey{"hermod-picker", server, pickMethod})
	cycle := mustSpan(t, spans, spanKey{"hermod-picker", internal, cycleSpan})
	pkScore := mustSpan(t, spans, spanKey{"hermod-picker", client, scoreMethod})
	ixServer := mustSpan(t, spans, spanKey{"hermod-indexer", server, scoreMethod})
	for _, l := range []struct {
		child, parent span
		what          string
	}{
		{gwServer, span{SpanID: parentID, Service: "the client's traceparent"}, "the gateway's server span"},
		{gwPick, gwServer, "the gateway's Pick client span"},
		{pkServer, gwPick, "the picker's server span"},
		{cycle, pkServer, "the scheduling cycle"},
		{pkScore, cycle, "the picker's Score client span"},
		{ixServer, pkScore, "the indexer's server span"},
	} {
		if l.child.ParentID != l.parent.SpanID {
			t.Errorf("%s (%s) has parent %s, want %s (%s)", l.what, l.child, l.child.ParentID, l.parent.SpanID, l.parent)
		}
	}
	if a := cycle.Attrs; a["hermod.pool"] != s.state.Pool || a["hermod.model"] != s.state.Model || a["hermod.profile"] != "default" ||
		a["hermod.endpoint"] != servedBy || a["hermod.candidates"] != "2" {
		t.Errorf("scheduling cycle attributes %v; want pool %s, model %s, profile default, endpoint %s (X-Decoder-Host-Port), 2 candidates",
			a, s.state.Pool, s.state.Model, servedBy)
	}
	for _, sp := range spans {
		if sp.Status == tracev1.Status_STATUS_CODE_ERROR {
			t.Errorf("error span in a successful request: %s", sp)
		}
	}

	// /v1/responses: the turn's chat completion and its store call are in
	// the request's trace; the responses service's Put is the child of
	// the gateway's.
	rTrace := newTraceID(t)
	status, _, body = sendTraced(t, s.url("/v1/responses"), fmt.Sprintf(`{"model":%q,"input":"Where is my order?","max_output_tokens":4}`, s.state.Model), rTrace, newSpanID(t))
	if status != http.StatusOK {
		t.Fatalf("traced /v1/responses: %d %s", status, body)
	}
	rSpans := recv.waitTrace(t, rTrace, 10*time.Second,
		spanKey{"hermod-gateway", server, "POST /v1/responses"},
		spanKey{"hermod-gateway", client, putMethod},
		spanKey{"hermod-responses", server, putMethod},
		spanKey{"hermod-picker", server, pickMethod})
	t.Logf("/v1/responses trace %s:\n%s", rTrace, spanTree(rSpans))
	gwPut := mustSpan(t, rSpans, spanKey{"hermod-gateway", client, putMethod})
	rsPut := mustSpan(t, rSpans, spanKey{"hermod-responses", server, putMethod})
	if rsPut.ParentID != gwPut.SpanID {
		t.Errorf("the responses service's Put (%s) has parent %s, want the gateway's Put client span %s", rsPut, rsPut.ParentID, gwPut.SpanID)
	}
	if gwr := mustSpan(t, rSpans, spanKey{"hermod-gateway", server, "POST /v1/responses"}); !descends(rSpans, gwPut, gwr.SpanID) ||
		!descends(rSpans, mustSpan(t, rSpans, spanKey{"hermod-picker", server, pickMethod}), gwr.SpanID) {
		t.Errorf("the store call and the Pick are not under the gateway's /v1/responses span:\n%s", spanTree(rSpans))
	}

	// The request logs link to the trace (-v 4: the gateway's "request
	// completed", the picker's "request scheduled").
	deadline := time.Now().Add(5 * time.Second)
	for {
		missing := missingLogs(s.logs.String(), traceID, map[string]string{"[gateway]": "request completed", "[picker-0]": "request scheduled"})
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line with trace_id=%s: %v", traceID, missing)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sendTraced posts body with a W3C traceparent (sampled) and returns the
// status, the serving endpoint (X-Decoder-Host-Port) and the body.
func sendTraced(t *testing.T, url, body, traceID, parentID string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-"+parentID+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("X-Decoder-Host-Port"), string(b)
}

func mustSpan(t *testing.T, spans []span, k spanKey) span {
	t.Helper()
	s, ok := findSpan(spans, k)
	if !ok {
		t.Fatalf("no span %s", k)
	}
	return s
}

// descends reports whether s is a descendant of the span ancestor.
func descends(spans []span, s span, ancestor string) bool {
	byID := map[string]span{}
	for _, sp := range spans {
		byID[sp.SpanID] = sp
	}
	for seen := 0; s.ParentID != "" && seen < len(spans); seen++ {
		if s.ParentID == ancestor {
			return true
		}
		p, ok := byID[s.ParentID]
		if !ok {
			return false
		}
		s = p
	}
	return false
}

// missingLogs returns the processes (by devstack's log prefix) that have
// not logged msg with the trace id yet.
func missingLogs(logs, traceID string, want map[string]string) []string {
	var missing []string
	for prefix, msg := range want {
		found := false
		for _, line := range strings.Split(logs, "\n") {
			if strings.HasPrefix(line, prefix) && strings.Contains(line, msg) && strings.Contains(line, "trace_id="+traceID) {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, prefix+" "+msg)
		}
	}
	return missing
}

func newTraceID(t *testing.T) string { return randomHex(t, 16) }
func newSpanID(t *testing.T) string  { return randomHex(t, 8) }

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
