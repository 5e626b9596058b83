package responses

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	responsesv1 "github.com/hermod/hermod/libs/api/hermod/responses/v1"
	"github.com/hermod/hermod/services/gateway/internal/auth"
)

// memStore is the store the handler talks to (the service is tested on
// its own and end to end).
type memStore struct {
	// The background methods answer as a responses service without a
	// gateway address does; the runs are tested end to end.
	responsesv1.ResponsesStoreClient
	mu   sync.Mutex
	recs map[string]*responsesv1.StoredResponse
	max  int
	// failPuts: the next puts that answer Unavailable.
	failPuts int
	// revision is the last one given; conflicts counts refused swaps.
	revision, conflicts uint64
	// beforeSwap, when set, runs once inside the next swap (another
	// writer landing first).
	beforeSwap func(*memStore)
}

func (m *memStore) Put(_ context.Context, in *responsesv1.PutRequest, _ ...grpc.CallOption) (*responsesv1.PutResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failPuts > 0 {
		m.failPuts--
		return nil, status.Error(codes.Unavailable, "dial tcp 10.9.9.9:9097: connect: connection refused")
	}
	if m.max > 0 && len(in.GetResponse().GetData()) > m.max {
		return nil, status.Error(codes.InvalidArgument, "too large")
	}
	m.revision++
	r := proto.Clone(in.GetResponse()).(*responsesv1.StoredResponse)
	r.Revision = m.revision
	m.recs[r.GetId()] = r
	return &responsesv1.PutResponse{Revision: r.Revision}, nil
}

// Swap answers as the service does: Aborted unless the record holds the
// revision.
func (m *memStore) Swap(_ context.Context, in *responsesv1.SwapRequest, _ ...grpc.CallOption) (*responsesv1.SwapResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.beforeSwap != nil {
		f := m.beforeSwap
		m.beforeSwap = nil
		f(m)
	}
	old, ok := m.recs[in.GetResponse().GetId()]
	switch {
	case !ok:
		return nil, status.Error(codes.NotFound, "not found")
	case old.GetRevision() != in.GetRevision():
		m.conflicts++
		return nil, status.Error(codes.Aborted, "the record changed since it was read")
	case m.max > 0 && len(in.GetResponse().GetData()) > m.max:
		return nil, status.Error(codes.InvalidArgument, "too large")
	}
	m.revision++
	r := proto.Clone(in.GetResponse()).(*responsesv1.StoredResponse)
	r.Revision = m.revision
	m.recs[r.GetId()] = r
	return &responsesv1.SwapResponse{Revision: r.Revision}, nil
}

func (m *memStore) Get(_ context.Context, in *responsesv1.GetRequest, _ ...grpc.CallOption) (*responsesv1.GetResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[in.GetId()]
	if !ok {
		return nil, status.Error(codes.NotFound, "not found")
	}
	return &responsesv1.GetResponse{Response: proto.Clone(r).(*responsesv1.StoredResponse)}, nil
}

func (m *memStore) GetChain(ctx context.Context, in *responsesv1.GetChainRequest, _ ...grpc.CallOption) (*responsesv1.GetChainResponse, error) {
	var chain []*responsesv1.StoredResponse
	for id := in.GetId(); id != ""; {
		if len(chain) == int(in.GetLimit()) {
			return nil, status.Error(codes.OutOfRange, "too long")
		}
		r, err := m.Get(ctx, &responsesv1.GetRequest{Id: id})
		if err != nil {
			return nil, err
		}
		chain = append([]*responsesv1.StoredResponse{r.GetResponse()}, chain...)
		id = r.GetResponse().GetPreviousResponseId()
	}
	return &responsesv1.GetChainResponse{Responses: chain}, nil
}

func (m *memStore) Delete(_ context.Context, in *responsesv1.DeleteRequest, _ ...grpc.CallOption) (*responsesv1.DeleteResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.recs[in.GetId()]; !ok {
		return nil, status.Error(codes.NotFound, "not found")
	}
	delete(m.recs, in.GetId())
	return &responsesv1.DeleteResponse{}, nil
}

