package server

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/hermod/hermod/libs/jsonenc"
	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/libs/tokenizer"
	"github.com/hermod/hermod/tools/vllm-sim/internal/engine"
)

// vLLM's pooling APIs, which a pod serves in pooling mode (--runner
// pooling, an embedding model): /v1/embeddings, /pooling, /score and
// /rerank. Every input is run through the engine as a pooling request: its
// prefill, with no decode (the same batching, prefix cache, KV events and
// metrics as any prompt's), and its embedding is made up from its tokens
// (embedding). A pod refuses the APIs its runner does not serve as vLLM does:
// 400 "The model does not support <name> API".

// Runner is vLLM's --runner: what the pod's model does.
type Runner string

// The runners. vLLM's "auto" picks one from the model's architecture; the
// simulator has none, so the command line maps auto to RunnerGenerate.
const (
	// RunnerGenerate serves the generating APIs (completions, chat
	// completions, Messages, generate), and refuses the pooling ones.
	RunnerGenerate Runner = "generate"
	// RunnerPooling serves the pooling APIs (embeddings, pooling, score,
	// rerank), and refuses the generating ones.
	RunnerPooling Runner = "pooling"
)

// DefaultEmbeddingDim is the embedding size of a pooling pod that sets
// none (that of small sentence-embedding models).
const DefaultEmbeddingDim = 384

// MaxEmbeddingDim bounds Config.EmbeddingDim.
const MaxEmbeddingDim = 1 << 14

// apiPooling is the API the pooling endpoints answer errors as: none of
// the ones Hermod parses (0), so vLLM's OpenAI error shape.
const apiPooling openai.API = 0

// pooling says whether the pod runs a pooling model.
func (p *Pod) pooling() bool { return p.cfg.Runner == RunnerPooling }

// unsupported answers a request for an API the pod's runner does not
// serve, as vLLM does: 400 "The model does not support <name> API", in
// api's error shape.
func unsupported(api openai.API, name string) http.HandlerFunc {
	msg := "The model does not support " + name + " API"
	return func(w http.ResponseWriter, _ *http.Request) {
		writeAPIError(w, api, http.StatusBadRequest, msg)
	}
}

// embedRequest is what the simulator reads of an embeddings or pooling
// request (vLLM's other members, such as user, truncate_prompt_tokens or
// task, are accepted and ignored).
type embedRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
}

// embedAnswer is how the embeddings and pooling APIs answer: the prefix of
// their ids, the object of each datum and its member holding the vector.
type embedAnswer struct {
	idPrefix, object, member string
}

var (
	embeddingsAnswer = embedAnswer{"embd-", "embedding", "embedding"}
	poolingAnswer    = embedAnswer{"pool-", "pooling", "data"}
)

func (p *Pod) embeddings(w http.ResponseWriter, r *http.Request) { p.embed(w, r, embeddingsAnswer) }
func (p *Pod) pool(w http.ResponseWriter, r *http.Request)       { p.embed(w, r, poolingAnswer) }

