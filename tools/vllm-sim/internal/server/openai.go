package server

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// Handler returns the pod's HTTP handler. The APIs of the runner the pod
// does not run answer as vLLM's do (unsupported).
func (p *Pod) Handler() http.Handler {
	gen := func(api openai.API, name string) http.HandlerFunc {
		if p.pooling() {
			return unsupported(api, name)
		}
		return func(w http.ResponseWriter, r *http.Request) { p.generate(w, r, api) }
	}
	pool := func(h http.HandlerFunc, name string) http.HandlerFunc {
		if !p.pooling() {
			return unsupported(apiPooling, name)
		}
		return h
	}
	countTokens := p.countTokens
	if p.pooling() {
		countTokens = unsupported(openai.APIMessagesCountTokens, "Messages")
	}
	score, rerank := pool(p.score, "Score"), pool(p.rerank, "Rerank (Score)")
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", p.auth(gen(openai.APICompletions, "Completions")))
	mux.HandleFunc("POST /v1/chat/completions", p.auth(gen(openai.APIChatCompletions, "Chat Completions")))
	mux.HandleFunc("POST /v1/messages", p.auth(gen(openai.APIMessages, "Messages")))
	mux.HandleFunc("POST /v1/messages/count_tokens", p.auth(countTokens))
	// not under --api-key: vLLM asks for the key only on paths under /v1
	mux.HandleFunc("POST /inference/v1/generate", gen(openai.APIGenerate, "generate tokens"))
	mux.HandleFunc("POST /v1/embeddings", p.auth(pool(p.embeddings, "Embeddings")))
	mux.HandleFunc("POST /pooling", pool(p.pool, "Pooling"))
	mux.HandleFunc("POST /score", score)
	mux.HandleFunc("POST /v1/score", p.auth(score))
	mux.HandleFunc("POST /rerank", rerank)
	mux.HandleFunc("POST /v1/rerank", p.auth(rerank))
	mux.HandleFunc("POST /v2/rerank", rerank)
	mux.HandleFunc("GET /v1/models", p.auth(p.models))
	mux.HandleFunc("POST /tokenize", p.tokenize)
	mux.HandleFunc("POST /detokenize", p.detokenize)
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

// auth requires the API key, when one is configured, as
// "Authorization: Bearer <key>" or as Anthropic's "x-api-key: <key>". A
// refusal is in the error shape of the API at the request's path.
func (p *Pod) auth(h http.HandlerFunc) http.HandlerFunc {
	if p.cfg.APIKey == "" {
		return h
	}
	bearer, key := []byte("Bearer "+p.cfg.APIKey), []byte(p.cfg.APIKey)
	return func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), bearer) != 1 &&
			subtle.ConstantTimeCompare([]byte(r.Header.Get("X-Api-Key")), key) != 1 {
			api, _ := openai.APIOfPath(r.URL.Path)
			writeAPIError(w, api, http.StatusUnauthorized, "Unauthorized")
			return
		}
		h(w, r)
	}
}

// samplingParams are the members a completions or chat request has at its
// top level, and a generate request in its sampling_params.
type samplingParams struct {
	MaxTokens *int   `json:"max_tokens"`
	Seed      *int64 `json:"seed"`
	N         *int   `json:"n"`
}

// openAIRequest holds the fields of a completions, chat or generate
// request the simulator acts on beyond what openai.Parse reads.
type openAIRequest struct {
	samplingParams
	MaxCompletionTokens *int `json:"max_completion_tokens"`
	StreamOptions       *struct {
		IncludeUsage *bool `json:"include_usage"`
	} `json:"stream_options"`
	// RawSamplingParams and RequestID are a generate request's. The params
	// are decoded once openai.Parse has checked them (an object, its
	// max_tokens a count), so that a wrong type is refused with Parse's
	// message naming the member.
	RawSamplingParams json.RawMessage `json:"sampling_params"`
	RequestID         string          `json:"request_id"`
}

