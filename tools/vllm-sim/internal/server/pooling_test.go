package server

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/hermod/hermod/libs/tokenizer"
)

// startPoolingPod runs a pod in pooling mode (an embedding model).
func startPoolingPod(t *testing.T, mutate func(*Config)) *testPod {
	t.Helper()
	return startPod(t, func(c *Config) {
		c.Runner = RunnerPooling
		c.ServedNames = []string{"embedder"}
		if mutate != nil {
			mutate(c)
		}
	})
}

// poolingUsage is vLLM's UsageInfo as a pooling answer dumps it.
type poolingUsage struct {
	PromptTokens        int  `json:"prompt_tokens"`
	TotalTokens         int  `json:"total_tokens"`
	CompletionTokens    *int `json:"completion_tokens"`
	PromptTokensDetails any  `json:"prompt_tokens_details"`
}

// embeddingsResponse is the OpenAI embeddings shape (and /pooling's, whose
// vector is in data).
type embeddingsResponse struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Data    []struct {
		Index     int             `json:"index"`
		Object    string          `json:"object"`
		Embedding json.RawMessage `json:"embedding"`
		Data      json.RawMessage `json:"data"`
	} `json:"data"`
	Usage poolingUsage `json:"usage"`
}

// vectors returns the float vectors of an answer (embedding or data).
func (e embeddingsResponse) vectors(t *testing.T) [][]float64 {
	t.Helper()
	var out [][]float64
	for _, d := range e.Data {
		raw := d.Embedding
		if raw == nil {
			raw = d.Data
		}
		var v []float64
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("vector %d: %v", d.Index, err)
		}
		out = append(out, v)
	}
	return out
}

func postEmbeddings(t *testing.T, url, path, body string) embeddingsResponse {
	t.Helper()
	resp, b := post(t, url+path, body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s", path, body, resp.StatusCode, b)
	}
	var e embeddingsResponse
	strict(t, b, &e)
	return e
}

func norm(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x * x
	}
	return math.Sqrt(s)
}

func cosine(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s / (norm(a) * norm(b))
}

// Each form of input vLLM takes gets one L2-normalised embedding per
// input, of the model's dimension, in OpenAI's shape, with usage counting
// the inputs' tokens; a text and its token ids embed alike.
func TestEmbeddings(t *testing.T) {
	p := startPoolingPod(t, nil)
	hello := tokenize(t, p.url, "hello world")
	other := tokenize(t, p.url, "an entirely different sentence")
	ids, _ := json.Marshal(hello)
	lists, _ := json.Marshal([][]uint32{hello, other})
	cases := []struct {
		input  string
		n      int
		tokens int
	}{
		{`"hello world"`, 1, len(hello)},
		{`["hello world","an entirely different sentence"]`, 2, len(hello) + len(other)},
		{string(ids), 1, len(hello)},
		{string(lists), 2, len(hello) + len(other)},
	}
	var first [][]float64
	for i, c := range cases {
		e := postEmbeddings(t, p.url, "/v1/embeddings", `{"model":"embedder","input":`+c.input+`}`)
		if !strings.HasPrefix(e.ID, "embd-") || e.Object != "list" || e.Created == 0 || e.Model != "embedder" || len(e.Data) != c.n {
			t.Errorf("%s: %+v", c.input, e)
		}
		if u := e.Usage; u.PromptTokens != c.tokens || u.TotalTokens != c.tokens || u.CompletionTokens == nil || *u.CompletionTokens != 0 {
			t.Errorf("%s: usage %+v, want %d prompt tokens", c.input, u, c.tokens)
		}
		vecs := e.vectors(t)
		for j, d := range e.Data {
			if d.Index != j || d.Object != "embedding" || len(vecs[j]) != DefaultEmbeddingDim {
				t.Errorf("%s: datum %d: index %d, object %q, %d floats", c.input, j, d.Index, d.Object, len(vecs[j]))
			}
			if n := norm(vecs[j]); math.Abs(n-1) > 1e-5 {
				t.Errorf("%s: datum %d has norm %v", c.input, j, n)
			}
		}
		if i == 0 || i == 1 {
			first = append(first, vecs...)
		}
		// the text and its token ids embed alike
		if i == 2 && !slices.Equal(vecs[0], first[0]) {
			t.Errorf("token ids embed unlike their text")
		}
		if i == 3 && (!slices.Equal(vecs[0], first[1]) || !slices.Equal(vecs[1], first[2])) {
			t.Errorf("lists of token ids embed unlike their texts")
		}
	}
	if !slices.Equal(first[0], first[1]) {
		t.Error("the same text embeds differently in a list")
	}
	if c := cosine(first[1], first[2]); c > 0.5 {
		t.Errorf("unrelated texts have cosine %v", c)
	}
}

