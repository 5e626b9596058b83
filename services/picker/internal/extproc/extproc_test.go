package extproc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/libs/requestid"
	"github.com/hermod/hermod/libs/scheduling"
)

const chatBody = `{"model":"llama","messages":[{"role":"user","content":"hello there"}],"stream":true}`

// sseResponse is a streamed answer with a usage chunk, as vLLM sends it
// with include_usage.
var sseResponse = []string{
	"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n",
	"data: {\"choices\":[{\"delta\":{\"content\":\" you\"}}]}\n\ndata: {\"choices\":[],\"us",
	"age\":{\"prompt_tokens\":7,\"completion_tokens\":2,\"prompt_tokens_details\":{\"cached_tokens\":4}}}\n\n",
	"data: [DONE]\n\n",
}

// The exact sequence Envoy sends in FULL_DUPLEX_STREAMED mode: the
// routing answer comes once the body is in, the body comes back intact,
// the response passes through with the target's headers added, and the
// completion is reported once with what the response said.
func TestFullDuplexRoutesStreamsAndCompletes(t *testing.T) {
	e := newTestEnv(t, nil)
	s := e.open()
	body := []byte(chatBody)
	s.send(post(fullDuplex, "/v1/chat/completions", "authorization", "Bearer secret", "x-drop-me", "1",
		"x-gateway-destination-endpoint", "6.6.6.6:1", "x-session-token", "tok-old"))
	for i, c := range split(body, 3) {
		s.send(requestBody(c, i == 2))
	}

	hr := s.recv()
	h := hr.GetRequestHeaders()
	if h == nil {
		t.Fatalf("want the request headers answer first, got %v", hr)
	}
	if !h.GetResponse().GetClearRouteCache() {
		t.Error("clear_route_cache not set")
	}
	set, removed := setOf(h.GetResponse().GetHeaderMutation())
	if got := set[DestinationHeader]; got != "10.0.0.1:8000,10.0.0.2:8000" {
		t.Errorf("destination header %q", got)
	}
	if got := metadataDestination(hr); got != "10.0.0.1:8000,10.0.0.2:8000" {
		t.Errorf("envoy.lb metadata %q", got)
	}
	if set["content-length"] != strconv.Itoa(len(body)) || set["x-prefiller-host-port"] != "10.0.0.9:8000" {
		t.Errorf("set headers %v", set)
	}
	if _, ok := set[RequestIDHeader]; ok {
		t.Error("the client's valid request id was replaced")
	}
	if slices.Sort(removed); !slices.Equal(removed, []string{"x-drop-me", DestinationHeader}) {
		t.Errorf("removed %v", removed)
	}
	for _, o := range h.GetResponse().GetHeaderMutation().GetSetHeaders() {
		if o.GetAppendAction().String() != "OVERWRITE_IF_EXISTS_OR_ADD" {
			t.Errorf("%s: append action %v: a client's copy would survive", o.GetHeader().GetKey(), o.GetAppendAction())
		}
	}
	got, _ := s.readBody(true, 0, true)
	if !bytes.Equal(got, body) {
		t.Fatalf("body streamed back %q, want %q", got, body)
	}

	// The pick saw the request as the client sent it, credentials and
	// routing headers aside.
	reqs := e.picker.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d picks", len(reqs))
	}
	pr := reqs[0]
	// The body is parsed once, here: the pick gets it parsed.
	if pr.GetApi() != pickerv1.Api_API_CHAT_COMPLETIONS || pr.GetRequestId() != "req-1" || len(pr.GetBody()) != 0 || pr.GetSubset() != nil ||
		pr.GetRequest().GetModel() != "llama" || len(pr.GetRequest().GetMessages()) == 0 {
		t.Errorf("pick request %v", pr)
	}
	for _, k := range []string{"authorization", DestinationHeader, ":path", "content-type"} {
		if _, ok := pr.GetHeaders()[k]; ok {
			t.Errorf("pick headers hold %s: %v", k, pr.GetHeaders())
		}
	}
	if pr.GetHeaders()["x-session-token"] != "tok-old" || pr.GetHeaders()[RequestIDHeader] != "req-1" {
		t.Errorf("pick headers %v", pr.GetHeaders())
	}

	// The response.
	time.Sleep(5 * time.Millisecond) // a measurable time to first byte
	s.send(responseHeaders(false, ":status", "200", "content-type", "text/event-stream"))
	rh := s.recv().GetResponseHeaders()
	rset, _ := setOf(rh.GetResponse().GetHeaderMutation())
	if rset["x-session-token"] != "tok-a" || rset["x-decoder-host-port"] != "10.0.0.1:8000" {
		t.Errorf("response headers %v", rset)
	}
	var sent, echoed []byte
	for i, c := range sseResponse {
		last := i == len(sseResponse)-1
		s.send(responseBody([]byte(c), last))
		sent = append(sent, c...)
		b, _ := s.readBody(false, len(c), last)
		echoed = append(echoed, b...)
	}
	if !bytes.Equal(sent, echoed) {
		t.Errorf("response echoed %q, want %q", echoed, sent)
	}
	e.waitCompletions(1) // at the response's end, before the stream's
	s.close()

	evs := e.done.all()
	if len(evs) != 1 {
		t.Fatalf("%d completions, want 1", len(evs))
	}
	ev := evs[0]
	if ev.GetOutcome() != eventsv1.CompletionOutcome_COMPLETION_OUTCOME_SUCCESS || ev.GetStatusCode() != 200 ||
		ev.GetDecisionId() != decision().GetDecisionId() || ev.GetRequestId() != "req-1" || ev.GetPool() != "pool-a" ||
		ev.GetReporter() != "picker-1" || ev.GetEndpoint() != "10.0.0.1:8000" || ev.GetEndpointName() != "pod-a" ||
		ev.GetModel() != "llama" || !ev.GetStreamed() || ev.GetAttempts() != 1 {
		t.Errorf("completion %v", ev)
	}
	if ev.GetPromptTokens() != 7 || ev.GetCachedTokens() != 4 || ev.GetCompletionTokens() != 2 {
		t.Errorf("tokens %d/%d/%d, want 7/4/2", ev.GetPromptTokens(), ev.GetCachedTokens(), ev.GetCompletionTokens())
	}
	if ttft := ev.GetTtft().AsDuration(); ttft < 5*time.Millisecond || ttft > ev.GetDuration().AsDuration() {
		t.Errorf("ttft %s, duration %s", ttft, ev.GetDuration().AsDuration())
	}
	if ev.GetTpot() == nil {
		t.Error("no time per output token on a stream")
	}
	if c := e.streamsCount(openai.OutcomeSuccess); c != 1 {
		t.Errorf("success streams %v", c)
	}
}