// generation is what a request asks the engine for, and how to answer.
type generation struct {
	model, adapter string
	// requestID is the id the client gave its response ("" for one of the
	// pod's).
	requestID    string
	prompt       []uint32
	maxTokens    int
	seed         uint64
	stream       bool
	includeUsage bool
}

// requestError is a request refused: its HTTP status and message.
type requestError struct {
	status int
	msg    string
}

func badRequest(msg string) *requestError {
	return &requestError{status: http.StatusBadRequest, msg: msg}
}

func unknownModel(model string) *requestError {
	return &requestError{http.StatusNotFound, fmt.Sprintf("The model `%s` does not exist.", model)}
}

// generate serves the APIs that generate tokens (completions, chat
// completions, Messages, vLLM's token-in, token-out generate): faults, then
// the request's checks, then the engine, answered in the API's shape.
func (p *Pod) generate(w http.ResponseWriter, r *http.Request, api openai.API) {
	body, ok := p.admitBody(w, r, api)
	if !ok {
		return
	}
	g, rerr := p.prepare(api, body)
	if rerr != nil {
		writeAPIError(w, api, rerr.status, rerr.msg)
		return
	}
	id := p.newID()
	seq, err := p.engine.Submit(engine.Request{ID: id, Adapter: g.adapter, Prompt: g.prompt, MaxTokens: g.maxTokens, Chat: api.Chat(), Seed: g.seed})
	if err != nil {
		writeAPIError(w, api, http.StatusBadRequest, err.Error())
		return
	}
	if g.requestID != "" {
		id = g.requestID
	}
	out := &output{pod: p, api: api, model: g.model, id: responseIDPrefix(api) + id, seq: seq, created: time.Now().Unix()}
	switch {
	case api == openai.APIGenerate && g.stream:
		out.streamTokens(w, r, g.includeUsage)
	case api == openai.APIGenerate:
		out.completeTokens(w, r)
	case api.Anthropic() && g.stream:
		out.streamMessage(w, r)
	case api.Anthropic():
		out.completeMessage(w, r)
	case g.stream:
		out.stream(w, r, g.includeUsage)
	default:
		out.complete(w, r)
	}
}

// admit lets a request bound for the engine through the injected faults:
// a failure is answered at once (in api's error shape), then the extra
// latency is waited out. It returns false when the request was answered
// or its client went away.
func (p *Pod) admit(w http.ResponseWriter, r *http.Request, api openai.API) bool {
	f := p.faults.Load()
	if status := f.inject(); status != 0 {
		writeAPIError(w, api, status, injectedMessage(status))
		return false
	}
	if d := f.ExtraLatency.Std(); d > 0 {
		select {
		case <-time.After(p.clock.Wall(d)):
		case <-r.Context().Done():
			return false
		}
	}
	return true
}