func tokenize(t *testing.T, url, text string) []uint32 {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"prompt": text})
	resp, b := post(t, url+"/tokenize", string(body))
	var tok struct {
		Count       int      `json:"count"`
		MaxModelLen int      `json:"max_model_len"`
		Tokens      []uint32 `json:"tokens"`
	}
	strict(t, b, &tok)
	if resp.StatusCode != http.StatusOK || tok.Count != len(tok.Tokens) {
		t.Fatalf("tokenize %q: %d %s", text, resp.StatusCode, b)
	}
	return tok.Tokens
}

// Embeddings depend on the input alone: the same on every request, on
// every pod (whatever its --seed), in both encodings; inputs sharing words
// point alike.
func TestEmbeddingsDeterministic(t *testing.T) {
	a := startPoolingPod(t, nil)
	b := startPoolingPod(t, func(c *Config) { c.Seed = 99; c.Name = "pod-b" })
	// the first two are the same tokens in another order
	body := `{"input":["the gpu runs out of memory","the memory of gpu runs out","a recipe for bread"]}`
	e1 := postEmbeddings(t, a.url, "/v1/embeddings", body).vectors(t)
	e2 := postEmbeddings(t, a.url, "/v1/embeddings", body).vectors(t)
	e3 := postEmbeddings(t, b.url, "/v1/embeddings", body).vectors(t)
	for i := range e1 {
		if !slices.Equal(e1[i], e2[i]) || !slices.Equal(e1[i], e3[i]) {
			t.Errorf("input %d embeds differently across requests or pods", i)
		}
	}
	same, unrelated := cosine(e1[0], e1[1]), cosine(e1[0], e1[2])
	if same < 0.9 || same > 0.99 || unrelated > 0.3 {
		t.Errorf("cosine of reordered words %v (want high, below 1: order matters a little), of unrelated texts %v", same, unrelated)
	}
}

