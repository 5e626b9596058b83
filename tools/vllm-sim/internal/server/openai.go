package server

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hermod/hermod/libs/jsonenc"
	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/libs/tokenizer"
	"github.com/hermod/hermod/tools/vllm-sim/internal/engine"
)

// maxBodyBytes bounds request bodies.
const maxBodyBytes = 16 << 20

// Handler returns the pod's HTTP handler.
func (p *Pod) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", p.auth(func(w http.ResponseWriter, r *http.Request) { p.generate(w, r, openai.APICompletions) }))
	mux.HandleFunc("POST /v1/chat/completions", p.auth(func(w http.ResponseWriter, r *http.Request) { p.generate(w, r, openai.APIChatCompletions) }))
	mux.HandleFunc("GET /v1/models", p.auth(p.models))
	mux.HandleFunc("POST /tokenize", p.tokenize)
	mux.HandleFunc("POST /v1/completions/render", p.render(openai.APICompletions))
	mux.HandleFunc("POST /v1/chat/completions/render", p.render(openai.APIChatCompletions))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"version": "0.11.0+vllm-sim"})
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(p.metrics.Registry(), promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /sim/faults", p.getFaults)
	mux.HandleFunc("PUT /sim/faults", p.putFaults)
	mux.HandleFunc("POST /sim/crash", p.crash)
	return mux
}

// auth requires the API key, when one is configured.
func (p *Pod) auth(h http.HandlerFunc) http.HandlerFunc {
	if p.cfg.APIKey == "" {
		return h
	}
	want := "Bearer " + p.cfg.APIKey
	return func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte(want)) != 1 {
			writeErrorType(w, http.StatusUnauthorized, "AuthenticationError", "Unauthorized")
			return
		}
		h(w, r)
	}
}

