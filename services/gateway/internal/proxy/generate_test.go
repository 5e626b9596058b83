package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
)

// vLLM's /inference/v1/generate is routed by its token ids and streamed as
// OpenAI chunks: the gateway asks for the usage chunk the client did not,
// accounts it and keeps it from the client.
func TestGenerateIsRoutedByItsTokenIDs(t *testing.T) {
	var upstreamBody []byte
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upstreamBody, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"request_id":"generate-tokens-1","choices":[{"index":0,"finish_reason":null,"token_ids":[11]}]}`+"\n\n"+
			`data: {"request_id":"generate-tokens-1","choices":[{"index":0,"finish_reason":"length","token_ids":[12]}]}`+"\n\n"+
			`data: {"request_id":"generate-tokens-1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`+"\n\n"+
			"data: [DONE]\n\n")
	}))
	defer up.Close()
	g := newGateway(t, hostPort(up.URL))
	resp, err := http.Post(g.url+"/inference/v1/generate", "application/json",
		strings.NewReader(`{"model":"llama","token_ids":[1,2,3],"stream":true,"sampling_params":{"max_tokens":2}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.Contains(string(b), "usage") || !strings.Contains(string(b), `"token_ids":[12]`) || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
		t.Errorf("%d stream:\n%s", resp.StatusCode, b)
	}
	var sent map[string]any
	_ = json.Unmarshal(upstreamBody, &sent)
	if opts, _ := sent["stream_options"].(map[string]any); opts["include_usage"] != true {
		t.Errorf("upstream body %s", upstreamBody)
	}
	ev := g.reporter.wait(t, 1)[0]
	if ev.GetOutcome() != eventsv1.CompletionOutcome_COMPLETION_OUTCOME_SUCCESS || ev.GetPromptTokens() != 3 || ev.GetCompletionTokens() != 2 {
		t.Errorf("completion %v", ev)
	}
	g.picker.mu.Lock()
	req := g.picker.reqs[0]
	g.picker.mu.Unlock()
	if req.GetApi() != pickerv1.Api_API_GENERATE || !slices.Equal(req.GetRequest().GetTokenIds(), []uint32{1, 2, 3}) || req.GetRequest().GetMaxTokens() != 2 {
		t.Errorf("pick request %v", req)
	}

	// a body vLLM would refuse is refused before it is routed
	resp, err = http.Post(g.url+"/inference/v1/generate", "application/json", strings.NewReader(`{"token_ids":[],"sampling_params":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `"param":"token_ids"`) {
		t.Errorf("empty token_ids: %d %s", resp.StatusCode, b)
	}
}