func (m *memStore) Submit(context.Context, *responsesv1.SubmitRequest, ...grpc.CallOption) (*responsesv1.SubmitResponse, error) {
	return nil, status.Error(codes.FailedPrecondition, "this responses service runs no background responses: start it with --gateway-url")
}

func (m *memStore) GetBackground(context.Context, *responsesv1.GetBackgroundRequest, ...grpc.CallOption) (*responsesv1.GetBackgroundResponse, error) {
	return nil, status.Error(codes.NotFound, "no such background response")
}

// chat answers chat completions with "reply to <last user message>",
// recording the messages it got.
type chat struct {
	mu       sync.Mutex
	messages [][]chatMessage
	cut      bool // end streams without [DONE]
}

func (c *chat) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Messages []chatMessage `json:"messages"`
		Stream   bool          `json:"stream"`
	}
	_ = json.NewDecoder(r.Body).Decode(&body)
	c.mu.Lock()
	c.messages = append(c.messages, body.Messages)
	c.mu.Unlock()
	reply := "reply to " + body.Messages[len(body.Messages)-1].Content
	w.Header().Set("X-Gateway-Destination-Endpoint", "10.0.0.1:8000")
	if !body.Stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"choices":[{"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":11,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":5}}}`, reply)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush() // as the proxy does: headers out before the first chunk
	for _, word := range strings.SplitAfter(reply, " ") {
		fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", word)
		w.(http.Flusher).Flush()
	}
	if c.cut {
		return
	}
	fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":11,\"completion_tokens\":3}}\n\ndata: [DONE]\n\n")
}

func setup(t *testing.T) (*httptest.Server, *memStore, *chat) {
	return setupWith(t, Options{MaxChain: 4})
}

func setupWith(t *testing.T, o Options) (*httptest.Server, *memStore, *chat) {
	st := &memStore{recs: map[string]*responsesv1.StoredResponse{}}
	c := &chat{}
	mux := http.NewServeMux()
	o.Store, o.Chat = st, c
	h := New(o)
	h.Register(mux)
	loopback, _ := auth.ParseTrustedProxies("127.0.0.0/8,::1")
	srv := httptest.NewServer(h.AuthenticateRuns(auth.Tenants(auth.TenantTrust{Proxies: loopback}, mux), mux))
	t.Cleanup(srv.Close)
	return srv, st, c
}

func post(t *testing.T, srv *httptest.Server, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(srv.URL+"/v1/responses", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestConversationNonStreaming(t *testing.T) {
	srv, st, c := setup(t)
	code, r1 := post(t, srv, `{"model":"m","input":"hello","instructions":"be brief"}`)
	if code != 200 || r1["object"] != "response" || r1["status"] != "completed" || !strings.HasPrefix(r1["id"].(string), "resp_") {
		t.Fatalf("%d %v", code, r1)
	}
	out := r1["output"].([]any)[0].(map[string]any)
	if out["role"] != "assistant" || out["content"].([]any)[0].(map[string]any)["text"] != "reply to hello" {
		t.Fatalf("output %v", out)
	}
	if u := r1["usage"].(map[string]any); u["input_tokens"] != 11.0 || u["output_tokens"] != 3.0 || u["total_tokens"] != 14.0 || u["input_tokens_details"].(map[string]any)["cached_tokens"] != 5.0 {
		t.Fatalf("usage %v", u)
	}
	code, r2 := post(t, srv, fmt.Sprintf(`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"again"}]}],"previous_response_id":%q}`, r1["id"]))
	if code != 200 || r2["previous_response_id"] != r1["id"] {
		t.Fatalf("%d %v", code, r2)
	}
	want := []chatMessage{{"user", "hello"}, {"assistant", "reply to hello"}, {"user", "again"}}
	got := c.messages[1]
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("second turn's messages %v, want %v (instructions are not carried over)", got, want)
	}
	if fmt.Sprint(c.messages[0]) != fmt.Sprint([]chatMessage{{"system", "be brief"}, {"user", "hello"}}) {
		t.Fatalf("first turn %v", c.messages[0])
	}
	// GET, input_items, store: false, DELETE
	resp, _ := http.Get(srv.URL + "/v1/responses/" + r2["id"].(string))
	var again map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&again)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || again["id"] != r2["id"] {
		t.Fatalf("get %d %v", resp.StatusCode, again)
	}
	resp, _ = http.Get(srv.URL + "/v1/responses/" + r2["id"].(string) + "/input_items")
	var items map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&items)
	resp.Body.Close()
	if data := items["data"].([]any); items["object"] != "list" || len(data) != 1 || data[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"] != "again" {
		t.Fatalf("input items %v", items)
	}
	n := len(st.recs)
	if code, r := post(t, srv, `{"model":"m","input":"x","store":false}`); code != 200 || r["store"] != false || len(st.recs) != n {
		t.Fatalf("store false: %d %v, %d stored", code, r, len(st.recs))
	}
	req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/v1/responses/"+r1["id"].(string), nil)
	resp, _ = http.DefaultClient.Do(req)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("delete %d", resp.StatusCode)
	}
	resp, _ = http.Get(srv.URL + "/v1/responses/" + r1["id"].(string))
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("deleted: %d", resp.StatusCode)
	}
}