// embed serves /v1/embeddings and /pooling: {"model"?, "input",
// "encoding_format"?, "dimensions"?} answered with one embedding per input,
// in OpenAI's shape (ans names the data's object and member). dimensions
// truncates the embeddings (renormalised, as vLLM does for a matryoshka
// model; the simulator takes it for every model, where vLLM refuses it for
// a model without matryoshka support).
func (p *Pod) embed(w http.ResponseWriter, r *http.Request, ans embedAnswer) {
	body, ok := p.admitBody(w, r, apiPooling)
	if !ok {
		return
	}
	var req embedRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid request body: "+err.Error())
		return
	}
	b64 := false
	switch req.EncodingFormat {
	case "", "float":
	case "base64":
		b64 = true
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf(`encoding_format: must be "float" or "base64", got %q`, req.EncodingFormat))
		return
	}
	prompts, rerr := p.parseInput(req.Input)
	if rerr != nil {
		writeError(w, rerr.status, rerr.msg)
		return
	}
	model, adapter, ok := p.resolveModel(req.Model)
	if !ok {
		e := unknownModel(req.Model)
		writeError(w, e.status, e.msg)
		return
	}
	dim := p.cfg.EmbeddingDim
	if d := req.Dimensions; d != nil {
		if *d < 1 || *d > dim {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("dimensions: must be between 1 and %d (the model's), got %d", dim, *d))
			return
		}
		dim = *d
	}
	if rerr := p.checkInputLen(prompts, "embedding generation"); rerr != nil {
		writeError(w, rerr.status, rerr.msg)
		return
	}
	if !p.prefill(w, r, adapter, prompts) {
		return
	}
	vec := make([]float32, p.cfg.EmbeddingDim)
	b := p.appendListHead(nil, ans.idPrefix, model, 64+len(prompts)*dim*12)
	b = append(b, `,"data":[`...)
	tokens := 0
	for i, ids := range prompts {
		tokens += len(ids)
		embedding(vec, ids)
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"object":`...)
		b = jsonenc.AppendString(b, ans.object)
		b = append(b, ',')
		b = jsonenc.AppendString(b, ans.member)
		b = append(b, ':')
		b = appendVector(b, truncate(vec, dim), b64)
		b = append(b, '}')
	}
	b = append(b, `],"usage":`...)
	b = appendPoolingUsage(b, tokens)
	writeBody(w, append(b, "}\n"...))
}

// scoreRequest is what the simulator reads of a score request.
type scoreRequest struct {
	Model string          `json:"model"`
	Text1 json.RawMessage `json:"text_1"`
	Text2 json.RawMessage `json:"text_2"`
}

// score serves /score (and /v1/score): {"model"?, "text_1", "text_2"}, each
// a string or a list of strings, paired 1:1, 1:N or N:N, answered with a
// score in [0, 1] per pair: the cosine similarity of their embeddings,
// mapped from [-1, 1]. As vLLM scores with an embedding model, every text
// is embedded once, and each pair counts both its texts' tokens in usage.
func (p *Pod) score(w http.ResponseWriter, r *http.Request) {
	body, ok := p.admitBody(w, r, apiPooling)
	if !ok {
		return
	}
	var req scoreRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid request body: "+err.Error())
		return
	}
	texts1, rerr := parseTexts(req.Text1, "text_1")
	var texts2 []string
	if rerr == nil {
		texts2, rerr = parseTexts(req.Text2, "text_2")
	}
	if rerr == nil {
		rerr = checkPairs(len(texts1), len(texts2))
	}
	if rerr != nil {
		writeError(w, rerr.status, rerr.msg)
		return
	}
	p.scorePairs(w, r, req.Model, texts1, texts2)
}

// scorePairs embeds texts1 and texts2 and answers their pairs' scores.
func (p *Pod) scorePairs(w http.ResponseWriter, r *http.Request, reqModel string, texts1, texts2 []string) {
	model, adapter, ok := p.resolveModel(reqModel)
	if !ok {
		e := unknownModel(reqModel)
		writeError(w, e.status, e.msg)
		return
	}
	prompts := p.encodeAll(append(slices.Clone(texts1), texts2...))
	if rerr := p.checkInputLen(prompts, "score"); rerr != nil {
		writeError(w, rerr.status, rerr.msg)
		return
	}
	if !p.prefill(w, r, adapter, prompts) {
		return
	}
	scores, tokens := pairScores(p.embedAll(prompts), prompts, len(texts1))
	b := p.appendListHead(nil, "score-", model, 128+len(scores)*48)
	b = append(b, `,"data":[`...)
	for i, s := range scores {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"object":"score","score":`...)
		b = strconv.AppendFloat(b, s, 'g', -1, 64)
		b = append(b, '}')
	}
	b = append(b, `],"usage":`...)
	b = appendPoolingUsage(b, tokens)
	writeBody(w, append(b, "}\n"...))
}

// rerankRequest is what the simulator reads of a rerank request.
type rerankRequest struct {
	Model     string    `json:"model"`
	Query     *string   `json:"query"`
	Documents *[]string `json:"documents"`
	TopN      int       `json:"top_n"`
}

