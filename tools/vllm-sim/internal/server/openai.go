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
	"unicode/utf8"

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
	MaxTokens   *int     `json:"max_tokens"`
	Seed        *int64   `json:"seed"`
	N           *int     `json:"n"`
	Temperature *float64 `json:"temperature"`
	// Logprobs is a count (completions, generate) or a boolean (chat).
	Logprobs json.RawMessage `json:"logprobs"`
}

// openAIRequest holds the fields of a completions, chat or generate
// request the simulator acts on beyond what openai.Parse reads.
type openAIRequest struct {
	samplingParams
	MaxCompletionTokens *int `json:"max_completion_tokens"`
	StreamOptions       *struct {
		IncludeUsage *bool `json:"include_usage"`
	} `json:"stream_options"`
	TopLogprobs json.RawMessage `json:"top_logprobs"`
	Tools       json.RawMessage `json:"tools"`
	ToolChoice  json.RawMessage `json:"tool_choice"`
	// RawSamplingParams and RequestID are a generate request's. The params
	// are decoded once openai.Parse has checked them (an object, its
	// max_tokens a count), so that a wrong type is refused with Parse's
	// message naming the member.
	RawSamplingParams json.RawMessage `json:"sampling_params"`
	RequestID         string          `json:"request_id"`
}

// anthropicRequest holds the fields of a Messages request the simulator
// acts on beyond what openai.Parse reads.
type anthropicRequest struct {
	Tools      json.RawMessage   `json:"tools"`
	ToolChoice json.RawMessage   `json:"tool_choice"`
	Messages   []json.RawMessage `json:"messages"`
}

// generation is what a request asks the engine for, and how to answer.
type generation struct {
	model, adapter string
	// requestID is the id the client gave its response ("" for one of the
	// pod's).
	requestID string
	prompt    []uint32
	maxTokens int
	// seeds are the seeds of the request's n outputs.
	seeds        []uint64
	stream       bool
	includeUsage bool
	// logprobs is how many top logprobs each output token gets
	// (noLogprobs: none asked).
	logprobs int
	tools    toolRequest
}

