package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/hermod/hermod/libs/kv/events"
	"github.com/hermod/hermod/libs/kv/kvzmq"
)

// generateResponse is vLLM's generate answer, and (request_id, choices,
// usage) its stream chunks, decoded strictly.
type generateResponse struct {
	RequestID string `json:"request_id"`
	Model     string `json:"model"`
	Created   int64  `json:"created"`
	Choices   []struct {
		Index        int      `json:"index"`
		Logprobs     any      `json:"logprobs"`
		FinishReason *string  `json:"finish_reason"`
		TokenIDs     []uint32 `json:"token_ids"`
	} `json:"choices"`
	Usage            *usage `json:"usage"`
	PromptLogprobs   any    `json:"prompt_logprobs"`
	KVTransferParams any    `json:"kv_transfer_params"`
}

// promptIDs returns n token ids from first on, a prompt no text
// tokenizes to.
func promptIDs(n int, first uint32) []uint32 {
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = first + uint32(i)*7
	}
	return ids
}

func idsJSON(ids []uint32) string {
	b, _ := json.Marshal(ids)
	return string(b)
}

// postGenerate sends body to /inference/v1/generate and decodes the 200
// answer.
func postGenerate(t *testing.T, url, body string) generateResponse {
	t.Helper()
	resp, b := post(t, url+"/inference/v1/generate", body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d (%s): %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	var g generateResponse
	strict(t, b, &g)
	if len(g.Choices) != 1 || g.Usage == nil {
		t.Fatalf("answer %s", b)
	}
	return g
}

func TestGenerate(t *testing.T) {
	p := startPod(t, nil)
	prompt := promptIDs(40, 1000)
	body := fmt.Sprintf(`{"request_id":"req-7","model":"llama","token_ids":%s,"sampling_params":{"max_tokens":10,"temperature":0.7,"stop":[]},
		"cache_salt":"s","priority":0,"features":null,"kv_transfer_params":null}`, idsJSON(prompt))
	resp, b := post(t, p.url+"/inference/v1/generate", body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var g generateResponse
	strict(t, b, &g)
	want := []string{"request_id", "model", "created", "choices", "usage", "prompt_logprobs", "kv_transfer_params"}
	if keys := topLevelKeys(t, b); !slices.Equal(keys, want) {
		t.Errorf("members %v, want %v", keys, want)
	}
	if g.RequestID != "generate-tokens-req-7" || g.Model != "llama" || g.Created == 0 || g.PromptLogprobs != nil || g.KVTransferParams != nil ||
		!bytes.Contains(b, []byte(`"prompt_logprobs":null,"kv_transfer_params":null`)) {
		t.Errorf("answer %s", b)
	}
	c := g.Choices[0]
	if len(g.Choices) != 1 || c.Index != 0 || c.Logprobs != nil || c.FinishReason == nil || *c.FinishReason != "length" || len(c.TokenIDs) != 10 ||
		!bytes.Contains(b, []byte(`"logprobs":null`)) {
		t.Errorf("choices %s", b)
	}
	if u := g.Usage; u.PromptTokens != 40 || u.CompletionTokens != 10 || u.TotalTokens != 50 || u.PromptTokensDetails != nil {
		t.Errorf("usage %+v", u)
	}

	// The same prompt answers the same ids (seeded by the prompt), from the
	// prefix cache, under a response id of the pod's when none is given.
	again := postGenerate(t, p.url, fmt.Sprintf(`{"token_ids":%s,"sampling_params":{"max_tokens":10}}`, idsJSON(prompt)))
	if !slices.Equal(again.Choices[0].TokenIDs, c.TokenIDs) || !strings.HasPrefix(again.RequestID, "generate-tokens-") || again.RequestID == g.RequestID {
		t.Errorf("repeat: ids %v (first %v), id %s", again.Choices[0].TokenIDs, c.TokenIDs, again.RequestID)
	}
	if d := again.Usage.PromptTokensDetails; d == nil || d.CachedTokens != 32 {
		t.Errorf("repeat usage %+v, want the 2 full blocks of the prompt cached", again.Usage)
	}

	// Without max_tokens the output is a completion's default, 16 tokens;
	// the model may be an adapter; a seed in sampling_params sets the ids.
	def := postGenerate(t, p.url, fmt.Sprintf(`{"model":"sql-lora","token_ids":%s,"sampling_params":{"max_tokens":null,"seed":3},"max_tokens":2}`, idsJSON(prompt)))
	if def.Model != "sql-lora" || len(def.Choices[0].TokenIDs) != 16 || *def.Choices[0].FinishReason != "length" || def.Usage.CompletionTokens != 16 {
		t.Errorf("default limit: %+v", def)
	}
	seeded := postGenerate(t, p.url, fmt.Sprintf(`{"token_ids":%s,"sampling_params":{"max_tokens":16,"seed":3}}`, idsJSON(promptIDs(5, 9))))
	if !slices.Equal(seeded.Choices[0].TokenIDs, def.Choices[0].TokenIDs) {
		t.Errorf("seed 3 answered %v and %v", seeded.Choices[0].TokenIDs, def.Choices[0].TokenIDs)
	}

	// vLLM's metrics count generate requests like completions: 4 requests
	// stopped by their limit
	if got := successTotal(t, p.url, "length"); got != 4 {
		t.Errorf(`request_success_total{finished_reason="length"} = %v, want 4`, got)
	}
}

func TestGenerateStream(t *testing.T) {
	p := startPod(t, nil)
	prompt := idsJSON(promptIDs(20, 500))
	plain := postGenerate(t, p.url, fmt.Sprintf(`{"token_ids":%s,"sampling_params":{"max_tokens":8}}`, prompt))
	for _, c := range []struct {
		name, options string
		usage         bool
	}{
		{"include_usage", `,"stream_options":{"include_usage":true}`, true},
		{"include_usage false", `,"stream_options":{"include_usage":false}`, false},
		{"stream_options without include_usage", `,"stream_options":{}`, true}, // vLLM's default is true
		{"no stream_options", ``, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := fmt.Sprintf(`{"request_id":"s-1","token_ids":%s,"sampling_params":{"max_tokens":8},"stream":true%s}`, prompt, c.options)
			resp, err := http.Post(p.url+"/inference/v1/generate", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			data := readSSE(t, resp.Body)
			if len(data) == 0 || data[len(data)-1] != "[DONE]" {
				t.Fatalf("stream does not end with [DONE]: %q", data)
			}
			chunks := data[:len(data)-1]
			var ids []uint32
			finished := 0
			for i, chunk := range chunks {
				var g generateResponse
				strict(t, []byte(chunk), &g)
				if g.RequestID != "generate-tokens-s-1" {
					t.Errorf("chunk %d: request_id %q", i, g.RequestID)
				}
				if c.usage && i == len(chunks)-1 {
					if keys := topLevelKeys(t, []byte(chunk)); !slices.Equal(keys, []string{"request_id", "choices", "usage"}) || len(g.Choices) != 0 {
						t.Errorf("usage chunk %s", chunk)
					}
					if u := g.Usage; u == nil || u.PromptTokens != 20 || u.CompletionTokens != 8 || u.TotalTokens != 28 {
						t.Errorf("usage %s", chunk)
					}
					continue
				}
				if keys := topLevelKeys(t, []byte(chunk)); !slices.Equal(keys, []string{"request_id", "choices"}) || len(g.Choices) != 1 {
					t.Fatalf("token chunk %s", chunk)
				}
				ch := g.Choices[0]
				if ch.Index != 0 || ch.Logprobs != nil || len(ch.TokenIDs) != 1 || !strings.Contains(chunk, `"logprobs":null`) {
					t.Errorf("token chunk %s", chunk)
				}
				ids = append(ids, ch.TokenIDs...)
				switch {
				case ch.FinishReason == nil:
					if !strings.Contains(chunk, `"finish_reason":null`) {
						t.Errorf("token chunk %s", chunk)
					}
				case *ch.FinishReason == "length" && len(ids) == 8:
					finished++
				default:
					t.Errorf("finish_reason before the last token: %s", chunk)
				}
			}
			// the stream's ids are the plain answer's, one per chunk
			if !slices.Equal(ids, plain.Choices[0].TokenIDs) || finished != 1 {
				t.Errorf("streamed ids %v (%d with finish_reason), plain %v", ids, finished, plain.Choices[0].TokenIDs)
			}
		})
	}
}

func TestGenerateErrors(t *testing.T) {
	p := startPod(t, func(c *Config) { c.Engine.MaxModelLen = 100 })
	sp := `"sampling_params":{}`
	cases := []struct {
		body   string
		status int
		msg    string
	}{
		{`not json`, 400, "invalid request body"},
		{`{"token_ids":[1,2],` + sp, 400, "invalid request body"},
		{`[1,2]`, 400, "invalid request body"},
		{`{` + sp + `}`, 400, "token_ids"},
		{`{"token_ids":[],` + sp + `}`, 400, "token_ids"},
		{`{"token_ids":null,` + sp + `}`, 400, "token_ids"},
		{`{"token_ids":[1,-2],` + sp + `}`, 400, "token_ids"},
		{`{"token_ids":[1.5],` + sp + `}`, 400, "token_ids"},
		{`{"token_ids":["1"],` + sp + `}`, 400, "token_ids"},
		{`{"token_ids":[4294967296],` + sp + `}`, 400, "token_ids"},
		{`{"token_ids":"1 2",` + sp + `}`, 400, "token_ids"},
		{`{"token_ids":[1]}`, 400, "sampling_params: required"},
		{`{"token_ids":[1],"sampling_params":null}`, 400, "sampling_params"},
		{`{"token_ids":[1],"sampling_params":[]}`, 400, "sampling_params: must be an object"},
		{`{"token_ids":[1],"sampling_params":{"max_tokens":0}}`, 400, "max_tokens must be at least 1, got 0."},
		{`{"token_ids":[1],"sampling_params":{"max_tokens":-1}}`, 400, "sampling_params.max_tokens"},
		{`{"token_ids":[1],"sampling_params":{"max_tokens":"8"}}`, 400, "sampling_params.max_tokens"},
		{`{"token_ids":[1],"sampling_params":{"n":0}}`, 400, "n must be at least 1, got 0."},
		{`{"token_ids":[1],"sampling_params":{"n":257}}`, 400, "sampling_params.n must be at most the server's max_num_seqs (256), got 257."},
		{`{"token_ids":[1],"sampling_params":{"n":2,"temperature":0}}`, 400, "n must be 1 when using greedy sampling, got 2."},
		{`{"token_ids":[1],"sampling_params":{"logprobs":-2}}`, 400, "logprobs must be non-negative or -1, got -2."},
		{`{"token_ids":[1],"sampling_params":{"logprobs":21}}`, 400, "Requested sample logprobs of 21, which is greater than max allowed: 20"},
		{`{"token_ids":[1],"sampling_params":{"seed":"x"}}`, 400, "invalid sampling_params"},
		{`{"token_ids":[1],"request_id":5,` + sp + `}`, 400, "invalid request body"},
		{`{"token_ids":[1],"model":3,` + sp + `}`, 400, "model"},
		{fmt.Sprintf(`{"token_ids":%s,"sampling_params":{"max_tokens":50}}`, idsJSON(promptIDs(60, 1))), 400, "maximum context length is 100 tokens"},
		{fmt.Sprintf(`{"token_ids":%s,`+sp+`}`, idsJSON(promptIDs(100, 1))), 400, "maximum context length is 100 tokens"},
		{`{"model":"nope","token_ids":[1],` + sp + `}`, 404, "The model `nope` does not exist."},
	}
	for _, c := range cases {
		resp, b := post(t, p.url+"/inference/v1/generate", c.body)
		var e errorBody
		strict(t, b, &e)
		typ := "BadRequestError"
		if c.status == http.StatusNotFound {
			typ = "NotFoundError"
		}
		if resp.StatusCode != c.status || e.Error.Code != c.status || e.Error.Type != typ || !strings.Contains(e.Error.Message, c.msg) {
			t.Errorf("%s: %d %s, want %d %q", c.body, resp.StatusCode, b, c.status, c.msg)
		}
	}
	// stream_options without stream is no error here (vLLM's generate
	// request has no such check)
	postGenerate(t, p.url, `{"token_ids":[1],"sampling_params":{"max_tokens":1},"stream_options":{"include_usage":true}}`)
}

// Faults are injected as on the other APIs, in the OpenAI error shape; the
// API key vLLM asks for under /v1 only is not asked here.
func TestGenerateFaultsAndAPIKey(t *testing.T) {
	p := startPod(t, func(c *Config) {
		c.Faults = Faults{ErrorRates: map[string]float64{"429": 1}}
		c.APIKey = "sk-sim"
	})
	body := `{"token_ids":[1,2,3],"sampling_params":{"max_tokens":2}}`
	resp, b := post(t, p.url+"/inference/v1/generate", body)
	var e errorBody
	strict(t, b, &e)
	if resp.StatusCode != http.StatusTooManyRequests || e.Error.Type != "RateLimitError" || !strings.Contains(e.Error.Message, "injected") {
		t.Errorf("fault: %d %s", resp.StatusCode, b)
	}
	if status := put(t, p.url+"/sim/faults", `{}`); status != http.StatusOK {
		t.Fatalf("put faults: %d", status)
	}
	if g := postGenerate(t, p.url, body); len(g.Choices[0].TokenIDs) != 2 {
		t.Errorf("without faults: %+v", g)
	}
	if resp, _ := post(t, p.url+"/v1/completions", `{"prompt":"x","max_tokens":1}`); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("completions without the key: %d", resp.StatusCode)
	}
}

// A stream's first byte comes with the first token, after the prefill, as
// the other APIs' do.
func TestGenerateStreamFirstByteIsFirstToken(t *testing.T) {
	p := startPod(t, func(c *Config) { c.Speed = 1 })
	body := fmt.Sprintf(`{"token_ids":%s,"sampling_params":{"max_tokens":2},"stream":true}`, idsJSON(promptIDs(4400, 300))) // ~165 ms TTFT
	start := time.Now()
	resp, err := http.Post(p.url+"/inference/v1/generate", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make([]byte, 1)
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatal(err)
	}
	if ttfb := time.Since(start); ttfb < 100*time.Millisecond {
		t.Errorf("first byte after %s, before the prefill of ~165 ms could finish", ttfb)
	}
	rest, _ := io.ReadAll(resp.Body)
	data := readSSE(t, io.MultiReader(bytes.NewReader(first), bytes.NewReader(rest)))
	if len(data) != 3 || !strings.Contains(data[0], `"token_ids":[`) || data[2] != "[DONE]" {
		t.Errorf("chunks %q", data)
	}
}

// counterTotal reads the counter name, summed over its series.
func counterTotal(t *testing.T, url, name string) float64 {
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
	total := 0.0
	for _, m := range mfs[name].GetMetric() {
		total += m.GetCounter().GetValue()
	}
	return total
}

// The token ids are the prompt the engine caches, as a completions
// request's token-id prompt: the KV events store their blocks (and the
// output's, under the ids the answer returns), the prefix cache and the
// metrics count them, and a completions request with the same ids hits
// the same blocks.
func TestGenerateKVBlocks(t *testing.T) {
	p := startPod(t, nil)
	sub, err := kvzmq.Subscribe(fmt.Sprintf("tcp://127.0.0.1:%d", p.zmqPort), false, "kv@", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	time.Sleep(200 * time.Millisecond) // let the SUB join
	prompt := promptIDs(40, 2000)      // 2 full blocks and 8 tokens
	g := postGenerate(t, p.url, fmt.Sprintf(`{"token_ids":%s,"sampling_params":{"max_tokens":10}}`, idsJSON(prompt)))
	out := g.Choices[0].TokenIDs

	var dec events.Decoder
	var stored []uint32
	for {
		m, err := sub.Recv(time.Second)
		if err != nil {
			break
		}
		var b events.Batch
		if err := dec.Decode(m.Payload, &b); err != nil {
			t.Fatalf("seq %d: %v", m.Seq, err)
		}
		for _, e := range b.Events {
			if e.Kind == events.KindBlockStored {
				if len(e.TokenIDs) != len(e.BlockHashes)*16 || e.BlockSize != 16 {
					t.Errorf("BlockStored %+v", e)
				}
				stored = append(stored, e.TokenIDs...)
			}
		}
	}
	// 49 of the 50 tokens are computed (not the last output token): 3 full
	// blocks, the third holding the prompt's last 8 ids and the output's
	// first 8
	want := append(slices.Clone(prompt), out[:8]...)
	if !slices.Equal(stored, want) {
		t.Errorf("stored blocks hold %v, want the prompt and output %v", stored, want)
	}
	if got := counterTotal(t, p.url, "vllm:prompt_tokens_total"); got != 40 {
		t.Errorf("vllm:prompt_tokens_total = %v, want 40", got)
	}
	if got := counterTotal(t, p.url, "vllm:prefix_cache_queries_total"); got != 40 {
		t.Errorf("vllm:prefix_cache_queries_total = %v, want 40", got)
	}

	// a completions request whose prompt is the same ids hits the prompt's
	// blocks
	_, b := post(t, p.url+"/v1/completions", fmt.Sprintf(`{"prompt":%s,"max_tokens":1}`, idsJSON(prompt)))
	var c completionResponse
	strict(t, b, &c)
	if c.Usage.PromptTokens != 40 || c.Usage.PromptTokensDetails == nil || c.Usage.PromptTokensDetails.CachedTokens != 32 {
		t.Errorf("completions after generate: usage %+v, want 32 of 40 tokens cached", c.Usage)
	}
	// the prompt and the output sent back hit the output's block too
	next := postGenerate(t, p.url, fmt.Sprintf(`{"token_ids":%s,"sampling_params":{"max_tokens":1}}`, idsJSON(append(slices.Clone(prompt), out...))))
	if u := next.Usage; u.PromptTokens != 50 || u.PromptTokensDetails == nil || u.PromptTokensDetails.CachedTokens != 48 {
		t.Errorf("next turn: usage %+v, want 48 of 50 tokens cached", u)
	}
}
