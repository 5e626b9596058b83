package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkProxy sends requests through the handler to an in-process
// endpoint, with an instant picker: the gateway's own cost per request
// (two loopback HTTP hops, body checks, headers, relay, completion event).
func BenchmarkProxy(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/v1/chat/completions" {
			w.Header().Set("Content-Type", "text/event-stream")
			for range 16 {
				_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"tok\"}}]}\n\n")
			}
			_, _ = io.WriteString(w, "data: {\"choices\":[],"+usageJSON+"}\n\ndata: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"cmpl","choices":[{"text":"sixteen tokens of generated text go here and there"}],`+usageJSON+`}`)
	}))
	defer up.Close()
	prompt := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 40)
	for _, c := range []struct{ name, path, body string }{
		{"completion", "/v1/completions", `{"model":"m","prompt":"` + prompt + `","max_tokens":16}`},
		{"chat-stream", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"` + prompt + `"}]}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			g := newGateway(b, hostPort(up.URL))
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
			b.ReportAllocs()
			for b.Loop() {
				resp, err := client.Post(g.url+c.path, "application/json", strings.NewReader(c.body))
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatal(resp.Status)
				}
			}
		})
	}
}
