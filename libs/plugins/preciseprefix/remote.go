package preciseprefix

import (
	"bytes"
	"container/list"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/libs/scheduling"
)

// VLLMConfig points a tokenizer at a vLLM server's own tokenization: its
// render API (llm-d's `vllm: {url: ...}`; older configs name it `http`).
type VLLMConfig struct {
	// URL is the server's base URL (http://host:port); HTTP is its older
	// name.
	URL  string `json:"url,omitempty"`
	HTTP string `json:"http,omitempty"`
	// Timeout bounds one call (default 5s); MMTimeout is accepted (Hermod
	// renders text only).
	Timeout   string `json:"timeout,omitempty"`
	MMTimeout string `json:"mmTimeout,omitempty"`
}

// Base is the server's base URL: URL, else HTTP.
func (c VLLMConfig) Base() string {
	if c.URL != "" {
		return c.URL
	}
	return c.HTTP
}

// DefaultRemoteTimeout bounds a call to a remote tokenizer.
const DefaultRemoteTimeout = 5 * time.Second

// Bounds of a RemoteTokenizer's cache: entries and tokens held.
const (
	remoteCacheEntries = 4096
	remoteCacheTokens  = 8 << 20
)

// RemoteTokenizer tokenizes prompts with a vLLM server's render API
// (POST /v1/completions/render, /v1/chat/completions/render), so that the
// tokens are the engine's whatever its model; answers are cached (by the
// prompt, bounded). It is the fallback of a model without a local
// tokenizer: the local one stays the fast path.
type RemoteTokenizer struct {
	base    string
	timeout time.Duration
	client  *http.Client

	mu     sync.Mutex
	lru    *list.List // of *remoteEntry, most recent first
	byKey  map[uint64]*list.Element
	tokens int
}

type remoteEntry struct {
	key uint64
	ids []uint32
}

// NewRemoteTokenizer checks cfg and returns its tokenizer.
func NewRemoteTokenizer(cfg VLLMConfig) (*RemoteTokenizer, error) {
	base := strings.TrimRight(cfg.Base(), "/")
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return nil, fmt.Errorf("url: %q is not an http:// or https:// URL", cfg.Base())
	}
	timeout := DefaultRemoteTimeout
	if cfg.Timeout != "" {
		d, err := time.ParseDuration(cfg.Timeout)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("timeout: %q is not a positive duration", cfg.Timeout)
		}
		timeout = d
	}
	return &RemoteTokenizer{base: base, timeout: timeout, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second}},
		lru: list.New(), byKey: map[uint64]*list.Element{}}, nil
}

// Tokenize appends req's prompt tokens as the server renders them to dst.
func (r *RemoteTokenizer) Tokenize(ctx context.Context, dst []uint32, req *scheduling.Request) ([]uint32, error) {
	var path string
	body := map[string]any{"model": req.Model}
	switch {
	case req.Body.API.Chat():
		msgs := make([]map[string]string, len(req.Body.Messages))
		for i, m := range req.Body.Messages {
			msgs[i] = map[string]string{"role": m.Role, "content": m.Content}
		}
		path, body["messages"], body["add_generation_prompt"] = "/v1/chat/completions/render", msgs, true
	case req.Body.API == openai.APICompletions:
		path, body["prompt"] = "/v1/completions/render", req.Body.Prompt
	default:
		return dst, ErrNoPrompt
	}
	payload, err := json.Marshal(body)
	if err != nil {
		return dst, err
	}
	d := xxhash.New()
	_, _ = d.WriteString(path)
	_, _ = d.Write(payload)
	key := d.Sum64()
	if ids, ok := r.cached(key); ok {
		return append(dst, ids...), nil
	}
	ids, err := r.call(ctx, path, payload, req.Body.API == openai.APICompletions)
	if err != nil {
		return dst, err
	}
	r.keep(key, ids)
	return append(dst, ids...), nil
}

// call posts a render request and decodes its token ids (a completions
// answer is a list of one).
func (r *RemoteTokenizer) call(ctx context.Context, path string, payload []byte, list bool) ([]uint32, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+path, bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", r.base+path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", r.base+path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("render %s: %s: %.200s", r.base+path, resp.Status, b)
	}
	type rendered struct {
		TokenIDs []uint32 `json:"token_ids"`
	}
	if list {
		var out []rendered
		if err := json.Unmarshal(b, &out); err != nil || len(out) == 0 {
			return nil, fmt.Errorf("render %s: not a list of token ids: %.200s", r.base+path, b)
		}
		return out[0].TokenIDs, nil
	}
	var out rendered
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("render %s: not token ids: %.200s", r.base+path, b)
	}
	return out.TokenIDs, nil
}

func (r *RemoteTokenizer) cached(key uint64) ([]uint32, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.byKey[key]
	if !ok {
		return nil, false
	}
	r.lru.MoveToFront(e)
	return e.Value.(*remoteEntry).ids, true
}

func (r *RemoteTokenizer) keep(key uint64, ids []uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.byKey[key]; ok || len(ids) > remoteCacheTokens {
		return
	}
	r.byKey[key] = r.lru.PushFront(&remoteEntry{key: key, ids: ids})
	r.tokens += len(ids)
	for r.lru.Len() > remoteCacheEntries || r.tokens > remoteCacheTokens {
		old := r.lru.Remove(r.lru.Back()).(*remoteEntry)
		delete(r.byKey, old.key)
		r.tokens -= len(old.ids)
	}
}
