package app

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hermod/hermod/services/gateway/internal/responses"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
	"github.com/hermod/hermod/libs/coord"
	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/libs/telemetry"
	"github.com/hermod/hermod/services/gateway/internal/auth"
	"github.com/hermod/hermod/services/gateway/internal/models"
	"github.com/hermod/hermod/services/gateway/internal/pickerclient"
	"github.com/hermod/hermod/services/gateway/internal/proxy"
)

type noReports struct{}

func (noReports) PublishesDecisions() bool { return false }

func (noReports) Decided(pickerclient.Decision) {}

func (noReports) Report(pickerclient.Decision, *eventsv1.RequestCompleted) {}

func TestRoutes(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	h := proxy.New(proxy.Options{Pool: "p", Reporter: noReports{}, Logger: quiet})
	list := models.New()
	list.Update(coord.Snapshot{Endpoints: map[string]*registryv1.Endpoint{"a": {Name: "a", Model: "llama"}}})
	guard := auth.NewGuard([]auth.Key{{Name: "k", Secret: "sk-1"}}, nil)
	rh := responses.New(responses.Options{Chat: h.Completions(openai.APIChatCompletions)})
	ops := telemetry.OpsHandler(telemetry.NewRegistry(), nil)
	srv := httptest.NewServer(routes(h, rh, list, guard, auth.TenantTrust{}, nil, ops, false))
	defer srv.Close()

	type answer struct {
		StatusCode int
		Header     http.Header
	}
	do := func(method, path, key string) (answer, string) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(`{}`))
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, resp.Header}, string(b)
	}
	for _, c := range []struct {
		method, path, key string
		code              int
		errType           string
	}{
		{http.MethodPost, "/v1/completions", "", http.StatusUnauthorized, "authentication_error"},
		{http.MethodGet, "/v1/models", "wrong", http.StatusUnauthorized, "authentication_error"},
		{http.MethodGet, "/v1/completions", "sk-1", http.StatusMethodNotAllowed, "invalid_request_error"},
		{http.MethodPost, "/v1/images/generations", "sk-1", http.StatusNotFound, "not_found_error"},
		// Anthropic's paths answer in its shape ({"type":"error",...})
		{http.MethodPost, "/v1/messages", "", http.StatusUnauthorized, "error"},
		{http.MethodGet, "/v1/messages", "sk-1", http.StatusMethodNotAllowed, "error"},
		{http.MethodGet, "/v1/messages/count_tokens", "sk-1", http.StatusMethodNotAllowed, "error"},
		{http.MethodPost, "/v1/messages/batches", "sk-1", http.StatusNotFound, "error"},
		// vLLM's own paths are behind the same keys
		{http.MethodPost, "/inference/v1/generate", "", http.StatusUnauthorized, "authentication_error"},
		{http.MethodGet, "/inference/v1/generate", "sk-1", http.StatusMethodNotAllowed, "invalid_request_error"},
		{http.MethodPost, "/inference/v2/generate", "sk-1", http.StatusNotFound, "not_found_error"},
		{http.MethodPost, "/tokenize", "", http.StatusUnauthorized, "authentication_error"},
		{http.MethodGet, "/tokenize", "sk-1", http.StatusMethodNotAllowed, "invalid_request_error"},
		{http.MethodGet, "/v1/embeddings", "sk-1", http.StatusMethodNotAllowed, "invalid_request_error"},
		{http.MethodPut, "/v1/audio/transcriptions", "sk-1", http.StatusMethodNotAllowed, "invalid_request_error"},
	} {
		resp, body := do(c.method, c.path, c.key)
		if resp.StatusCode != c.code || !strings.Contains(body, `"type":"`+c.errType+`"`) || len(resp.Header.Get("X-Request-Id")) != 32 {
			t.Errorf("%s %s: %d %s (request id %q)", c.method, c.path, resp.StatusCode, body, resp.Header.Get("X-Request-Id"))
		}
	}
	resp, body := do(http.MethodGet, "/v1/models", "sk-1")
	var l struct {
		Data []struct{ ID string } `json:"data"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &l) != nil || len(l.Data) != 1 || l.Data[0].ID != "llama" {
		t.Errorf("/v1/models: %d %s", resp.StatusCode, body)
	}
	if resp, _ := do(http.MethodGet, "/health", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("/health without a key: %d", resp.StatusCode)
	}
	if resp, _ := do(http.MethodGet, "/ready", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("/ready without a key: %d", resp.StatusCode)
	}
	// /metrics is on the ops address, not where API clients are
	for _, path := range []string{"/metrics", "/debug/pprof/"} {
		if resp, body := do(http.MethodGet, path, ""); resp.StatusCode != http.StatusNotFound || strings.Contains(body, "go_goroutines") {
			t.Errorf("%s on the API address: %d", path, resp.StatusCode)
		}
	}
}

// With --metrics-on-api the API address serves /metrics too.
func TestRoutesMetricsOnAPI(t *testing.T) {
	h := proxy.New(proxy.Options{Pool: "p", Reporter: noReports{}, Logger: slog.New(slog.DiscardHandler)})
	rh := responses.New(responses.Options{Chat: h.Completions(openai.APIChatCompletions)})
	srv := httptest.NewServer(routes(h, rh, models.New(), nil, auth.TenantTrust{}, nil, telemetry.OpsHandler(telemetry.NewRegistry(), nil), true))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "go_goroutines") {
		t.Errorf("/metrics: %d", resp.StatusCode)
	}
}