// A 1 MiB prompt, sent as Envoy reads it (16 KiB at a time), comes back in
// chunks of at most 62000 bytes that reassemble to the same bytes.
func TestLargePromptIsRestreamedInBoundedChunks(t *testing.T) {
	e := newTestEnv(t, nil)
	prompt := strings.Repeat("The quick brown fox jumps over the lazy dog. ", (1<<20)/45+1)[:1<<20]
	body := []byte(fmt.Sprintf(`{"model":"llama","prompt":%q,"max_tokens":4}`, prompt))
	s := e.open()
	s.send(post(fullDuplex, "/v1/completions", "content-length", strconv.Itoa(len(body))))
	for off := 0; off < len(body); off += 16 << 10 {
		end := min(off+16<<10, len(body))
		s.send(requestBody(body[off:end], end == len(body)))
	}
	hr := s.recv()
	set, _ := setOf(hr.GetRequestHeaders().GetResponse().GetHeaderMutation())
	if set["content-length"] != strconv.Itoa(len(body)) {
		t.Errorf("content-length %q, want %d", set["content-length"], len(body))
	}
	got, chunks := s.readBody(true, 0, true)
	for i, n := range chunks {
		if n > MaxChunkSize {
			t.Errorf("chunk %d holds %d bytes, more than %d", i, n, MaxChunkSize)
		}
	}
	if !bytes.Equal(got, body) {
		t.Fatalf("the body came back different (%d bytes, want %d)", len(got), len(body))
	}
	if want := (len(body) + MaxChunkSize - 1) / MaxChunkSize; len(chunks) != want {
		t.Errorf("%d chunks, want %d", len(chunks), want)
	}
	if pr := e.picker.requests(); len(pr) != 1 || pr[0].GetApi() != pickerv1.Api_API_COMPLETIONS || pr[0].GetRequest().GetPrompt() != prompt || pr[0].GetRequest().GetMaxTokens() != 4 {
		t.Error("the pick did not get the whole body")
	}
	s.send(responseHeaders(false, ":status", "200", "content-type", "application/json"))
	s.recv()
	resp := []byte(`{"choices":[{"text":"ok"}],"usage":{"prompt_tokens":250000,"completion_tokens":4}}`)
	s.send(responseBody(resp, true))
	s.readBody(false, len(resp), true)
	s.close()
	evs := e.done.all()
	if len(evs) != 1 || evs[0].GetPromptTokens() != 250000 || evs[0].GetCompletionTokens() != 4 || evs[0].GetStreamed() {
		t.Errorf("completions %v", evs)
	}
}

