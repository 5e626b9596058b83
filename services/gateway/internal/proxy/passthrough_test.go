package proxy

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
)

// vLLM's other endpoints are routed by the model their body names and
// passed on as they came: the body, the path and the answer unchanged,
// the answer's usage read where it has one.
func TestPassthroughEndpoints(t *testing.T) {
	type seen struct {
		path, contentType string
		body              []byte
	}
	got := make(chan seen, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.URL.Path, r.Header.Get("Content-Type"), b}
		switch r.URL.Path {
		case "/v1/embeddings":
			_, _ = io.WriteString(w, `{"object":"list","data":[{"embedding":[0.5]}],"usage":{"prompt_tokens":4,"total_tokens":4}}`)
		case "/v1/audio/transcriptions": // a stream whose framing is its own
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: {\"delta\":\"hello\"}\n\n")
		default:
			_, _ = io.WriteString(w, `{"tokens":[1,2]}`)
		}
	}))
	defer up.Close()
	g := newGateway(t, hostPort(up.URL))

	var form bytes.Buffer
	fw := multipart.NewWriter(&form)
	_ = fw.WriteField("model", "whisper")
	f, _ := fw.CreateFormFile("file", "a.wav")
	_, _ = f.Write(bytes.Repeat([]byte{1}, 4096))
	_ = fw.WriteField("stream", "true")
	_ = fw.Close()

	for i, c := range []struct {
		path, contentType, body, model, answer string
	}{
		{"/v1/embeddings", "application/json", `{"model":"bge","input":["a b c d"]}`, "bge", `"embedding"`},
		{"/tokenize", "application/json", `{"prompt":"hi"}`, "", `"tokens"`},
		{"/v1/audio/transcriptions", fw.FormDataContentType(), form.String(), "whisper", "data: {\"delta\":\"hello\"}\n\n"},
	} {
		resp, err := http.Post(g.url+c.path, c.contentType, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), c.answer) || strings.Contains(string(b), "error") {
			t.Errorf("%s: %d %s", c.path, resp.StatusCode, b)
		}
		s := <-got
		if s.path != c.path || s.contentType != c.contentType || string(s.body) != c.body {
			t.Errorf("%s: the pod got %s %s %.60q", c.path, s.path, s.contentType, s.body)
		}
		g.picker.mu.Lock()
		pr := g.picker.reqs[i]
		g.picker.mu.Unlock()
		if pr.GetApi() != pickerv1.Api_API_PASSTHROUGH || pr.GetRequest().GetModel() != c.model || pr.GetRequest().GetPrompt() != "" {
			t.Errorf("%s: pick request %v", c.path, pr)
		}
		ev := g.reporter.wait(t, i+1)[i]
		if ev.GetOutcome() != eventsv1.CompletionOutcome_COMPLETION_OUTCOME_SUCCESS {
			t.Errorf("%s: completion %v", c.path, ev)
		}
		if c.path == "/v1/embeddings" && ev.GetPromptTokens() != 4 {
			t.Errorf("embeddings: usage not read: %v", ev)
		}
	}
}