// rerank serves /rerank (and /v1/rerank, /v2/rerank, vLLM's Jina- and
// Cohere-style paths): {"model"?, "query", "documents", "top_n"?} answered
// with the documents' relevance scores (their score against the query),
// most relevant first, the first top_n of them when top_n > 0.
func (p *Pod) rerank(w http.ResponseWriter, r *http.Request) {
	body, ok := p.admitBody(w, r, apiPooling)
	if !ok {
		return
	}
	var req rerankRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid request body: "+err.Error())
		return
	}
	switch {
	case req.Query == nil:
		writeError(w, http.StatusBadRequest, "query: required")
		return
	case req.Documents == nil:
		writeError(w, http.StatusBadRequest, "documents: required")
		return
	}
	docs := *req.Documents
	if rerr := checkPairs(1, len(docs)); rerr != nil {
		writeError(w, rerr.status, rerr.msg)
		return
	}
	model, adapter, ok := p.resolveModel(req.Model)
	if !ok {
		e := unknownModel(req.Model)
		writeError(w, e.status, e.msg)
		return
	}
	prompts := p.encodeAll(append([]string{*req.Query}, docs...))
	if rerr := p.checkInputLen(prompts, "embedding generation"); rerr != nil {
		writeError(w, rerr.status, rerr.msg)
		return
	}
	if !p.prefill(w, r, adapter, prompts) {
		return
	}
	scores, tokens := pairScores(p.embedAll(prompts), prompts, 1)
	order := make([]int, len(scores))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return -cmpFloat(scores[a], scores[b]) })
	if req.TopN > 0 && req.TopN < len(order) {
		order = order[:req.TopN]
	}
	b := make([]byte, 0, 128+len(order)*64)
	b = append(b, `{"id":`...)
	b = jsonenc.AppendString(b, "rerank-"+p.newID())
	b = append(b, `,"model":`...)
	b = jsonenc.AppendString(b, model)
	b = append(b, `,"usage":{"total_tokens":`...)
	b = strconv.AppendInt(b, int64(tokens), 10)
	b = append(b, `},"results":[`...)
	for i, d := range order {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"index":`...)
		b = strconv.AppendInt(b, int64(d), 10)
		b = append(b, `,"document":{"text":`...)
		b = jsonenc.AppendString(b, docs[d])
		b = append(b, `},"relevance_score":`...)
		b = strconv.AppendFloat(b, scores[d], 'g', -1, 64)
		b = append(b, '}')
	}
	writeBody(w, append(b, "]}\n"...))
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// admitBody lets a request bound for the engine through the injected
// faults (admit) and reads its body; on failure it has answered (or the
// client went away) and ok is false.
func (p *Pod) admitBody(w http.ResponseWriter, r *http.Request, api openai.API) (body []byte, ok bool) {
	if !p.admit(w, r, api) {
		return nil, false
	}
	return readBody(w, r, api)
}

// newID is a fresh response id (without its API's prefix).
func (p *Pod) newID() string { return fmt.Sprintf("%x%016x", p.reqSeq.Add(1), rand.Uint64()) }

// parseInput reads an embeddings or pooling request's input as vLLM takes
// it: a string, a list of strings, a list of token ids or a list of lists
// of token ids. It returns each input's tokens.
func (p *Pod) parseInput(raw json.RawMessage) ([][]uint32, *requestError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badRequest("input: required")
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return checkPrompts([][]uint32{p.encode(text)})
	}
	var texts []string
	if err := json.Unmarshal(raw, &texts); err == nil {
		if len(texts) == 0 {
			return nil, badRequest("input: must not be an empty list")
		}
		return checkPrompts(p.encodeAll(texts))
	}
	var ids []int64
	if json.Unmarshal(raw, &ids) == nil {
		prompt, rerr := tokenIDs(ids)
		if rerr != nil {
			return nil, rerr
		}
		return checkPrompts([][]uint32{prompt})
	}
	var lists [][]int64
	if json.Unmarshal(raw, &lists) == nil && len(lists) > 0 {
		prompts := make([][]uint32, len(lists))
		for i, l := range lists {
			var rerr *requestError
			if prompts[i], rerr = tokenIDs(l); rerr != nil {
				return nil, rerr
			}
		}
		return checkPrompts(prompts)
	}
	return nil, badRequest("input: must be a string, a list of strings, a list of token ids or a list of lists of token ids")
}

// tokenIDs checks token ids given in a request, as vLLM does: each in the
// vocabulary.
func tokenIDs(ids []int64) ([]uint32, *requestError) {
	out := make([]uint32, len(ids))
	for i, id := range ids {
		if id < 0 || id >= tokenizer.BuiltinVocabSize {
			return nil, badRequest(fmt.Sprintf("Token id %d is out of vocabulary", id))
		}
		out[i] = uint32(id)
	}
	return out, nil
}

// checkPrompts refuses an empty prompt, as vLLM's engine does (the
// built-in tokenizer adds no BOS token that would make "" one token).
func checkPrompts(prompts [][]uint32) ([][]uint32, *requestError) {
	for _, pr := range prompts {
		if len(pr) == 0 {
			return nil, badRequest("The decoder prompt cannot be empty")
		}
	}
	return prompts, nil
}

// parseTexts reads a score request's text_1 or text_2: a string or a list
// of strings.
func parseTexts(raw json.RawMessage, name string) ([]string, *requestError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badRequest(name + ": required")
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return []string{text}, nil
	}
	var texts []string
	if json.Unmarshal(raw, &texts) == nil {
		return texts, nil
	}
	return nil, badRequest(name + ": must be a string or a list of strings")
}

// checkPairs checks the numbers of texts to score, with vLLM's messages.
func checkPairs(n1, n2 int) *requestError {
	switch {
	case n1 == 0:
		return badRequest("At least one text element must be given")
	case n2 == 0:
		return badRequest("At least one text_pair element must be given")
	case n1 > 1 && n1 != n2:
		return badRequest("Input lengths must be either 1:1, 1:N or N:N")
	}
	return nil
}

// checkInputLen refuses an input longer than the model's context, with
// vLLM's message (a pooling input may fill the whole context: nothing is
// generated after it).
func (p *Pod) checkInputLen(prompts [][]uint32, operation string) *requestError {
	limit := p.cfg.Engine.MaxModelLen
	for _, pr := range prompts {
		if len(pr) > limit {
			return badRequest(fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens in the input for %s. Please reduce the length of the input.",
				limit, len(pr), operation))
		}
	}
	return nil
}

// encodeAll tokenizes texts.
func (p *Pod) encodeAll(texts []string) [][]uint32 {
	out := make([][]uint32, len(texts))
	for i, t := range texts {
		out[i] = p.encode(t)
	}
	return out
}

// prefill runs each prompt through the engine as a pooling request, all
// submitted at once (as vLLM submits a request's inputs), and waits until
// every one is prefilled. On failure it has answered (or the client went
// away, which aborts them) and returns false.
func (p *Pod) prefill(w http.ResponseWriter, r *http.Request, adapter string, prompts [][]uint32) bool {
	ss := sequences{eng: p.engine, seqs: make([]*engine.Sequence, 0, len(prompts))}
	for _, pr := range prompts {
		s, err := p.engine.Submit(engine.Request{ID: p.newID(), Adapter: adapter, Prompt: pr, Pooling: true})
		if err != nil {
			ss.abort()
			writeError(w, http.StatusBadRequest, err.Error())
			return false
		}
		ss.seqs = append(ss.seqs, s)
	}
	_, ok := ss.done(r, func(err error) { writeError(w, http.StatusInternalServerError, err.Error()) })
	return ok
}

// embedAll returns the embeddings of prompts.
func (p *Pod) embedAll(prompts [][]uint32) [][]float32 {
	out := make([][]float32, len(prompts))
	for i, pr := range prompts {
		out[i] = make([]float32, p.cfg.EmbeddingDim)
		embedding(out[i], pr)
	}
	return out
}

// pairScores scores the pairs of the first n1 embeddings with the others
// (1:N pairs the first with each; N:N pairwise): the cosine similarity of
// each pair mapped from [-1, 1] to [0, 1]. tokens are the pairs' prompt
// tokens, both texts of every pair, as vLLM counts them.
func pairScores(embs [][]float32, prompts [][]uint32, n1 int) (scores []float64, tokens int) {
	n2 := len(embs) - n1
	scores = make([]float64, n2)
	for i := range n2 {
		a := 0
		if n1 > 1 {
			a = i
		}
		b := n1 + i
		var dot float64
		for k, x := range embs[a] {
			dot += float64(x) * float64(embs[b][k])
		}
		scores[i] = min(1, max(0, (1+dot)/2))
		tokens += len(prompts[a]) + len(prompts[b])
	}
	return scores, tokens
}

// embeddingSeqWeight is the weight of the sequence's own vector in an
// embedding, against its tokens' (1).
const embeddingSeqWeight = 0.25

// tokenCoords is how many coordinates each token of an input adds to:
// few, so that an embedding costs little per token, and enough that the
// tokens two inputs share make most of their similarity.
const tokenCoords = 32

// vectorSalt seeds the embeddings' pseudo-random vectors.
const vectorSalt = 0x9e6c63d0676a9a99

// embedding writes the embedding of a prompt into dst (its length is the
// model's dimension): the L2-normalised sum of
//
//   - the normalised sum of a sparse pseudo-random vector per token
//     (tokenCoords coordinates of its own), so that inputs sharing tokens
//     point alike: scores and rerank orders follow word overlap;
//   - a dense pseudo-random vector seeded by the whole sequence, at a
//     quarter of that weight, so that the order of the tokens matters a
//     little, as it does to a real model, and every coordinate is used.
//
// It is a function of the tokens alone: every pod embeds an input alike.
func embedding(dst []float32, ids []uint32) {
	acc := make([]float64, len(dst))
	for _, id := range ids {
		addTokenVector(acc, id)
	}
	normalize(acc)
	addDenseVector(acc, xxhash.Sum64(tokenBytes(ids)), embeddingSeqWeight)
	normalize(acc)
	for i, x := range acc {
		dst[i] = float32(x)
	}
}

// addTokenVector adds token id's sparse vector to acc: tokenCoords
// coordinates, at positions and with values (uniform in [-1, 1)) drawn
// from a generator seeded by the id, two per draw.
func addTokenVector(acc []float64, id uint32) {
	g := rand.NewPCG(uint64(id), vectorSalt)
	n := uint32(len(acc))
	for range tokenCoords / 2 {
		x := g.Uint64()
		for _, h := range [2]uint32{uint32(x), uint32(x >> 32)} {
			pos := (h >> 16) * n >> 16 // the high 16 bits onto [0, n)
			acc[pos] += float64(int16(h)) / 32768
		}
	}
}

// addDenseVector adds a pseudo-random vector of norm about weight, seeded
// by seed, to acc: its coordinates are uniform in
// [-weight·sqrt(3/len), weight·sqrt(3/len)).
func addDenseVector(acc []float64, seed uint64, weight float64) {
	g := rand.NewPCG(seed, vectorSalt)
	w := weight * math.Sqrt(3/float64(len(acc))) / 32768
	for k := 0; k < len(acc); k += 4 {
		x := g.Uint64()
		for j := 0; j < 4 && k+j < len(acc); j++ {
			acc[k+j] += w * float64(int16(x>>(16*j)))
		}
	}
}

func normalize(v []float64) {
	var sum float64
	for _, x := range v {
		sum += x * x
	}
	if sum == 0 {
		return
	}
	inv := 1 / math.Sqrt(sum)
	for i := range v {
		v[i] *= inv
	}
}

// truncate returns the first d coordinates of a unit vector, renormalised
// (the whole vector when d is its length).
func truncate(v []float32, d int) []float32 {
	if d >= len(v) {
		return v
	}
	var sum float64
	for _, x := range v[:d] {
		sum += float64(x) * float64(x)
	}
	out := make([]float32, d)
	inv := 1 / math.Sqrt(sum)
	for i, x := range v[:d] {
		out[i] = float32(float64(x) * inv)
	}
	return out
}

// appendVector appends an embedding as a JSON list of numbers (float32's
// shortest decimals) or, with b64, as vLLM's base64 string of its
// little-endian float32s.
func appendVector(b []byte, v []float32, b64 bool) []byte {
	if b64 {
		raw := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(x))
		}
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, raw)
		return append(b, '"')
	}
	b = append(b, '[')
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, float64(x), 'g', -1, 32)
	}
	return append(b, ']')
}

// appendListHead appends the head of a pooling API's list answer:
// {"id", "object": "list", "created", "model" (then the caller's data and
// usage), with room for about size more bytes.
func (p *Pod) appendListHead(b []byte, idPrefix, model string, size int) []byte {
	b = slices.Grow(b, 128+size)
	b = append(b, `{"id":`...)
	b = jsonenc.AppendString(b, idPrefix+p.newID())
	b = append(b, `,"object":"list","created":`...)
	b = strconv.AppendInt(b, time.Now().Unix(), 10)
	b = append(b, `,"model":`...)
	return jsonenc.AppendString(b, model)
}

// appendPoolingUsage appends a pooling answer's usage as vLLM dumps it:
// prompt tokens only.
func appendPoolingUsage(b []byte, tokens int) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(tokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(tokens), 10)
	return append(b, `,"completion_tokens":0,"prompt_tokens_details":null}`...)
}

// writeBody answers 200 with a JSON body.
func writeBody(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