// openAIRequest holds the fields of a completions / chat request the
// simulator acts on (the prompt and messages are read by openai.Parse).
type openAIRequest struct {
	Model               string `json:"model"`
	MaxTokens           *int   `json:"max_tokens"`
	MaxCompletionTokens *int   `json:"max_completion_tokens"`
	Stream              bool   `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage *bool `json:"include_usage"`
	} `json:"stream_options"`
	Seed *int64 `json:"seed"`
	N    *int   `json:"n"`
}

func (p *Pod) generate(w http.ResponseWriter, r *http.Request, api openai.API) {
	if status := p.faults.Load().inject(); status != 0 {
		writeError(w, status, injectedMessage(status))
		return
	}
	if d := p.faults.Load().ExtraLatency.Std(); d > 0 {
		select {
		case <-time.After(p.clock.Wall(d)):
		case <-r.Context().Done():
			return
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		writeError(w, http.StatusBadRequest, "could not read the request body: "+err.Error())
		return
	}
	var oa openAIRequest
	if err := json.Unmarshal(body, &oa); err != nil {
		writeError(w, http.StatusBadRequest, "invalid request body: "+err.Error())
		return
	}
	parsed, err := openai.Parse(api, body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	model, adapter, ok := p.resolveModel(oa.Model)
	if !ok {
		writeErrorType(w, http.StatusNotFound, "NotFoundError", fmt.Sprintf("The model `%s` does not exist.", oa.Model))
		return
	}
	if oa.N != nil && *oa.N != 1 {
		writeError(w, http.StatusBadRequest, "only n=1 is supported")
		return
	}
	if oa.StreamOptions != nil && !oa.Stream {
		writeError(w, http.StatusBadRequest, "Stream options can only be defined when `stream=True`.")
		return
	}
	prompt := p.promptTokens(api, parsed)
	maxTokens := 0
	for _, v := range []*int{oa.MaxTokens, oa.MaxCompletionTokens} {
		if v != nil {
			if *v < 1 {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("max_tokens must be at least 1, got %d.", *v))
				return
			}
			maxTokens = *v
		}
	}
	seed := p.cfg.Seed ^ xxhash.Sum64(tokenBytes(prompt))
	if oa.Seed != nil {
		seed = p.cfg.Seed ^ uint64(*oa.Seed)
	}
	id := fmt.Sprintf("%x%016x", p.reqSeq.Add(1), rand.Uint64())
	seq, err := p.engine.Submit(engine.Request{ID: id, Adapter: adapter, Prompt: prompt, MaxTokens: maxTokens, Chat: api == openai.APIChatCompletions, Seed: seed})
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	out := &output{pod: p, api: api, model: model, seq: seq, created: time.Now().Unix()}
	if api == openai.APIChatCompletions {
		out.id = "chatcmpl-" + id
	} else {
		out.id = "cmpl-" + id
	}
	if oa.Stream {
		includeUsage := oa.StreamOptions != nil && (oa.StreamOptions.IncludeUsage == nil || *oa.StreamOptions.IncludeUsage)
		out.stream(w, r, includeUsage)
		return
	}
	out.complete(w, r)
}

// resolveModel maps a requested model to the name responses carry and the
// LoRA adapter ("" for the base model). An empty model means the base.
func (p *Pod) resolveModel(m string) (name, adapter string, ok bool) {
	if m == "" {
		return p.cfg.ServedNames[0], "", true
	}
	for _, n := range p.cfg.ServedNames {
		if n == m {
			return m, "", true
		}
	}
	if _, ok := p.cfg.Adapters[m]; ok {
		return m, m, true
	}
	return "", "", false
}

// promptTokens tokenizes a request: token-id prompts as given, text with the
// built-in tokenizer, chat messages through the Llama 3 chat template.
func (p *Pod) promptTokens(api openai.API, req openai.Request) []uint32 {
	if api == openai.APICompletions {
		if len(req.TokenIDs) > 0 {
			return req.TokenIDs
		}
		return p.tok.Encode(nil, req.Prompt)
	}
	msgs := make([]tokenizer.Message, len(req.Messages))
	for i, m := range req.Messages {
		msgs[i] = tokenizer.Message{Role: m.Role, Content: m.Content}
	}
	return p.tok.Encode(nil, p.tmpl.Apply(msgs, true))
}

func tokenBytes(ids []uint32) []byte {
	b := make([]byte, 0, 4*len(ids))
	for _, id := range ids {
		b = append(b, byte(id), byte(id>>8), byte(id>>16), byte(id>>24))
	}
	return b
}

// output renders one request's response.
type output struct {
	pod     *Pod
	api     openai.API
	model   string
	id      string
	created int64
	seq     *engine.Sequence
}

// wait blocks until the sequence progresses past have tokens, finishes, or
// the client goes away (which aborts it).
func (o *output) wait(r *http.Request, have int) (engine.Progress, bool) {
	for {
		pr := o.seq.Progress()
		if pr.Done || pr.Generated > have {
			return pr, true
		}
		select {
		case <-o.seq.Updates():
		case <-r.Context().Done():
			o.pod.engine.Abort(o.seq)
			return pr, false
		}
	}
}

func (o *output) complete(w http.ResponseWriter, r *http.Request) {
	var pr engine.Progress
	for {
		var ok bool
		if pr, ok = o.wait(r, pr.Generated); !ok {
			return
		}
		if pr.Done {
			break
		}
	}
	if pr.Err != nil {
		writeErrorType(w, http.StatusInternalServerError, "InternalServerError", pr.Err.Error())
		return
	}
	var text []byte
	for i := range pr.Generated {
		text = appendTokenText(text, o.seq.Seed(), i)
	}
	b := make([]byte, 0, len(text)+512)
	b = append(b, `{"id":`...)
	b = jsonenc.AppendString(b, o.id)
	if o.api == openai.APIChatCompletions {
		b = append(b, `,"object":"chat.completion","created":`...)
		b = strconv.AppendInt(b, o.created, 10)
		b = append(b, `,"model":`...)
		b = jsonenc.AppendString(b, o.model)
		b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
		b = jsonenc.AppendString(b, string(text))
		b = append(b, `,"tool_calls":[]},"logprobs":null,"finish_reason":`...)
	} else {
		b = append(b, `,"object":"text_completion","created":`...)
		b = strconv.AppendInt(b, o.created, 10)
		b = append(b, `,"model":`...)
		b = jsonenc.AppendString(b, o.model)
		b = append(b, `,"choices":[{"index":0,"text":`...)
		b = jsonenc.AppendString(b, string(text))
		b = append(b, `,"logprobs":null,"finish_reason":`...)
	}
	b = jsonenc.AppendString(b, pr.FinishReason)
	b = append(b, `,"stop_reason":null}],"usage":`...)
	b = o.appendUsage(b, pr)
	b = append(b, "}\n"...)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

func (o *output) appendUsage(b []byte, pr engine.Progress) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(pr.PromptTokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(pr.PromptTokens+pr.Generated), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(pr.Generated), 10)
	if o.pod.cfg.PromptTokensDetails && pr.CachedTokens > 0 {
		b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
		b = strconv.AppendInt(b, int64(pr.CachedTokens), 10)
		b = append(b, '}')
	}
	return append(b, '}')
}

// stream writes the response as server-sent events: one chunk per token
// (the last carrying finish_reason), then the usage chunk when asked for,
// then [DONE].
func (o *output) stream(w http.ResponseWriter, r *http.Request, includeUsage bool) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	rc := http.NewResponseController(w)
	chat := o.api == openai.APIChatCompletions
	// Every chunk is prefix + content + middle + finish_reason + suffix.
	var prefix []byte
	prefix = append(prefix, `data: {"id":`...)
	prefix = jsonenc.AppendString(prefix, o.id)
	if chat {
		prefix = append(prefix, `,"object":"chat.completion.chunk","created":`...)
	} else {
		prefix = append(prefix, `,"object":"text_completion","created":`...)
	}
	prefix = strconv.AppendInt(prefix, o.created, 10)
	prefix = append(prefix, `,"model":`...)
	prefix = jsonenc.AppendString(prefix, o.model)
	choice := `,"choices":[{"index":0,"text":`
	middle := `,"logprobs":null,"finish_reason":`
	if chat {
		choice = `,"choices":[{"index":0,"delta":{"content":`
		middle = `},"logprobs":null,"finish_reason":`
	}
	buf := make([]byte, 0, 512)
	sent := 0
	var pr engine.Progress
	for {
		var ok bool
		if pr, ok = o.wait(r, sent); !ok {
			return
		}
		if pr.Err != nil {
			// the engine went down mid-stream: the connection is cut, as a
			// crashed server's would be
			panic(http.ErrAbortHandler)
		}
		buf = buf[:0]
		if chat && sent == 0 && pr.Generated > 0 {
			// the chunk announcing the assistant role goes out with the first
			// token, as vLLM's does (a first byte before it would fake TTFT)
			buf = append(buf, prefix...)
			buf = append(buf, `,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
		}
		for ; sent < pr.Generated; sent++ {
			buf = append(buf, prefix...)
			buf = append(buf, choice...)
			buf = jsonenc.AppendString(buf, string(appendTokenText(nil, o.seq.Seed(), sent)))
			buf = append(buf, middle...)
			if pr.Done && sent == pr.Generated-1 {
				buf = jsonenc.AppendString(buf, pr.FinishReason)
			} else {
				buf = append(buf, "null"...)
			}
			buf = append(buf, ",\"stop_reason\":null}]}\n\n"...)
		}
		if pr.Done {
			if includeUsage {
				buf = append(buf, prefix...)
				buf = append(buf, `,"choices":[],"usage":`...)
				buf = o.appendUsage(buf, pr)
				buf = append(buf, "}\n\n"...)
			}
			buf = append(buf, "data: [DONE]\n\n"...)
		}
		if _, err := w.Write(buf); err != nil {
			o.pod.engine.Abort(o.seq)
			return
		}
		_ = rc.Flush()
		if pr.Done {
			return
		}
	}
}

func (p *Pod) models(w http.ResponseWriter, _ *http.Request) {
	type card struct {
		ID          string  `json:"id"`
		Object      string  `json:"object"`
		Created     int64   `json:"created"`
		OwnedBy     string  `json:"owned_by"`
		Root        string  `json:"root"`
		Parent      *string `json:"parent"`
		MaxModelLen int     `json:"max_model_len"`
	}
	created := p.started.Unix()
	var data []card
	for _, n := range p.cfg.ServedNames {
		data = append(data, card{ID: n, Object: "model", Created: created, OwnedBy: "vllm", Root: p.cfg.ModelPath, MaxModelLen: p.cfg.Engine.MaxModelLen})
	}
	base := p.cfg.ServedNames[0]
	for _, a := range p.cfg.Engine.Adapters {
		data = append(data, card{ID: a, Object: "model", Created: created, OwnedBy: "vllm", Root: p.cfg.Adapters[a], Parent: &base, MaxModelLen: p.cfg.Engine.MaxModelLen})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

func (p *Pod) tokenize(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		writeError(w, http.StatusBadRequest, "could not read the request body: "+err.Error())
		return
	}
	var probe struct {
		Messages json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &probe); err != nil {
		writeError(w, http.StatusBadRequest, "invalid request body: "+err.Error())
		return
	}
	api := openai.APICompletions
	if probe.Messages != nil {
		api = openai.APIChatCompletions
	}
	parsed, err := openai.Parse(api, body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	tokens := p.promptTokens(api, parsed)
	writeJSON(w, http.StatusOK, map[string]any{"count": len(tokens), "max_model_len": p.cfg.Engine.MaxModelLen, "tokens": tokens})
}

// render answers vLLM's render API: a request's prompt tokens as the
// engine would see them, for api (completions: a list of one result; chat:
// the result).
func (p *Pod) render(api openai.API) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
		if err != nil {
			writeError(w, http.StatusBadRequest, "could not read the request body: "+err.Error())
			return
		}
		parsed, err := openai.Parse(api, body)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		out := map[string]any{"token_ids": p.promptTokens(api, parsed)}
		if api == openai.APICompletions {
			writeJSON(w, http.StatusOK, []any{out})
			return
		}
		writeJSON(w, http.StatusOK, out)
	}
}

// errorBody is the OpenAI error shape.
type errorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    int     `json:"code"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, msg string) {
	typ := "BadRequestError"
	switch status {
	case http.StatusTooManyRequests:
		typ = "RateLimitError"
	case http.StatusServiceUnavailable:
		typ = "ServiceUnavailableError"
	case http.StatusInternalServerError:
		typ = "InternalServerError"
	case http.StatusNotFound:
		typ = "NotFoundError"
	}
	writeErrorType(w, status, typ, msg)
}

func writeErrorType(w http.ResponseWriter, status int, typ, msg string) {
	var e errorBody
	e.Error.Message, e.Error.Type, e.Error.Code = msg, typ, status
	writeJSON(w, status, e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func (p *Pod) crash(w http.ResponseWriter, r *http.Request) {
	down := 5 * time.Second
	if v := r.URL.Query().Get("down"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			writeError(w, http.StatusBadRequest, "down: must be a duration such as 5s")
			return
		}
		down = d
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"pod": p.cfg.Name, "down": down.String()})
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	go func() {
		if err := p.Crash(p.runContext(), down); err != nil && !errors.Is(err, context.Canceled) {
			p.log.Error("restart after a simulated crash failed", "error", err)
		}
	}()
}