// BUFFERED mode: the headers are answered at once; the routing header
// comes with the body's answer, which leaves the body as it is.
func TestBufferedModeRoutesOnTheBodyAnswer(t *testing.T) {
	e := newTestEnv(t, nil)
	s := e.open()
	buffered := protocol(filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_BUFFERED)
	s.send(post(buffered, "/v1/completions", "x-gateway-destination-endpoint", "6.6.6.6:1"))
	hr := s.recv().GetRequestHeaders()
	if hr == nil {
		t.Fatal("want the headers answered at once")
	}
	if _, removed := setOf(hr.GetResponse().GetHeaderMutation()); !slices.Equal(removed, []string{DestinationHeader}) {
		t.Errorf("the client's routing header is not removed: %v", removed)
	}
	if len(e.picker.requests()) != 0 {
		t.Fatal("picked before the body")
	}
	s.send(requestBody([]byte(`{"model":"llama","prompt":"hi"}`), true))
	r := s.recv()
	br := r.GetRequestBody()
	if br == nil {
		t.Fatalf("want a body answer, got %v", r)
	}
	set, _ := setOf(br.GetResponse().GetHeaderMutation())
	if set[DestinationHeader] != "10.0.0.1:8000,10.0.0.2:8000" || metadataDestination(r) != set[DestinationHeader] || !br.GetResponse().GetClearRouteCache() {
		t.Errorf("body answer %v", r)
	}
	if _, ok := set["content-length"]; ok || br.GetResponse().GetBodyMutation() != nil {
		t.Errorf("the buffered body or its length changed: %v", br)
	}
	s.send(responseHeaders(false, ":status", "200", "content-type", "application/json"))
	s.recv()
	s.send(responseBody([]byte(`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5}}`), true))
	if rb := s.recv().GetResponseBody(); rb == nil || rb.GetResponse().GetBodyMutation() != nil {
		t.Errorf("response body answer %v", rb)
	}
	s.close()
	evs := e.done.all()
	if len(evs) != 1 || evs[0].GetOutcome() != eventsv1.CompletionOutcome_COMPLETION_OUTCOME_SUCCESS || evs[0].GetCompletionTokens() != 5 {
		t.Errorf("completions %v", evs)
	}
}