// prepare checks a generating request's body and reads what the engine
// needs from it. An Anthropic body has none of the OpenAI-only members
// (stream_options, seed, n); vLLM ignores them there, as prepare does. A
// generate request has max_tokens, seed and n in its sampling_params (at
// its top level they are ignored, as vLLM ignores them), its prompt is its
// token_ids, and it may name its response (request_id).
func (p *Pod) prepare(api openai.API, body []byte) (generation, *requestError) {
	var oa openAIRequest
	if !api.Anthropic() {
		if err := json.Unmarshal(body, &oa); err != nil {
			return generation{}, badRequest("invalid request body: " + err.Error())
		}
	}
	parsed, err := openai.Parse(api, body)
	if err != nil {
		return generation{}, badRequest(err.Error())
	}
	sp, limits := oa.samplingParams, []*int{oa.MaxTokens, oa.MaxCompletionTokens}
	switch {
	case api.Anthropic():
		limits = []*int{&parsed.MaxTokens} // required: Parse checked it is there
	case api == openai.APIGenerate:
		// required, and an object: Parse checked
		sp = samplingParams{}
		if err := json.Unmarshal(oa.RawSamplingParams, &sp); err != nil {
			return generation{}, badRequest("invalid sampling_params: " + err.Error())
		}
		limits = []*int{sp.MaxTokens}
	}
	model, adapter, ok := p.resolveModel(parsed.Model)
	if !ok {
		return generation{}, unknownModel(parsed.Model)
	}
	if sp.N != nil && *sp.N != 1 {
		return generation{}, badRequest("only n=1 is supported")
	}
	// vLLM's generate request has no such check
	if oa.StreamOptions != nil && !parsed.Stream && api != openai.APIGenerate {
		return generation{}, badRequest("Stream options can only be defined when `stream=True`.")
	}
	g := generation{model: model, adapter: adapter, prompt: p.promptTokens(api, parsed), stream: parsed.Stream}
	if api == openai.APIGenerate {
		g.requestID = oa.RequestID
	}
	for _, v := range limits {
		if v != nil {
			if *v < 1 {
				return generation{}, badRequest(fmt.Sprintf("max_tokens must be at least 1, got %d.", *v))
			}
			g.maxTokens = *v
		}
	}
	g.seed = p.cfg.Seed ^ xxhash.Sum64(tokenBytes(g.prompt))
	if sp.Seed != nil {
		g.seed = p.cfg.Seed ^ uint64(*sp.Seed)
	}
	g.includeUsage = oa.StreamOptions != nil && (oa.StreamOptions.IncludeUsage == nil || *oa.StreamOptions.IncludeUsage)
	return g, nil
}

// responseIDPrefix is how the ids of api's responses begin.
func responseIDPrefix(api openai.API) string {
	switch api {
	case openai.APIChatCompletions:
		return "chatcmpl-"
	case openai.APIMessages:
		return "msg_"
	case openai.APIGenerate:
		return "generate-tokens-"
	}
	return "cmpl-"
}

// readBody reads a request body, bounded by maxBodyBytes; on failure it
// answers the request (in api's error shape) and returns false.
func readBody(w http.ResponseWriter, r *http.Request, api openai.API) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		writeAPIError(w, api, http.StatusBadRequest, "could not read the request body: "+err.Error())
		return nil, false
	}
	return body, true
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

// promptTokens tokenizes a request: token-id prompts (and a generate
// request's token_ids) as given, text with the built-in tokenizer, chat
// messages (and a Messages request's, its system prompt first) through the
// Llama 3 chat template.
func (p *Pod) promptTokens(api openai.API, req openai.Request) []uint32 {
	if !api.Chat() {
		if len(req.TokenIDs) > 0 {
			return req.TokenIDs
		}
		return p.encode(req.Prompt)
	}
	msgs := make([]tokenizer.Message, len(req.Messages))
	for i, m := range req.Messages {
		msgs[i] = tokenizer.Message{Role: m.Role, Content: m.Content}
	}
	return p.encode(p.tmpl.Apply(msgs, true))
}