// maxNSequences is vLLM's VLLM_MAX_N_SEQUENCES default: the most outputs
// (n) a completions or chat request may ask for.
const maxNSequences = 16384

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
// the request's checks, then the engine, answered in the API's shape. A
// request for n outputs runs as n sequences of the engine, as vLLM runs n
// child requests; each output that is a tool call generates the call's
// tokens.
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
	out := &output{pod: p, api: api, model: g.model, created: time.Now().Unix(), logprobs: g.logprobs, choices: make([]choice, len(g.seeds))}
	reqs := make([]engine.Request, len(g.seeds))
	for i, seed := range g.seeds {
		reqs[i] = engine.Request{ID: id, Adapter: g.adapter, Prompt: g.prompt, MaxTokens: g.maxTokens, Chat: api.Chat(), Seed: seed}
		if i > 0 {
			reqs[i].ID = strconv.Itoa(i) + "_" + id // vLLM's child request ids
		}
		if call := p.newToolCall(g.tools, seed); call != nil {
			out.choices[i].call = call
			reqs[i].Output = call.ids
		}
	}
	seqs, err := p.engine.SubmitGroup(reqs)
	if err != nil {
		writeAPIError(w, api, http.StatusBadRequest, err.Error())
		return
	}
	for i, s := range seqs {
		out.choices[i].seq = s
	}
	if g.requestID != "" {
		id = g.requestID
	}
	out.id = responseIDPrefix(api) + id
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
// (stream_options, seed, n, logprobs); vLLM ignores them there, as prepare
// does. A generate request has max_tokens, seed, n and logprobs in its
// sampling_params (at its top level they are ignored, as vLLM ignores
// them), its prompt is its token_ids, and it may name its response
// (request_id). Chat and Messages requests may offer tools.
func (p *Pod) prepare(api openai.API, body []byte) (generation, *requestError) {
	var oa openAIRequest
	var ar anthropicRequest
	if !api.Anthropic() {
		if err := json.Unmarshal(body, &oa); err != nil {
			return generation{}, badRequest("invalid request body: " + err.Error())
		}
	}
	parsed, err := openai.Parse(api, body)
	if err != nil {
		return generation{}, badRequest(err.Error())
	}
	// after Parse, whose messages name the member at fault
	if api.Anthropic() {
		if err := json.Unmarshal(body, &ar); err != nil {
			return generation{}, badRequest("invalid request body: " + err.Error())
		}
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
	// vLLM's generate request has no such check
	if oa.StreamOptions != nil && !parsed.Stream && api != openai.APIGenerate {
		return generation{}, badRequest("Stream options can only be defined when `stream=True`.")
	}
	g := generation{model: model, adapter: adapter, prompt: p.promptTokens(api, parsed), stream: parsed.Stream, logprobs: noLogprobs}
	var rerr *requestError
	if !api.Anthropic() {
		if g.logprobs, rerr = p.requestLogprobs(api, sp.Logprobs, oa.TopLogprobs); rerr != nil {
			return generation{}, rerr
		}
	}
	switch api {
	case openai.APIChatCompletions:
		if g.tools, rerr = p.openAITools(oa.Tools, oa.ToolChoice); rerr != nil {
			return generation{}, rerr
		}
		g.tools.pick(parsed.Messages, false)
	case openai.APIMessages:
		if g.tools, rerr = p.anthropicTools(ar.Tools, ar.ToolChoice); rerr != nil {
			return generation{}, rerr
		}
		g.tools.pick(parsed.Messages, g.tools.mode == toolsAuto && endsWithToolResult(ar.Messages))
	default:
		g.tools.call = -1
	}
	n := 1
	if !api.Anthropic() {
		if n, rerr = p.outputs(api, sp); rerr != nil {
			return generation{}, rerr
		}
	}
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
	// As in vLLM, output i of a request with a seed is seeded with seed+i.
	g.seeds = make([]uint64, n)
	for i := range g.seeds {
		g.seeds[i] = (p.cfg.Seed ^ xxhash.Sum64(tokenBytes(g.prompt))) + uint64(i)
		if sp.Seed != nil {
			g.seeds[i] = p.cfg.Seed ^ uint64(*sp.Seed+int64(i))
		}
	}
	g.includeUsage = oa.StreamOptions != nil && (oa.StreamOptions.IncludeUsage == nil || *oa.StreamOptions.IncludeUsage)
	return g, nil
}

// outputs is a request's n, checked as vLLM checks it: at least 1, at most
// VLLM_MAX_N_SEQUENCES (for a generate request, at most --max-num-seqs),
// and 1 for greedy sampling (temperature 0).
func (p *Pod) outputs(api openai.API, sp samplingParams) (int, *requestError) {
	if sp.N == nil {
		return 1, nil
	}
	n := *sp.N
	switch {
	case n < 1:
		return 0, badRequest(fmt.Sprintf("n must be at least 1, got %d.", n))
	case api == openai.APIGenerate && n > p.cfg.Engine.MaxNumSeqs:
		return 0, badRequest(fmt.Sprintf("sampling_params.n must be at most the server's max_num_seqs (%d), got %d.", p.cfg.Engine.MaxNumSeqs, n))
	case n > maxNSequences:
		return 0, badRequest(fmt.Sprintf("n must be at most %d, got %d. To increase this limit, set the VLLM_MAX_N_SEQUENCES environment variable.", maxNSequences, n))
	case n > 1 && sp.Temperature != nil && *sp.Temperature < 1e-5:
		return 0, badRequest(fmt.Sprintf("n must be 1 when using greedy sampling, got %d.", n))
	}
	return n, nil
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
	// choices are the request's n outputs, in index order.
	choices []choice
	// logprobs is how many top logprobs each token gets (noLogprobs: none).
	logprobs int
	cands    []engine.Candidate // scratch of the logprobs
	scratch  []byte             // scratch of a stream's chunks
}

// choice is one output of a response: its engine sequence and, when the
// model answers with a tool call, the call.
type choice struct {
	seq  *engine.Sequence
	call *toolCall
}

// piece is the text of output token i.
func (c *choice) piece(i int) string {
	if c.call != nil {
		return c.call.pieces[i]
	}
	return engine.OutputText(c.seq.Seed(), i)
}

// text is the text of the first n output tokens.
func (c *choice) text(n int) string {
	if c.call != nil {
		return c.call.written(n)
	}
	var text []byte
	for i := range n {
		text = engine.AppendOutputText(text, c.seq.Seed(), i)
	}
	return string(text)
}

// sequences are the engine sequences of one request read together: a
// response's n outputs (which share one Updates channel) or a pooling
// request's inputs.
type sequences struct {
	eng  *engine.Engine
	seqs []*engine.Sequence
}

func (ss sequences) abort() {
	for _, s := range ss.seqs {
		ss.eng.Abort(s)
	}
}

// next fills prs with the sequences' progress once one differs from last
// (more tokens, or done) or every one is done. It returns false when the
// client went away first, which aborts them.
func (ss sequences) next(r *http.Request, last, prs []engine.Progress) bool {
	for {
		changed, waitOn := false, -1
		for i, s := range ss.seqs {
			prs[i] = s.Progress()
			if prs[i].Generated != last[i].Generated || prs[i].Done != last[i].Done {
				changed = true
			}
			if !prs[i].Done && waitOn < 0 {
				waitOn = i
			}
		}
		if changed || waitOn < 0 {
			return true
		}
		select {
		case <-ss.seqs[waitOn].Updates():
		case <-r.Context().Done():
			ss.abort()
			return false
		}
	}
}

// done waits until every sequence is done and returns their progress. ok
// is false when the client went away, or when the engine failed a sequence
// (which done has answered, in api's error shape, through fail).
func (ss sequences) done(r *http.Request, fail func(err error)) (prs []engine.Progress, ok bool) {
	last, prs := make([]engine.Progress, len(ss.seqs)), make([]engine.Progress, len(ss.seqs))
	for !allDone(prs) {
		if !ss.next(r, last, prs) {
			return nil, false
		}
		last, prs = prs, last
	}
	for _, pr := range prs {
		if pr.Err != nil {
			ss.abort()
			fail(pr.Err)
			return nil, false
		}
	}
	return prs, true
}

func allDone(prs []engine.Progress) bool {
	for _, pr := range prs {
		if !pr.Done {
			return false
		}
	}
	return true
}

func (o *output) sequences() sequences {
	ss := sequences{eng: o.pod.engine, seqs: make([]*engine.Sequence, len(o.choices))}
	for i := range o.choices {
		ss.seqs[i] = o.choices[i].seq
	}
	return ss
}

// result waits for every output to finish and returns their progress. ok
// is false when the client went away, or when the engine failed a sequence
// (which result has answered).
func (o *output) result(w http.ResponseWriter, r *http.Request) ([]engine.Progress, bool) {
	return o.sequences().done(r, func(err error) {
		writeAPIError(w, o.api, http.StatusInternalServerError, err.Error())
	})
}

// complete answers a completions or chat request in OpenAI's shape: a
// choice per output, usage summed over them (the prompt counted once).
func (o *output) complete(w http.ResponseWriter, r *http.Request) {
	prs, ok := o.result(w, r)
	if !ok {
		return
	}
	chat := o.api == openai.APIChatCompletions
	b := make([]byte, 0, 512)
	b = append(b, `{"id":`...)
	b = jsonenc.AppendString(b, o.id)
	if chat {
		b = append(b, `,"object":"chat.completion","created":`...)
	} else {
		b = append(b, `,"object":"text_completion","created":`...)
	}
	b = strconv.AppendInt(b, o.created, 10)
	b = append(b, `,"model":`...)
	b = jsonenc.AppendString(b, o.model)
	b = append(b, `,"choices":[`...)
	for i := range o.choices {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		if chat {
			b = o.appendMessage(b, &o.choices[i], prs[i])
		} else {
			b = append(b, `,"text":`...)
			b = jsonenc.AppendString(b, o.choices[i].text(prs[i].Generated))
		}
		b = append(b, `,"logprobs":`...)
		b = o.appendLogprobs(b, &o.choices[i], 0, prs[i].Generated, 0)
		b = append(b, `,"finish_reason":`...)
		b = jsonenc.AppendString(b, o.choices[i].call.finishReason(prs[i]))
		b = append(b, `,"stop_reason":null}`...)
	}
	b = append(b, `],"usage":`...)
	b = o.appendUsage(b, prs)
	b = append(b, "}\n"...)
	writeBody(w, b)
}

// appendMessage appends a chat choice's message member. A tool call vLLM
// parsed is in tool_calls, with content "" when the request required a
// call or named the function (vLLM's content or "") and null for "auto"
// (its parser found no text before the call); a "required" or "auto" call
// cut short by max_tokens does not parse, and is content.
func (o *output) appendMessage(b []byte, c *choice, pr engine.Progress) []byte {
	b = append(b, `,"message":{"role":"assistant","content":`...)
	call := c.call
	switch {
	case call == nil || call.mode != toolsNamed && !call.complete(pr.Generated):
		b = jsonenc.AppendString(b, c.text(pr.Generated))
		return append(b, `,"tool_calls":[]}`...)
	case call.mode == toolsAuto:
		b = append(b, "null"...)
	default:
		b = append(b, `""`...)
	}
	b = append(b, `,"tool_calls":[{"id":`...)
	b = jsonenc.AppendString(b, call.id)
	b = append(b, `,"type":"function","function":{"name":`...)
	b = jsonenc.AppendString(b, call.name)
	b = append(b, `,"arguments":`...)
	b = jsonenc.AppendString(b, call.writtenArgs(pr.Generated))
	return append(b, "}}]}"...)
}

// appendLogprobs appends a choice's logprobs member for its output tokens
// [from, to) in the API's shape (null when the request asked for none);
// offset is where the tokens' text starts (completions' text_offset).
func (o *output) appendLogprobs(b []byte, c *choice, from, to, offset int) []byte {
	switch {
	case o.logprobs == noLogprobs:
		return append(b, "null"...)
	case o.api == openai.APIChatCompletions:
		return o.appendChatLogprobs(b, c, from, to)
	case o.api == openai.APIGenerate:
		return o.appendTokenLogprobs(b, c, from, to)
	}
	b, _ = o.appendCompletionLogprobs(b, c, from, to, offset)
	return b
}

// appendUsage appends the usage of a response's outputs: the prompt (and
// its cached part, as the first output's sequence found it) once, the
// tokens of every output.
func (o *output) appendUsage(b []byte, prs []engine.Progress) []byte {
	completion := 0
	for _, pr := range prs {
		completion += pr.Generated
	}
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(prs[0].PromptTokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(prs[0].PromptTokens+completion), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	if o.pod.cfg.PromptTokensDetails && prs[0].CachedTokens > 0 {
		b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
		b = strconv.AppendInt(b, int64(prs[0].CachedTokens), 10)
		b = append(b, '}')
	}
	return append(b, '}')
}

// stream writes a completions or chat response as server-sent events: one
// chunk per token of each output, in the order the engine produced them
// (the last of an output carrying its finish_reason), then the usage
// chunk when asked for, then [DONE]. A chat stream first announces the
// assistant's role for every output, with the first token (as vLLM sends
// it, so that the first byte is the first token). A tool call streams as
// vLLM's: a delta announcing the call (id, type, name) once its name is
// written, then the arguments as they are written; tokens that write
// neither send no chunk (unless it carries logprobs or the finish reason).
func (o *output) stream(w http.ResponseWriter, r *http.Request, includeUsage bool) {
	chat := o.api == openai.APIChatCompletions
	// Every chunk is prefix + its choice + "}\n\n".
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
	prefix = append(prefix, `,"choices":[{"index":`...)
	offsets := make([]int, len(o.choices)) // completions' text_offset
	started := false
	o.pump(w, r, func(buf []byte, sent []int, prs []engine.Progress) []byte {
		if chat && !started {
			started = true
			// the chunks announcing the assistant role go out with the first
			// token, as vLLM's do (a first byte before it would fake TTFT)
			for i := range o.choices {
				buf = append(buf, prefix...)
				buf = strconv.AppendInt(buf, int64(i), 10)
				buf = append(buf, `,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
			}
		}
		eachNewToken(sent, prs, func(i, t int) {
			c, pr := &o.choices[i], prs[i]
			last := pr.Done && t == pr.Generated-1
			offset := offsets[i]
			offsets[i] += utf8.RuneCountInString(c.piece(t))
			delta, ok := o.delta(c, t, chat)
			if !ok && !last && o.logprobs == noLogprobs {
				return
			}
			buf = append(buf, prefix...)
			buf = strconv.AppendInt(buf, int64(i), 10)
			buf = append(buf, delta...)
			buf = append(buf, `,"logprobs":`...)
			buf = o.appendLogprobs(buf, c, t, t+1, offset)
			buf = append(buf, `,"finish_reason":`...)
			if last {
				buf = jsonenc.AppendString(buf, c.call.finishReason(pr))
			} else {
				buf = append(buf, "null"...)
			}
			buf = append(buf, ",\"stop_reason\":null}]}\n\n"...)
		})
		if allDone(prs) {
			buf = o.appendStreamEnd(buf, prefix[:len(prefix)-len(`,"choices":[{"index":`)], prs, includeUsage)
		}
		return buf
	})
}

// eachNewToken calls f(i, t) for each new token t of each output i
// (tokens [sent[i], prs[i].Generated)): the first new token of every
// output, then the second, ..., as the engine's steps made them.
func eachNewToken(sent []int, prs []engine.Progress, f func(i, t int)) {
	for r := 0; ; r++ {
		more := false
		for i, pr := range prs {
			if t := sent[i] + r; t < pr.Generated {
				more = true
				f(i, t)
			}
		}
		if !more {
			return
		}
	}
}

// delta is the member a stream's chunk for output token t of c carries
// (completions' text, chat's delta); ok is false when the token writes
// nothing the chunk shows (a tool call's text around its name and
// arguments).
func (o *output) delta(c *choice, t int, chat bool) ([]byte, bool) {
	b := o.scratch[:0]
	defer func() { o.scratch = b }()
	switch {
	case !chat:
		b = append(b, `,"text":`...)
		b = jsonenc.AppendString(b, c.piece(t))
		return b, true
	case c.call == nil:
		b = append(b, `,"delta":{"content":`...)
		b = jsonenc.AppendString(b, c.piece(t))
		return append(b, '}'), true
	}
	call := c.call
	args := call.argsPart(t, t+1)
	switch h := call.head; {
	case t == h:
		b = append(b, `,"delta":{"tool_calls":[{"id":`...)
		b = jsonenc.AppendString(b, call.id)
		b = append(b, `,"type":"function","index":0,"function":{"name":`...)
		b = jsonenc.AppendString(b, call.name)
		b = append(b, `,"arguments":`...)
		b = jsonenc.AppendString(b, args)
		return append(b, "}}]}"...), true
	case t > h && args != "":
		b = append(b, `,"delta":{"tool_calls":[{"index":0,"function":{"arguments":`...)
		b = jsonenc.AppendString(b, args)
		return append(b, "}}]}"...), true
	}
	return append(b, `,"delta":{}`...), false
}

// pump streams a response's outputs as server-sent events, paced by the
// engine: each time one of them has new tokens (tokens [sent[i],
// prs[i].Generated) of output i), or is done, render appends their events
// (and the closing ones once all are done) to buf, and they are written
// and flushed. A client that goes away aborts the sequences; an engine
// that goes down cuts the connection, as a crashed server's would be.
func (o *output) pump(w http.ResponseWriter, r *http.Request, render func(buf []byte, sent []int, prs []engine.Progress) []byte) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	rc := http.NewResponseController(w)
	ss := o.sequences()
	buf := make([]byte, 0, 512)
	sent := make([]int, len(o.choices))
	last, prs := make([]engine.Progress, len(o.choices)), make([]engine.Progress, len(o.choices))
	for {
		if !ss.next(r, last, prs) {
			return
		}
		for _, pr := range prs {
			if pr.Err != nil {
				ss.abort()
				panic(http.ErrAbortHandler)
			}
		}
		buf = render(buf[:0], sent, prs)
		for i, pr := range prs {
			sent[i] = pr.Generated
		}
		if _, err := w.Write(buf); err != nil {
			ss.abort()
			return
		}
		_ = rc.Flush()
		if allDone(prs) {
			return
		}
		last, prs = prs, last
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
// chunk when the client asked for it (prefix opens each chunk, up to its
// choices), then [DONE].
func (o *output) appendStreamEnd(buf, prefix []byte, prs []engine.Progress, includeUsage bool) []byte {
	if includeUsage {
		buf = append(buf, prefix...)
		buf = append(buf, `,"choices":[],"usage":`...)
		buf = o.appendUsage(buf, prs)
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