// STREAMED mode, where the data plane sends the body without waiting for
// the headers answer: the headers answer routes, then every chunk is
// let through. Waiting for it would deadlock: that configuration is
// refused with a 500 that says what to change.
func TestStreamedMode(t *testing.T) {
	e := newTestEnv(t, nil)
	pc := protocol(filterv3.ProcessingMode_STREAMED, filterv3.ProcessingMode_STREAMED)
	pc.SendBodyWithoutWaitingForHeaderResponse = true
	s := e.open()
	s.send(post(pc, "/v1/completions"))
	for i, c := range split([]byte(`{"model":"llama","prompt":"a streamed body"}`), 4) {
		s.send(requestBody(c, i == 3))
	}
	r := s.recv()
	if set, _ := setOf(r.GetRequestHeaders().GetResponse().GetHeaderMutation()); set[DestinationHeader] == "" || metadataDestination(r) == "" {
		t.Fatalf("headers answer %v", r)
	}
	for i := range 4 {
		if br := s.recv().GetRequestBody(); br == nil || br.GetResponse().GetBodyMutation() != nil {
			t.Fatalf("chunk %d answer %v", i, br)
		}
	}
	s.send(responseHeaders(false, ":status", "200"))
	s.recv()
	for i := range 2 {
		s.send(responseBody([]byte("part"), i == 1))
		if br := s.recv().GetResponseBody(); br == nil {
			t.Fatalf("response chunk %d not answered", i)
		}
	}
	s.close()
	if n := len(e.done.all()); n != 1 {
		t.Errorf("%d completions", n)
	}

	pc.SendBodyWithoutWaitingForHeaderResponse = false
	s = e.open()
	s.send(post(pc, "/v1/completions"))
	ir := s.recv().GetImmediateResponse()
	if ir.GetStatus().GetCode() != 500 || !strings.Contains(string(ir.GetBody()), "FULL_DUPLEX_STREAMED") {
		t.Errorf("misconfigured STREAMED: %v", ir)
	}
	s.ended()
}

// Without a protocol_config (an older data plane), the default mode is
// full duplex.
func TestDefaultModeIsFullDuplex(t *testing.T) {
	e := newTestEnv(t, nil)
	s := e.open()
	s.send(post(nil, "/v1/completions"), requestBody([]byte(`{"model":"llama","prompt":"x"}`), true))
	if s.recv().GetRequestHeaders() == nil {
		t.Fatal("want the headers answer")
	}
	s.readBody(true, 0, true)
	s.send(responseHeaders(true, ":status", "204"))
	s.recv()
	s.close()
	if evs := e.done.all(); len(evs) != 1 || evs[0].GetOutcome() != eventsv1.CompletionOutcome_COMPLETION_OUTCOME_SUCCESS {
		t.Errorf("completions %v", evs)
	}
}

// Trailers end a request body: the body's last chunk back carries no
// end_of_stream, the trailers are answered after it.
func TestRequestTrailersEndTheBody(t *testing.T) {
	e := newTestEnv(t, nil)
	s := e.open()
	body := []byte(`{"model":"llama","prompt":"with trailers"}`)
	s.send(post(fullDuplex, "/v1/completions"), requestBody(body[:10], false), requestBody(body[10:], false), requestTrailers())
	if s.recv().GetRequestHeaders() == nil {
		t.Fatal("want the headers answer")
	}
	if got, _ := s.readBody(true, len(body), false); !bytes.Equal(got, body) {
		t.Errorf("body %q", got)
	}
	if s.recv().GetRequestTrailers() == nil {
		t.Fatal("want the trailers answer")
	}
	s.send(responseHeaders(false, ":status", "200"), responseBody([]byte("{}"), false))
	s.recv()
	s.readBody(false, 2, false)
	if len(e.done.all()) != 0 {
		t.Fatal("completed before the response ended")
	}
	s.send(responseTrailers())
	if s.recv().GetResponseTrailers() == nil {
		t.Fatal("want the response trailers answer")
	}
	s.close()
	if n := len(e.done.all()); n != 1 {
		t.Errorf("%d completions", n)
	}
}