func TestErrors(t *testing.T) {
	srv, st, _ := setup(t)
	code, e := post(t, srv, `{"model":"m","input":"x","previous_response_id":"resp_nope"}`)
	if code != 404 || e["error"].(map[string]any)["param"] != "previous_response_id" {
		t.Fatalf("unknown previous: %d %v", code, e)
	}
	for _, body := range []string{`{"input":"x"}`, `{"model":"m"}`, `{"model":"m","input":[]}`, `{"model":"m","input":[{"role":"robot","content":"x"}]}`, `{"model":"m","input":"x","max_output_tokens":0}`, `not json`} {
		if code, e := post(t, srv, body); code != 400 || e["error"].(map[string]any)["type"] != "invalid_request_error" {
			t.Errorf("%s: %d %v", body, code, e)
		}
	}
	// a field of the wrong type names the field, not a Go type; background
	// is refused, not ignored, when nothing runs it, streamed or unstored
	if code, e := post(t, srv, `{"model":7,"input":"x"}`); code != 400 || e["error"].(map[string]any)["param"] != "model" ||
		strings.Contains(e["error"].(map[string]any)["message"].(string), "Go") || strings.Contains(e["error"].(map[string]any)["message"].(string), "struct") {
		t.Errorf("model of the wrong type: %d %v", code, e)
	}
	for body, param := range map[string]string{
		`{"model":"m","input":"x","background":true}`:               "background",
		`{"model":"m","input":"x","background":true,"store":false}`: "store",
	} {
		if code, e := post(t, srv, body); code != 400 || e["error"].(map[string]any)["param"] != param {
			t.Errorf("%s: %d %v", body, code, e)
		}
	}
	// a forged background run of an unknown response is refused
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/responses", strings.NewReader(`{"model":"m","input":"x"}`))
	req.Header.Set(RunHeader, "resp_forged token")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("forged run: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	// cancel: only background responses can be; an unknown one is 404
	_, r0 := post(t, srv, `{"model":"m","input":"x"}`)
	for id, want := range map[string]int{r0["id"].(string): 400, "resp_nope": 404} {
		resp, err := http.Post(srv.URL+"/v1/responses/"+id+"/cancel", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("cancel %s: %d, want %d", id, resp.StatusCode, want)
		}
	}
	// a conversation longer than MaxChain (4)
	prev := ""
	for i := range 5 {
		body := `{"model":"m","input":"t"}`
		if prev != "" {
			body = fmt.Sprintf(`{"model":"m","input":"t","previous_response_id":%q}`, prev)
		}
		code, r := post(t, srv, body)
		if i < 4 && code != 200 {
			t.Fatalf("turn %d: %d %v", i, code, r)
		}
		if i == 4 {
			if code != 400 || r["error"].(map[string]any)["code"] != "conversation_too_long" {
				t.Fatalf("fifth turn: %d %v", code, r)
			}
			break
		}
		prev = r["id"].(string)
	}
	// an entry too large for the store
	st.max = 10
	if code, e := post(t, srv, `{"model":"m","input":"x"}`); code != 400 || e["error"].(map[string]any)["code"] != "response_too_large" {
		t.Fatalf("too large: %d %v", code, e)
	}
}

func TestStreamingIsStoredOnlyWhenComplete(t *testing.T) {
	srv, st, c := setup(t)
	resp, err := http.Post(srv.URL+"/v1/responses", "application/json", strings.NewReader(`{"model":"m","input":"one two","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	events, last := readEvents(t, resp.Body)
	resp.Body.Close()
	want := "response.created response.in_progress response.output_item.added response.content_part.added response.output_text.delta response.output_text.delta response.output_text.delta response.output_text.delta response.output_text.done response.content_part.done response.output_item.done response.completed"
	if strings.Join(events, " ") != want {
		t.Fatalf("events %v", events)
	}
	r := last["response"].(map[string]any)
	id := r["id"].(string)
	if r["status"] != "completed" || r["output"].([]any)[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"] != "reply to one two" {
		t.Fatalf("completed %v", r)
	}
	if _, ok := st.recs[id]; !ok {
		t.Fatal("a completed stream was not stored")
	}
	c.cut = true
	resp, _ = http.Post(srv.URL+"/v1/responses", "application/json", strings.NewReader(fmt.Sprintf(`{"model":"m","input":"three","stream":true,"previous_response_id":%q}`, id)))
	events, last = readEvents(t, resp.Body)
	resp.Body.Close()
	if events[len(events)-1] != "response.failed" || len(st.recs) != 1 {
		t.Fatalf("cut stream: %v, %d stored", events, len(st.recs))
	}
	_ = last
}

func readEvents(t *testing.T, body io.Reader) ([]string, map[string]any) {
	t.Helper()
	var names []string
	var last map[string]any
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	seq := 0.0
	for sc.Scan() {
		line := sc.Text()
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			last = map[string]any{}
			if err := json.Unmarshal([]byte(d), &last); err != nil {
				t.Fatalf("event %q: %v", d, err)
			}
			names = append(names, last["type"].(string))
			if last["sequence_number"] != seq {
				t.Fatalf("sequence %v, want %v", last["sequence_number"], seq)
			}
			seq++
		}
	}
	return names, last
}

// GET ?stream=true replays a stored response as the events of its
// creation, from starting_after on.
func TestRetrieveStreamed(t *testing.T) {
	srv, _, _ := setup(t)
	code, r := post(t, srv, `{"model":"m","input":"hello"}`)
	if code != 200 {
		t.Fatalf("%d %v", code, r)
	}
	events := func(query string) ([]map[string]any, int) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/v1/responses/" + r["id"].(string) + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out []map[string]any
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var ev map[string]any
				if err := json.Unmarshal([]byte(d), &ev); err != nil {
					t.Fatal(err)
				}
				out = append(out, ev)
			}
		}
		return out, resp.StatusCode
	}
	all, code := events("?stream=true")
	if code != 200 || len(all) < 4 || all[0]["type"] != "response.created" || all[len(all)-1]["type"] != "response.completed" {
		t.Fatalf("%d %v", code, all)
	}
	var text strings.Builder
	for i, ev := range all {
		if ev["sequence_number"] != float64(i) {
			t.Fatalf("event %d has sequence number %v", i, ev["sequence_number"])
		}
		if ev["type"] == "response.output_text.delta" {
			text.WriteString(ev["delta"].(string))
		}
	}
	if text.String() != "reply to hello" {
		t.Errorf("deltas %q", text.String())
	}
	rest, _ := events("?stream=true&starting_after=2")
	if len(rest) != len(all)-3 || rest[0]["sequence_number"] != 3.0 {
		t.Errorf("starting_after=2: %d events from %v", len(rest), rest[0]["sequence_number"])
	}
	if _, code := events("?stream=true&starting_after=-4"); code != http.StatusBadRequest {
		t.Errorf("a negative starting_after: %d", code)
	}
}

// A stored response belongs to the principal that created it: to any
// other, it does not exist.
func TestOwnership(t *testing.T) {
	srv, _, _ := setup(t)
	as := func(tenant, method, path, body string) (int, map[string]any) {
		t.Helper()
		return call(t, srv, tenant, method, path, body)
	}
	code, created := as("alice", http.MethodPost, "/v1/responses", `{"model":"m","input":"mine"}`)
	if code != http.StatusOK {
		t.Fatalf("create: %d %v", code, created)
	}
	id := created["id"].(string)
	for _, c := range []struct{ method, path, body string }{
		{http.MethodGet, "/v1/responses/" + id, ""},
		{http.MethodGet, "/v1/responses/" + id + "/input_items", ""},
		{http.MethodPost, "/v1/responses/" + id + "/cancel", ""},
		{http.MethodDelete, "/v1/responses/" + id, ""},
		{http.MethodPost, "/v1/responses", `{"model":"m","input":"x","previous_response_id":"` + id + `"}`},
	} {
		for _, who := range []string{"bob", ""} {
			if code, out := as(who, c.method, c.path, c.body); code != http.StatusNotFound {
				t.Errorf("%s %s as %q: %d %v, want 404", c.method, c.path, who, code, out)
			}
		}
	}
	if code, _ := as("alice", http.MethodGet, "/v1/responses/"+id, ""); code != http.StatusOK {
		t.Errorf("the owner's get: %d", code)
	}
	if code, _ := as("alice", http.MethodPost, "/v1/responses", `{"model":"m","input":"x","previous_response_id":"`+id+`"}`); code != http.StatusOK {
		t.Errorf("the owner continues: %d", code)
	}
	if code, _ := as("alice", http.MethodDelete, "/v1/responses/"+id, ""); code != http.StatusOK {
		t.Errorf("the owner's delete: %d", code)
	}
}

// A response that could not be stored is tried again, and the client is
// told when it stays unstored; the store's address never reaches it.
func TestStoredOrTold(t *testing.T) {
	srv, st, _ := setupWith(t, Options{StoreRetryFor: 300 * time.Millisecond})
	st.failPuts = 2
	code, out := post(t, srv, `{"model":"m","input":"keep me"}`)
	if code != http.StatusOK {
		t.Fatalf("after two failed puts: %d %v", code, out)
	}
	if _, ok := st.recs[out["id"].(string)]; !ok {
		t.Fatal("answered 200 but not stored")
	}
	st.failPuts = 1 << 30
	code, out = post(t, srv, `{"model":"m","input":"lost"}`)
	e, _ := out["error"].(map[string]any)
	if code != http.StatusServiceUnavailable || e["code"] != "response_not_stored" || strings.Contains(fmt.Sprint(e), "10.9.9.9") {
		t.Fatalf("a store that stays down: %d %v", code, out)
	}
	resp, err := http.Post(srv.URL+"/v1/responses", "application/json", strings.NewReader(`{"model":"m","input":"lost","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	events, last := readEvents(t, resp.Body)
	resp.Body.Close()
	if events[len(events)-1] != "response.failed" || !strings.Contains(fmt.Sprint(last), "response_not_stored") {
		t.Fatalf("a stream whose response is not stored ends with %v %v", events, last)
	}
	if code, out := post(t, srv, `{"model":"m","input":"not kept","store":false}`); code != http.StatusOK {
		t.Fatalf("store: false does not need the store: %d %v", code, out)
	}
}