// base64 is vLLM's little-endian float32s: the official SDK decodes it to
// the floats the float encoding gives.
func TestEmbeddingsBase64(t *testing.T) {
	p := startPoolingPod(t, func(c *Config) { c.EmbeddingDim = 64 })
	client := openai.NewClient(option.WithBaseURL(p.url+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx := context.Background()
	params := openai.EmbeddingNewParams{
		Model: "embedder",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"first input", "second input"}},
	}
	floats, err := client.Embeddings.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	params.EncodingFormat = openai.EmbeddingNewParamsEncodingFormatBase64
	b64, err := client.Embeddings.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(floats.Data) != 2 || len(b64.Data) != 2 || floats.Usage.PromptTokens != b64.Usage.PromptTokens || floats.Model != "embedder" {
		t.Fatalf("float %+v, base64 %+v", floats, b64)
	}
	// the same float32s: the decimals are float32's shortest, exact once
	// read back as float32
	for i := range floats.Data {
		f, g := floats.Data[i].Embedding, b64.Data[i].Embedding
		if len(f) != 64 || len(g) != 64 {
			t.Fatalf("input %d: %d and %d floats", i, len(f), len(g))
		}
		for k := range f {
			if float32(f[k]) != float32(g[k]) {
				t.Errorf("input %d, float %d: %v, base64 %v", i, k, f[k], g[k])
			}
		}
	}
	// and by hand: the string is the little-endian float32s
	_, body := post(t, p.url+"/v1/embeddings", `{"input":"first input","encoding_format":"base64"}`)
	var e struct {
		Data []struct {
			Embedding string `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &e); err != nil || len(e.Data) != 1 {
		t.Fatalf("%v: %s", err, body)
	}
	raw, err := base64.StdEncoding.DecodeString(e.Data[0].Embedding)
	if err != nil || len(raw) != 4*64 {
		t.Fatalf("%d bytes, %v", len(raw), err)
	}
	for i, want := range floats.Data[0].Embedding {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])); got != float32(want) {
			t.Fatalf("float %d: %v, want %v", i, got, want)
		}
	}
}

// dimensions truncates an embedding to its first coordinates, renormalised.
func TestEmbeddingsDimensions(t *testing.T) {
	p := startPoolingPod(t, nil)
	full := postEmbeddings(t, p.url, "/v1/embeddings", `{"input":"matryoshka"}`).vectors(t)[0]
	short := postEmbeddings(t, p.url, "/v1/embeddings", `{"input":"matryoshka","dimensions":32}`).vectors(t)[0]
	if len(short) != 32 || math.Abs(norm(short)-1) > 1e-5 {
		t.Fatalf("%d floats of norm %v", len(short), norm(short))
	}
	if c := cosine(short, full[:32]); c < 1-1e-6 {
		t.Errorf("the truncated embedding is not the full one's first 32 coordinates: cosine %v", c)
	}
}

// /pooling answers the same vectors in vLLM's pooling shape.
func TestPooling(t *testing.T) {
	p := startPoolingPod(t, nil)
	body := `{"model":"embedder","input":["pool me","and me"]}`
	e := postEmbeddings(t, p.url, "/v1/embeddings", body)
	pl := postEmbeddings(t, p.url, "/pooling", body)
	if !strings.HasPrefix(pl.ID, "pool-") || pl.Object != "list" || pl.Model != "embedder" || pl.Usage.PromptTokens != e.Usage.PromptTokens || len(pl.Data) != 2 {
		t.Fatalf("pooling %+v", pl)
	}
	ev, pv := e.vectors(t), pl.vectors(t)
	for i, d := range pl.Data {
		if d.Index != i || d.Object != "pooling" || d.Embedding != nil || !slices.Equal(ev[i], pv[i]) {
			t.Errorf("datum %d: %+v", i, d)
		}
	}
}

type scoreResponse struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Data    []struct {
		Index  int     `json:"index"`
		Object string  `json:"object"`
		Score  float64 `json:"score"`
	} `json:"data"`
	Usage poolingUsage `json:"usage"`
}

// /score pairs 1:1, 1:N and N:N; a text scores 1 with itself, others less,
// all in [0, 1]; each pair counts both its texts' tokens.
func TestScore(t *testing.T) {
	p := startPoolingPod(t, nil)
	q, d := len(tokenize(t, p.url, "what is a gpu")), len(tokenize(t, p.url, "bread recipes"))
	cases := []struct {
		path, body string
		tokens     int
		ok         func(s []float64) bool
	}{
		{"/score", `{"model":"embedder","text_1":"what is a gpu","text_2":"what is a gpu"}`, 2 * q,
			func(s []float64) bool { return len(s) == 1 && math.Abs(s[0]-1) < 1e-6 }},
		{"/v1/score", `{"text_1":"what is a gpu","text_2":["what is a gpu","bread recipes"]}`, 3*q + d,
			func(s []float64) bool { return len(s) == 2 && math.Abs(s[0]-1) < 1e-6 && s[1] < 0.8 }},
		// cosine is symmetric: the two pairs score alike
		{"/score", `{"text_1":["what is a gpu","bread recipes"],"text_2":["bread recipes","what is a gpu"]}`, 2 * (q + d),
			func(s []float64) bool { return len(s) == 2 && math.Abs(s[0]-s[1]) < 1e-6 && s[0] < 0.8 }},
	}
	for _, c := range cases {
		resp, b := post(t, p.url+c.path, c.body)
		var s scoreResponse
		strict(t, b, &s)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(s.ID, "score-") || s.Object != "list" || s.Model != "embedder" {
			t.Fatalf("%s: %d %s", c.body, resp.StatusCode, b)
		}
		if s.Usage.PromptTokens != c.tokens || s.Usage.TotalTokens != c.tokens {
			t.Errorf("%s: usage %+v, want %d tokens", c.body, s.Usage, c.tokens)
		}
		var scores []float64
		for i, d := range s.Data {
			if d.Index != i || d.Object != "score" || d.Score < 0 || d.Score > 1 {
				t.Errorf("%s: %+v", c.body, d)
			}
			scores = append(scores, d.Score)
		}
		if !c.ok(scores) {
			t.Errorf("%s: scores %v", c.body, scores)
		}
	}
}

type rerankResponse struct {
	ID    string `json:"id"`
	Model string `json:"model"`
	Usage struct {
		TotalTokens int `json:"total_tokens"`
	} `json:"usage"`
	Results []struct {
		Index    int `json:"index"`
		Document struct {
			Text string `json:"text"`
		} `json:"document"`
		RelevanceScore float64 `json:"relevance_score"`
	} `json:"results"`
}

// /rerank (at its three paths) ranks the documents most relevant first,
// the one sharing the query's words on top, and keeps top_n of them.
func TestRerank(t *testing.T) {
	p := startPoolingPod(t, nil)
	docs := []string{"bread and butter", "out of gpu memory", "the gpu ran out of memory again", "cats"}
	q := len(tokenize(t, p.url, "gpu out of memory"))
	tokens := 0
	for _, d := range docs {
		tokens += q + len(tokenize(t, p.url, d))
	}
	docsJSON, _ := json.Marshal(docs)
	for _, path := range []string{"/rerank", "/v1/rerank", "/v2/rerank"} {
		for _, topN := range []int{0, 2, 9} {
			body := fmt.Sprintf(`{"model":"embedder","query":"gpu out of memory","documents":%s,"top_n":%d}`, docsJSON, topN)
			resp, b := post(t, p.url+path, body)
			var r rerankResponse
			strict(t, b, &r)
			want := len(docs)
			if topN > 0 && topN < want {
				want = topN
			}
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(r.ID, "rerank-") || r.Model != "embedder" || len(r.Results) != want || r.Usage.TotalTokens != tokens {
				t.Fatalf("%s top_n %d: %d %s (want %d results, %d tokens)", path, topN, resp.StatusCode, b, want, tokens)
			}
			for i, res := range r.Results {
				if res.Document.Text != docs[res.Index] || res.RelevanceScore < 0 || res.RelevanceScore > 1 ||
					(i > 0 && res.RelevanceScore > r.Results[i-1].RelevanceScore) {
					t.Errorf("%s: result %d %+v of %s", path, i, res, b)
				}
			}
			if top := r.Results[0].Index; top != 1 && top != 2 {
				t.Errorf("%s: %q ranks first", path, docs[top])
			}
		}
	}
}

// Bad bodies are refused with 400 (an unknown model 404) in vLLM's OpenAI
// error shape, before anything reaches the engine.
func TestPoolingErrors(t *testing.T) {
	p := startPoolingPod(t, func(c *Config) { c.Engine.MaxModelLen = 20 })
	long := strings.Repeat("word ", 30)
	cases := []struct {
		path, body string
		status     int
		msg        string
	}{
		{"/v1/embeddings", `not json`, 400, "invalid request body"},
		{"/v1/embeddings", `{"model":"embedder"}`, 400, "input: required"},
		{"/v1/embeddings", `{"input":null}`, 400, "input: required"},
		{"/v1/embeddings", `{"input":[]}`, 400, "must not be an empty list"},
		{"/v1/embeddings", `{"input":{"text":"x"}}`, 400, "input: must be a string, a list of strings"},
		{"/v1/embeddings", `{"input":[1,"x"]}`, 400, "input: must be a string, a list of strings"},
		{"/v1/embeddings", `{"input":[1.5]}`, 400, "input: must be"},
		{"/v1/embeddings", `{"input":[-1]}`, 400, "Token id -1 is out of vocabulary"},
		{"/v1/embeddings", `{"input":[[1],[128256]]}`, 400, "Token id 128256 is out of vocabulary"},
		{"/v1/embeddings", `{"input":""}`, 400, "The decoder prompt cannot be empty"},
		{"/v1/embeddings", `{"input":[[1],[]]}`, 400, "The decoder prompt cannot be empty"},
		{"/v1/embeddings", `{"input":"x","encoding_format":"bytes"}`, 400, `encoding_format: must be "float" or "base64"`},
		{"/v1/embeddings", `{"input":"x","dimensions":0}`, 400, "dimensions: must be between 1 and 384"},
		{"/v1/embeddings", `{"input":"x","dimensions":385}`, 400, "dimensions: must be between 1 and 384"},
		{"/v1/embeddings", `{"model":"nope","input":"x"}`, 404, "The model `nope` does not exist."},
		{"/v1/embeddings", fmt.Sprintf(`{"input":%q}`, long), 400, "This model's maximum context length is 20 tokens. However, you requested 60 tokens in the input for embedding generation. Please reduce the length of the input."},
		{"/pooling", `{"input":3}`, 400, "input: must be"},
		{"/score", `{"text_2":"x"}`, 400, "text_1: required"},
		{"/score", `{"text_1":"x","text_2":7}`, 400, "text_2: must be a string or a list of strings"},
		{"/score", `{"text_1":[],"text_2":"x"}`, 400, "At least one text element must be given"},
		{"/score", `{"text_1":"x","text_2":[]}`, 400, "At least one text_pair element must be given"},
		{"/score", `{"text_1":["a","b"],"text_2":["a","b","c"]}`, 400, "Input lengths must be either 1:1, 1:N or N:N"},
		{"/score", fmt.Sprintf(`{"text_1":"x","text_2":%q}`, long), 400, "in the input for score"},
		{"/score", `{"model":"nope","text_1":"x","text_2":"y"}`, 404, "does not exist"},
		{"/rerank", `{"documents":["a"]}`, 400, "query: required"},
		{"/rerank", `{"query":"q"}`, 400, "documents: required"},
		{"/rerank", `{"query":"q","documents":[]}`, 400, "At least one text_pair element must be given"},
		{"/rerank", `{"query":"q","documents":"a"}`, 400, "invalid request body"},
		{"/v2/rerank", `{"model":"nope","query":"q","documents":["a"]}`, 404, "does not exist"},
	}
	for _, c := range cases {
		resp, b := post(t, p.url+c.path, c.body)
		var e errorBody
		strict(t, b, &e)
		if resp.StatusCode != c.status || e.Error.Code != c.status || !strings.Contains(e.Error.Message, c.msg) {
			t.Errorf("%s %s: %d %s, want %d %q", c.path, c.body, resp.StatusCode, b, c.status, c.msg)
		}
	}
	// nothing reached the engine
	if got := counter(t, p.url, "vllm:prompt_tokens_total"); got != 0 {
		t.Errorf("refused requests prefilled %v tokens", got)
	}
}

// Each runner refuses the other's APIs as vLLM does: 400 "The model does
// not support <name> API", in the API's error shape; /v1/models, /tokenize
// and /detokenize answer alike in both.
func TestRunnerRefusesOtherAPIs(t *testing.T) {
	gen := startPod(t, func(c *Config) { c.ServedNames = []string{"embedder"} })
	pool := startPoolingPod(t, nil)
	cases := []struct {
		pod        *testPod
		path, body string
		name       string
	}{
		{pool, "/v1/completions", `{"prompt":"x","max_tokens":1}`, "Completions"},
		{pool, "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`, "Chat Completions"},
		{pool, "/v1/messages", `{"max_tokens":1,"messages":[{"role":"user","content":"x"}]}`, "Messages"},
		{pool, "/v1/messages/count_tokens", `{"messages":[{"role":"user","content":"x"}]}`, "Messages"},
		{pool, "/inference/v1/generate", `{"token_ids":[1],"sampling_params":{"max_tokens":1}}`, "generate tokens"},
		{gen, "/v1/embeddings", `{"input":"x"}`, "Embeddings"},
		{gen, "/pooling", `{"input":"x"}`, "Pooling"},
		{gen, "/score", `{"text_1":"x","text_2":"y"}`, "Score"},
		{gen, "/v1/score", `{"text_1":"x","text_2":"y"}`, "Score"},
		{gen, "/rerank", `{"query":"x","documents":["y"]}`, "Rerank (Score)"},
		{gen, "/v1/rerank", `{"query":"x","documents":["y"]}`, "Rerank (Score)"},
		{gen, "/v2/rerank", `{"query":"x","documents":["y"]}`, "Rerank (Score)"},
	}
	for _, c := range cases {
		resp, b := post(t, c.pod.url+c.path, c.body)
		want := "The model does not support " + c.name + " API"
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d %s", c.path, resp.StatusCode, b)
			continue
		}
		if strings.HasPrefix(c.path, "/v1/messages") {
			var e anthropicError
			strict(t, b, &e)
			if e.Type != "error" || e.Error.Type != "invalid_request_error" || e.Error.Message != want {
				t.Errorf("%s: %s", c.path, b)
			}
			continue
		}
		var e errorBody
		strict(t, b, &e)
		if e.Error.Code != http.StatusBadRequest || e.Error.Type != "BadRequestError" || e.Error.Message != want {
			t.Errorf("%s: %s", c.path, b)
		}
	}
	get := func(p *testPod) string {
		resp, err := http.Get(p.url + "/v1/models")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		for _, d := range m["data"].([]any) {
			delete(d.(map[string]any), "created")
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	if g, p := get(gen), get(pool); g != p || !strings.Contains(g, `"id":"embedder"`) {
		t.Errorf("/v1/models: generate %s, pooling %s", g, p)
	}
	for _, p := range []*testPod{gen, pool} {
		ids := tokenize(t, p.url, "both runners tokenize")
		if got := detokenize(t, p.url, ids); got != "both runners tokenize" {
			t.Errorf("detokenize %q", got)
		}
	}
}

// --api-key covers the pooling paths under /v1 only, as vLLM's does.
func TestPoolingAPIKey(t *testing.T) {
	p := startPoolingPod(t, func(c *Config) { c.APIKey = "sk-sim" })
	embed, score, rerank := `{"input":"x"}`, `{"text_1":"x","text_2":"y"}`, `{"query":"x","documents":["y"]}`
	cases := []struct {
		path, body string
		key        bool // the path asks for the key
	}{
		{"/v1/embeddings", embed, true},
		{"/v1/score", score, true},
		{"/v1/rerank", rerank, true},
		{"/pooling", embed, false},
		{"/score", score, false},
		{"/rerank", rerank, false},
		{"/v2/rerank", rerank, false},
		{"/detokenize", `{"tokens":[104,105]}`, false},
	}
	for _, c := range cases {
		for _, auth := range []string{"", "Bearer sk-sim", "Bearer sk-other"} {
			req, err := http.NewRequest(http.MethodPost, p.url+c.path, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := http.StatusOK
			if c.key && auth != "Bearer sk-sim" {
				want = http.StatusUnauthorized
			}
			if resp.StatusCode != want {
				t.Errorf("%s with %q: %d %s, want %d", c.path, auth, resp.StatusCode, b, want)
				continue
			}
			if want == http.StatusUnauthorized {
				var e errorBody
				strict(t, b, &e)
				if e.Error.Type != "AuthenticationError" {
					t.Errorf("%s: %s", c.path, b)
				}
			}
		}
	}
}

// Injected faults fail pooling requests as they fail the others, in the
// OpenAI error shape; /detokenize (no engine work) is not failed.
func TestPoolingFaults(t *testing.T) {
	p := startPoolingPod(t, func(c *Config) { c.Faults = Faults{ErrorRates: map[string]float64{"503": 1}} })
	for _, c := range []struct{ path, body string }{
		{"/v1/embeddings", `{"input":"x"}`},
		{"/pooling", `{"input":"x"}`},
		{"/score", `{"text_1":"x","text_2":"y"}`},
		{"/rerank", `{"query":"x","documents":["y"]}`},
	} {
		resp, b := post(t, p.url+c.path, c.body)
		var e errorBody
		strict(t, b, &e)
		if resp.StatusCode != http.StatusServiceUnavailable || e.Error.Type != "ServiceUnavailableError" || !strings.Contains(e.Error.Message, "injected") {
			t.Errorf("%s: %d %s", c.path, resp.StatusCode, b)
		}
	}
	if resp, b := post(t, p.url+"/detokenize", `{"tokens":[104,105]}`); resp.StatusCode != http.StatusOK {
		t.Errorf("detokenize under faults: %d %s", resp.StatusCode, b)
	}
	if status := put(t, p.url+"/sim/faults", `{"extra_latency":"10ms"}`); status != http.StatusOK {
		t.Fatalf("put faults: %d", status)
	}
	postEmbeddings(t, p.url, "/v1/embeddings", `{"input":"x"}`)
}

// A pooling request is a prefill in the engine: it counts its prompt
// tokens and a TTFT (its time to the pooled output), generates nothing,
// finishes with "stop", and takes the cost model's prefill time.
func TestPoolingMetrics(t *testing.T) {
	p := startPoolingPod(t, nil)
	// 1000 fresh tokens: ~10 ms step overhead + 1000 x 35 µs prefill
	text := strings.TrimSpace(strings.Repeat("abcd ", 1000))
	n := len(tokenize(t, p.url, text))
	body, _ := json.Marshal(map[string]any{"input": []string{text}})
	postEmbeddings(t, p.url, "/v1/embeddings", string(body))
	mfs := scrape(t, p.url)
	value := func(name string) float64 {
		mf, ok := mfs[name]
		if !ok {
			t.Fatalf("%s missing", name)
		}
		return mf.GetMetric()[0].GetCounter().GetValue()
	}
	if got := value("vllm:prompt_tokens_total"); got != float64(n) {
		t.Errorf("prompt tokens %v, want %d", got, n)
	}
	if got := value("vllm:generation_tokens_total"); got != 0 {
		t.Errorf("generation tokens %v, want 0", got)
	}
	for _, m := range mfs["vllm:request_success_total"].GetMetric() {
		want := 0.0
		for _, l := range m.GetLabel() {
			if l.GetName() == "finished_reason" && l.GetValue() == "stop" {
				want = 1
			}
		}
		if m.GetCounter().GetValue() != want {
			t.Errorf("request_success_total %v", m)
		}
	}
	hist := func(name string) *dto.Histogram { return mfs[name].GetMetric()[0].GetHistogram() }
	if h := hist("vllm:time_to_first_token_seconds"); h.GetSampleCount() != 1 {
		t.Errorf("TTFT samples %d, want 1", h.GetSampleCount())
	}
	if e2e := hist("vllm:e2e_request_latency_seconds"); e2e.GetSampleCount() != 1 || e2e.GetSampleSum() < 0.03 || e2e.GetSampleSum() > 0.09 {
		t.Errorf("e2e latency: %d samples, sum %vs; want one of about 45 ms", e2e.GetSampleCount(), e2e.GetSampleSum())
	}
	if h := hist("vllm:request_decode_time_seconds"); h.GetSampleCount() != 1 || h.GetSampleSum() != 0 {
		t.Errorf("decode time: %d samples, sum %v; want one of 0", h.GetSampleCount(), h.GetSampleSum())
	}
	if h := hist("vllm:request_generation_tokens"); h.GetSampleCount() != 1 || h.GetSampleSum() != 0 {
		t.Errorf("generation tokens: %d samples, sum %v", h.GetSampleCount(), h.GetSampleSum())
	}
	if h := hist("vllm:request_params_max_tokens"); h.GetSampleCount() != 0 {
		t.Errorf("a pooling request has no max_tokens, observed %d", h.GetSampleCount())
	}
}

func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

func counter(t *testing.T, url, name string) float64 {
	t.Helper()
	mf, ok := scrape(t, url)[name]
	if !ok {
		t.Fatalf("%s missing", name)
	}
	return mf.GetMetric()[0].GetCounter().GetValue()
}

func detokenize(t *testing.T, url string, ids []uint32) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"tokens": ids})
	resp, b := post(t, url+"/detokenize", string(body))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("detokenize %v: %d %s", ids, resp.StatusCode, b)
	}
	var d struct {
		Prompt string `json:"prompt"`
	}
	strict(t, b, &d)
	return d.Prompt
}