// The picker's own answers: OpenAI-shaped errors with the statuses the
// gateway gives, and no decision to complete.
func TestImmediateResponses(t *testing.T) {
	body := []byte(`{"model":"llama","prompt":"x"}`)
	cases := []struct {
		name      string
		pickErr   error
		maxBody   int64
		msgs      []*extprocv3.ProcessingRequest
		status    int
		errType   string
		code      any
		param     string
		retry     bool
		wantPicks int
	}{
		{name: "no ready endpoint", pickErr: status.Error(codes.Unavailable, "no ready endpoint"), status: 503, errType: "service_unavailable", code: nil, retry: true, wantPicks: 1},
		{name: "shed", pickErr: status.Error(codes.ResourceExhausted, "every endpoint is full"), status: 429, errType: "rate_limit_error", code: nil, retry: true, wantPicks: 1},
		{name: "unknown model", pickErr: status.Error(codes.NotFound, "the model `x` does not exist"), status: 404, errType: "not_found_error", code: "model_not_found", wantPicks: 1},
		{name: "refused by the picker", pickErr: status.Error(codes.InvalidArgument, "prompt: required"), status: 400, errType: "invalid_request_error", code: nil, wantPicks: 1},
		{name: "bad body", msgs: []*extprocv3.ProcessingRequest{post(fullDuplex, "/v1/chat/completions"), requestBody([]byte(`{"model":"llama","messages":{}}`), true)},
			status: 400, errType: "invalid_request_error", code: "invalid_value", param: "messages"},
		{name: "picker failure", pickErr: status.Error(codes.Internal, "boom"), status: 500, errType: "server_error", code: nil, wantPicks: 1},
		{name: "body too large", maxBody: 20, status: 413, errType: "invalid_request_error", code: nil},
		{name: "no body", msgs: []*extprocv3.ProcessingRequest{requestHeaders(fullDuplex, true, ":method", "POST", ":path", "/v1/completions", "x-request-id", "req-1")},
			status: 400, errType: "invalid_request_error", code: nil},
		{name: "empty subset hint", msgs: []*extprocv3.ProcessingRequest{post(fullDuplex, "/v1/completions", SubsetKey, ""), requestBody(body, true)},
			status: 503, errType: "service_unavailable", code: nil, retry: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t, func(o *Options) { o.MaxBodyBytes = tc.maxBody })
			e.picker.err = tc.pickErr
			s := e.open()
			msgs := tc.msgs
			if msgs == nil {
				msgs = []*extprocv3.ProcessingRequest{post(fullDuplex, "/v1/completions"), requestBody(body[:15], false), requestBody(body[15:], true)}
			}
			for _, m := range msgs {
				_ = s.c.Send(m) // the server may have answered and ended the stream already
			}
			ir := s.recv().GetImmediateResponse()
			if ir == nil {
				t.Fatal("want an immediate response")
			}
			if int(ir.GetStatus().GetCode()) != tc.status {
				t.Errorf("status %d, want %d", ir.GetStatus().GetCode(), tc.status)
			}
			set, _ := setOf(ir.GetHeaders())
			if set["content-type"] != "application/json" || set[RequestIDHeader] != "req-1" || (set["retry-after"] != "") != tc.retry {
				t.Errorf("headers %v", set)
			}
			var eb struct {
				Error struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Param   *string `json:"param"`
					Code    any     `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(ir.GetBody(), &eb); err != nil {
				t.Fatalf("body %q: %v", ir.GetBody(), err)
			}
			if eb.Error.Type != tc.errType || eb.Error.Code != tc.code || eb.Error.Message == "" {
				t.Errorf("error body %s", ir.GetBody())
			}
			if tc.status == 404 {
				tc.param = "model"
			}
			if (tc.param == "") != (eb.Error.Param == nil) || (eb.Error.Param != nil && *eb.Error.Param != tc.param) {
				t.Errorf("param %v, want %q", eb.Error.Param, tc.param)
			}
			if ir.GetDetails() == "" || strings.ContainsAny(ir.GetDetails(), " \t") {
				t.Errorf("details %q", ir.GetDetails())
			}
			s.ended()
			if n := len(e.picker.requests()); n != tc.wantPicks {
				t.Errorf("%d picks, want %d", n, tc.wantPicks)
			}
			e.waitStreams(outcomeImmediate, 1)
			if len(e.done.all()) != 0 {
				t.Error("a request that was not routed was completed")
			}
			if got := e.immediateCount(tc.status); got != 1 {
				t.Errorf("immediate responses{code=%d} = %v", tc.status, got)
			}
		})
	}
}

// The subset hint comes from the metadata (which wins) or the header.
func TestSubsetHint(t *testing.T) {
	body := []byte(`{"model":"llama","prompt":"x"}`)
	cases := []struct {
		name string
		md   bool
		hdr  string
		want []string
	}{
		{name: "metadata", md: true, want: []string{"10.0.0.2:8000", "10.0.0.3:8000"}},
		{name: "header", hdr: "10.0.0.1:8000, 10.0.0.3:8000", want: []string{"10.0.0.1:8000", "10.0.0.3:8000"}},
		{name: "metadata over header", md: true, hdr: "10.0.0.1:8000", want: []string{"10.0.0.2:8000", "10.0.0.3:8000"}},
		{name: "none"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t, nil)
			s := e.open()
			var extra []string
			if tc.hdr != "" {
				extra = []string{SubsetKey, tc.hdr}
			}
			h := post(fullDuplex, "/v1/completions", extra...)
			if tc.md {
				h.MetadataContext = subsetMetadata("10.0.0.2:8000", "10.0.0.3:8000")
			}
			s.send(h, requestBody(body, true))
			s.recv()
			s.readBody(true, 0, true)
			if pr := e.picker.requests(); len(pr) != 1 || !slices.Equal(pr[0].GetSubset(), tc.want) {
				t.Errorf("subset %v, want %v", pr[0].GetSubset(), tc.want)
			}
		})
	}
}

// Paths that are not inference pass through untouched (a client's routing
// header aside), bodies included; nothing is picked or completed.
func TestNonInferencePathsPassThrough(t *testing.T) {
	e := newTestEnv(t, nil)
	s := e.open()
	s.send(requestHeaders(fullDuplex, true, ":method", "GET", ":path", "/v1/models", "x-request-id", "m-1"))
	hr := s.recv().GetRequestHeaders()
	if hr == nil || len(hr.GetResponse().GetHeaderMutation().GetSetHeaders()) != 0 || len(hr.GetResponse().GetHeaderMutation().GetRemoveHeaders()) != 0 {
		t.Fatalf("headers answer %v", hr)
	}
	s.send(responseHeaders(false, ":status", "200", "content-type", "application/json"))
	if rh := s.recv().GetResponseHeaders(); rh == nil || len(rh.GetResponse().GetHeaderMutation().GetSetHeaders()) != 0 {
		t.Fatalf("response headers answer %v", rh)
	}
	s.send(responseBody([]byte(`{"data":[]}`), true))
	if got, _ := s.readBody(false, 0, true); string(got) != `{"data":[]}` {
		t.Errorf("response body %q", got)
	}
	s.close()

	s = e.open()
	s.send(post(fullDuplex, "/v1/images/generations", DestinationHeader, "6.6.6.6:1"), requestBody([]byte("abc"), false), requestBody([]byte("def"), true))
	_, removed := setOf(s.recv().GetRequestHeaders().GetResponse().GetHeaderMutation())
	if !slices.Equal(removed, []string{DestinationHeader}) {
		t.Errorf("a client's routing header passes: removed %v", removed)
	}
	if got, _ := s.readBody(true, 0, true); string(got) != "abcdef" {
		t.Errorf("body %q", got)
	}
	s.close()
	if len(e.picker.requests()) != 0 || len(e.done.all()) != 0 || e.streamsCount(outcomePassthrough) != 2 {
		t.Errorf("picks %d, completions %d, passthrough streams %v", len(e.picker.requests()), len(e.done.all()), e.streamsCount(outcomePassthrough))
	}
}

// A client that goes away during its body leaves nothing behind: no pick,
// no completion, the stream's handler gone.
func TestCancelDuringTheBody(t *testing.T) {
	e := newTestEnv(t, nil)
	s := e.open()
	s.send(post(fullDuplex, "/v1/completions"), requestBody([]byte(`{"model":"llama",`), false))
	time.Sleep(20 * time.Millisecond)
	s.cancel()
	e.waitStreams(outcomeAbandoned, 1)
	if len(e.picker.requests()) != 0 || len(e.done.all()) != 0 {
		t.Errorf("picks %d, completions %d", len(e.picker.requests()), len(e.done.all()))
	}
}

// A client that goes away during the response: the routed request is
// completed as canceled, exactly once.
func TestCancelDuringTheResponse(t *testing.T) {
	e := newTestEnv(t, nil)
	s := e.open()
	s.send(post(fullDuplex, "/v1/chat/completions"), requestBody([]byte(chatBody), true))
	s.recv()
	s.readBody(true, 0, true)
	s.send(responseHeaders(false, ":status", "200", "content-type", "text/event-stream"))
	s.recv()
	s.send(responseBody([]byte(sseResponse[0]), false))
	s.readBody(false, len(sseResponse[0]), false)
	s.cancel()
	e.waitStreams(openai.OutcomeCanceled, 1)
	evs := e.done.all()
	if len(evs) != 1 {
		t.Fatalf("%d completions, want 1", len(evs))
	}
	if ev := evs[0]; ev.GetOutcome() != eventsv1.CompletionOutcome_COMPLETION_OUTCOME_CANCELED || ev.GetStatusCode() != 0 || ev.GetTtft() == nil || ev.GetCompletionTokens() != 1 {
		t.Errorf("completion %v", ev)
	}
}

// The data plane closing the stream before the response ended (its
// upstream reset, say) completes the request as canceled.
func TestStreamClosedBeforeTheResponseEnds(t *testing.T) {
	e := newTestEnv(t, nil)
	s := e.open()
	s.send(post(fullDuplex, "/v1/completions"), requestBody([]byte(`{"model":"llama","prompt":"x"}`), true))
	s.recv()
	s.readBody(true, 0, true)
	s.close()
	if evs := e.done.all(); len(evs) != 1 || evs[0].GetOutcome() != eventsv1.CompletionOutcome_COMPLETION_OUTCOME_CANCELED {
		t.Errorf("completions %v", evs)
	}
}

// An endpoint's error status completes the request as an upstream error.
func TestUpstreamErrorOutcome(t *testing.T) {
	e := newTestEnv(t, nil)
	s := e.open()
	s.send(post(fullDuplex, "/v1/completions"), requestBody([]byte(`{"model":"llama","prompt":"x"}`), true))
	s.recv()
	s.readBody(true, 0, true)
	s.send(responseHeaders(false, ":status", "500", "content-type", "application/json"), responseBody([]byte(`{"error":{}}`), true))
	s.recv()
	s.readBody(false, 0, true)
	s.close()
	evs := e.done.all()
	if len(evs) != 1 || evs[0].GetOutcome() != eventsv1.CompletionOutcome_COMPLETION_OUTCOME_UPSTREAM_ERROR || evs[0].GetStatusCode() != 500 {
		t.Errorf("completions %v", evs)
	}
	if e.streamsCount(openai.OutcomeUpstreamError) != 1 {
		t.Error("the stream is not counted as an upstream error")
	}
}

// When the data plane says a fallback served (envoy.lb metadata or the
// upstream.address attribute), that target's response headers go to the
// client and the completion names it.
func TestServedByAFallback(t *testing.T) {
	for _, how := range []string{"metadata", "attribute"} {
		t.Run(how, func(t *testing.T) {
			e := newTestEnv(t, nil)
			s := e.open()
			s.send(post(fullDuplex, "/v1/completions"), requestBody([]byte(`{"model":"llama","prompt":"x"}`), true))
			s.recv()
			s.readBody(true, 0, true)
			rh := responseHeaders(true, ":status", "200")
			if how == "metadata" {
				rh.MetadataContext = subsetMetadata()
				rh.MetadataContext.FilterMetadata[DestinationNamespace] = &structpb.Struct{Fields: map[string]*structpb.Value{ServedKey: structpb.NewStringValue("10.0.0.2:8000")}}
			} else {
				rh.Attributes = map[string]*structpb.Struct{"envoy.filters.http.ext_proc": {Fields: map[string]*structpb.Value{upstreamAddressAttr: structpb.NewStringValue("10.0.0.2:8000")}}}
			}
			s.send(rh)
			set, _ := setOf(s.recv().GetResponseHeaders().GetResponse().GetHeaderMutation())
			if set["x-session-token"] != "tok-b" {
				t.Errorf("response headers %v", set)
			}
			s.close()
			if evs := e.done.all(); len(evs) != 1 || evs[0].GetEndpointName() != "pod-b" || evs[0].GetEndpoint() != "10.0.0.2:8000" {
				t.Errorf("completions %v", evs)
			}
		})
	}
}

// A request without a usable x-request-id gets one, on the request, the
// response and the completion.
func TestRequestIDIsMadeWhenMissing(t *testing.T) {
	e := newTestEnv(t, nil)
	s := e.open()
	s.send(requestHeaders(fullDuplex, false, ":method", "POST", ":path", "/v1/completions", "x-request-id", "bad id with spaces"),
		requestBody([]byte(`{"model":"llama","prompt":"x"}`), true))
	set, _ := setOf(s.recv().GetRequestHeaders().GetResponse().GetHeaderMutation())
	id := set[RequestIDHeader]
	if !requestid.Valid(id) || len(id) != 32 {
		t.Fatalf("request id %q", id)
	}
	s.readBody(true, 0, true)
	s.send(responseHeaders(true, ":status", "200"))
	rset, _ := setOf(s.recv().GetResponseHeaders().GetResponse().GetHeaderMutation())
	s.close()
	if rset[RequestIDHeader] != id || e.picker.requests()[0].GetRequestId() != id || e.done.all()[0].GetRequestId() != id {
		t.Errorf("ids: response %q, pick %q, completion %q, want %q", rset[RequestIDHeader], e.picker.requests()[0].GetRequestId(), e.done.all()[0].GetRequestId(), id)
	}
}

// Messages out of order end the stream with an error.
func TestProtocolErrors(t *testing.T) {
	e := newTestEnv(t, nil)
	s := e.open()
	s.send(requestBody([]byte("x"), true))
	if _, err := s.c.Recv(); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("body first: %v", err)
	}
	e.waitStreams(outcomeProtocolError, 1)
}

// The attributes the config reports (request-attribute-reporter) ride on
// the answer to the response's last body chunk as dynamic metadata, from
// the usage the response carried; a response without usage reports none.
func TestResponseAttributesAsDynamicMetadata(t *testing.T) {
	var seen []scheduling.Usage
	attrs := func(u scheduling.Usage) []scheduling.Attribute {
		seen = append(seen, u)
		return []scheduling.Attribute{{Namespace: "envoy.lb", Name: "cost", Value: float64(u.PromptTokens + 2*u.CompletionTokens)}}
	}
	for _, mode := range []filterv3.ProcessingMode_BodySendMode{filterv3.ProcessingMode_FULL_DUPLEX_STREAMED, filterv3.ProcessingMode_BUFFERED} {
		seen = nil
		e := newTestEnv(t, func(o *Options) { o.Attributes = attrs })
		s := e.open()
		pc := protocol(mode, mode)
		s.send(post(pc, "/v1/completions"))
		if mode == filterv3.ProcessingMode_BUFFERED {
			s.recv() // the headers answer
		}
		s.send(requestBody([]byte(`{"model":"llama","prompt":"hi"}`), true))
		for r := s.recv(); r.GetRequestBody() == nil || mode == filterv3.ProcessingMode_FULL_DUPLEX_STREAMED && !lastChunk(r); r = s.recv() {
		}
		s.send(responseHeaders(false, ":status", "200", "content-type", "application/json"))
		s.recv()
		s.send(responseBody([]byte(`{"choices":[],"usage":{"prompt_tokens":3,`), false))
		if r := s.recv(); r.GetDynamicMetadata() != nil {
			t.Errorf("%s: metadata before the last chunk: %v", mode, r.GetDynamicMetadata())
		}
		s.send(responseBody([]byte(`"completion_tokens":5}}`), true))
		r := s.recv()
		cost := r.GetDynamicMetadata().GetFields()["envoy.lb"].GetStructValue().GetFields()["cost"]
		if cost == nil || cost.GetNumberValue() != 13 {
			t.Errorf("%s: dynamic metadata %v, want envoy.lb.cost 13", mode, r.GetDynamicMetadata())
		}
		s.close()
		if len(seen) != 1 || seen[0].PromptTokens != 3 || seen[0].CompletionTokens != 5 {
			t.Errorf("%s: usage seen %+v", mode, seen)
		}
	}
}

// lastChunk reports whether r echoes the request body's last chunk.
func lastChunk(r *extprocv3.ProcessingResponse) bool {
	return r.GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse().GetEndOfStream()
}