// encode tokenizes text with the built-in tokenizer, and teaches the
// process's vocabulary its pieces, so that /detokenize turns its ids back
// into it.
func (p *Pod) encode(text string) []uint32 {
	ids := p.tok.Encode(nil, text)
	builtinVocab.Learn(text, ids)
	return ids
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

// result waits for the sequence to finish and returns its progress. ok is
// false when the client went away, or when the engine failed the sequence
// (which result has answered).
func (o *output) result(w http.ResponseWriter, r *http.Request) (pr engine.Progress, ok bool) {
	for {
		if pr, ok = o.wait(r, pr.Generated); !ok {
			return pr, false
		}
		if pr.Done {
			break
		}
	}
	if pr.Err != nil {
		writeAPIError(w, o.api, http.StatusInternalServerError, pr.Err.Error())
		return pr, false
	}
	return pr, true
}

// text is the text of the sequence's first n output tokens.
func (o *output) text(n int) []byte {
	var text []byte
	for i := range n {
		text = appendTokenText(text, o.seq.Seed(), i)
	}
	return text
}

// complete answers a completions or chat request in OpenAI's shape.
func (o *output) complete(w http.ResponseWriter, r *http.Request) {
	pr, ok := o.result(w, r)
	if !ok {
		return
	}
	text := o.text(pr.Generated)
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

// stream writes a completions or chat response as server-sent events:
// one chunk per token (the last carrying finish_reason), then the usage
// chunk when asked for, then [DONE].
func (o *output) stream(w http.ResponseWriter, r *http.Request, includeUsage bool) {
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
	o.pump(w, r, func(buf []byte, sent int, pr engine.Progress) []byte {
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
			buf = o.appendStreamEnd(buf, prefix, pr, includeUsage)
		}
		return buf
	})
}

// pump streams a sequence's output as server-sent events, paced by the
// engine: each time tokens [sent, pr.Generated) are new, or the sequence
// is done, render appends their events (and the closing ones once
// pr.Done) to buf, and they are written and flushed. A client that goes
// away aborts the sequence; an engine that goes down cuts the connection,
// as a crashed server's would be.
func (o *output) pump(w http.ResponseWriter, r *http.Request, render func(buf []byte, sent int, pr engine.Progress) []byte) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	rc := http.NewResponseController(w)
	buf := make([]byte, 0, 512)
	sent := 0
	for {
		pr, ok := o.wait(r, sent)
		if !ok {
			return
		}
		if pr.Err != nil {
			panic(http.ErrAbortHandler)
		}
		buf = render(buf[:0], sent, pr)
		sent = pr.Generated
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

// appendStreamEnd appends the end of an OpenAI-shaped stream: the usage
// chunk when the client asked for it (prefix opens each chunk), then
// [DONE].
func (o *output) appendStreamEnd(buf, prefix []byte, pr engine.Progress, includeUsage bool) []byte {
	if includeUsage {
		buf = append(buf, prefix...)
		buf = append(buf, `,"choices":[],"usage":`...)
		buf = o.appendUsage(buf, pr)
		buf = append(buf, "}\n\n"...)
	}
	return append(buf, "data: [DONE]\n\n"...)
}

func (p *Pod) tokenize(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r, openai.APICompletions)
	if !ok {
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

// detokenize answers vLLM's /detokenize: {"model"?, "tokens": [ids]} ->
// {"prompt": text}, the text of the ids. The ids of every text the
// process has tokenized (prompts, /tokenize) and of the words the pods
// generate decode exactly; an id of the built-in tokenizer's it has not
// seen decodes as "<|id_N|>" (see the vocab package).
func (p *Pod) detokenize(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r, apiPooling)
	if !ok {
		return
	}
	var req struct {
		Model  string   `json:"model"`
		Tokens *[]int64 `json:"tokens"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid request body: "+err.Error())
		return
	}
	if req.Tokens == nil {
		writeError(w, http.StatusBadRequest, "tokens: required")
		return
	}
	if _, _, ok := p.resolveModel(req.Model); !ok {
		e := unknownModel(req.Model)
		writeError(w, e.status, e.msg)
		return
	}
	ids, rerr := tokenIDs(*req.Tokens)
	if rerr != nil {
		writeError(w, rerr.status, rerr.msg)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"prompt": string(builtinVocab.AppendText(nil, ids))})
}

// render answers vLLM's render API: a request's prompt tokens as the
// engine would see them, for api (completions: a list of one result; chat:
// the result).
func (p *Pod) render(api openai.API) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, ok := readBody(w, r, api)
		if !ok {
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

// writeError answers an error in vLLM's OpenAI shape, its type vLLM's for
// the status.
func writeError(w http.ResponseWriter, status int, msg string) {
	typ := "BadRequestError"
	switch status {
	case http.StatusUnauthorized:
		typ = "AuthenticationError"
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

// writeAPIError answers an error in the shape of api: Anthropic's
// ({"type": "error", "error": {"type", "message"}}) for the Messages
// APIs, vLLM's OpenAI shape for the others (and for no API, 0).
func writeAPIError(w http.ResponseWriter, api openai.API, status int, msg string) {
	if !api.Anthropic() {
		writeError(w, status, msg)
		return
	}
	e := openai.Error{Status: status, Message: msg, Anthropic: true}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(e.Body())
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