// /detokenize is /tokenize's inverse, and turns generated token ids into
// their text.
func TestDetokenize(t *testing.T) {
	p := startPod(t, nil)
	for _, text := range []string{
		"hello world",
		"The quick brown fox, again: 42 times!\n\tindented",
		"naïve café — 日本語 😀",
		"<|begin_of_text|>special <|eot_id|>",
	} {
		ids := tokenize(t, p.url, text)
		if got := detokenize(t, p.url, ids); got != text {
			t.Errorf("%q detokenizes to %q", text, got)
		}
	}
	// a chat prompt rendered by the template, and bytes, and nothing
	_, b := post(t, p.url+"/tokenize", `{"messages":[{"role":"user","content":"hi there"}]}`)
	var tok struct {
		Tokens []uint32 `json:"tokens"`
	}
	if err := json.Unmarshal(b, &tok); err != nil {
		t.Fatal(err)
	}
	want := tokenizer.Llama3Template{}.Apply([]tokenizer.Message{{Role: "user", Content: "hi there"}}, true)
	if got := detokenize(t, p.url, tok.Tokens); got != want {
		t.Errorf("chat prompt detokenizes to %q, want %q", got, want)
	}
	if got := detokenize(t, p.url, []uint32{'h', 'i', '!'}); got != "hi!" {
		t.Errorf("bytes detokenize to %q", got)
	}
	if got := detokenize(t, p.url, []uint32{}); got != "" {
		t.Errorf("no tokens detokenize to %q", got)
	}
	// the output of a generate request decodes to words that tokenize back
	g := postGenerate(t, p.url, `{"token_ids":[1,2,3],"sampling_params":{"max_tokens":8}}`)
	out := g.Choices[0].TokenIDs
	text := detokenize(t, p.url, out)
	if back := tokenize(t, p.url, text); !slices.Equal(back, out) || strings.Contains(text, "<|id_") {
		t.Errorf("generated %v detokenize to %q, which tokenizes to %v", out, text, back)
	}
	for _, c := range []struct {
		body   string
		status int
		msg    string
	}{
		{`not json`, 400, "invalid request body"},
		{`{}`, 400, "tokens: required"},
		{`{"tokens":null}`, 400, "tokens: required"},
		{`{"tokens":"hello"}`, 400, "invalid request body"},
		{`{"tokens":[1.5]}`, 400, "invalid request body"},
		{`{"tokens":[-1]}`, 400, "Token id -1 is out of vocabulary"},
		{`{"tokens":[128256]}`, 400, "Token id 128256 is out of vocabulary"},
		{`{"model":"nope","tokens":[1]}`, 404, "The model `nope` does not exist."},
	} {
		resp, b := post(t, p.url+"/detokenize", c.body)
		var e errorBody
		strict(t, b, &e)
		if resp.StatusCode != c.status || e.Error.Code != c.status || !strings.Contains(e.Error.Message, c.msg) {
			t.Errorf("%s: %d %s", c.body, resp.StatusCode, b)
		}
	}
	if got := detokenize(t, p.url, []uint32{104, 105}); got != "hi" {
		t.Errorf("got %q", got)
	}
	resp, b := post(t, p.url+"/detokenize", `{"model":"sql-lora","tokens":[104,105]}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"prompt":"hi"`) {
		t.Errorf("an adapter's name: %d %s", resp.StatusCode, b)
	}
}

// BenchmarkEmbedding is the cost of making up a 384-float embedding, for
// an input of about 150 tokens.
func BenchmarkEmbedding(b *testing.B) {
	ids := tokenizer.Builtin{}.Encode(nil, strings.Repeat("a sentence to embed, ", 25))
	dst := make([]float32, DefaultEmbeddingDim)
	for b.Loop() {
		embedding(dst, ids)
	}
	b.ReportMetric(float64(len(ids)), "tokens/op")
}
