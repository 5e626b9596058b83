package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// completionLogprobs is vLLM's completions logprobs, decoded strictly.
type completionLogprobs struct {
	TextOffset    []int                `json:"text_offset"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	Tokens        []string             `json:"tokens"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
}

// chatLogprob and chatLogprobs are vLLM's chat logprobs.
type chatLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []byte  `json:"bytes"`
}

type chatLogprobs struct {
	Content []struct {
		Token       string        `json:"token"`
		Logprob     float64       `json:"logprob"`
		Bytes       []byte        `json:"bytes"`
		TopLogprobs []chatLogprob `json:"top_logprobs"`
	} `json:"content"`
}

// reLogprobs decodes a choice's logprobs member strictly into v.
func reLogprobs(t *testing.T, raw any, v any) {
	t.Helper()
	b, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	strict(t, b, v)
}

// checkCompletionLogprobs checks completions logprobs for text: its
// tokens, their offsets from offset, and k top logprobs each (the sampled
// token's alone for k 0), the sampled token's the highest and all below 0.
func checkCompletionLogprobs(t *testing.T, lp completionLogprobs, text string, offset, k int) {
	t.Helper()
	if strings.Join(lp.Tokens, "") != text || len(lp.TokenLogprobs) != len(lp.Tokens) || len(lp.TopLogprobs) != len(lp.Tokens) || len(lp.TextOffset) != len(lp.Tokens) {
		t.Fatalf("logprobs %+v for %q", lp, text)
	}
	for i, tok := range lp.Tokens {
		if lp.TextOffset[i] != offset {
			t.Errorf("token %d at %d, want %d", i, lp.TextOffset[i], offset)
		}
		offset += len(tok)
		top := lp.TopLogprobs[i]
		if len(top) != max(k, 1) || top[tok] != lp.TokenLogprobs[i] || lp.TokenLogprobs[i] >= 0 {
			t.Errorf("token %q (%v): top %v, want %d with it", tok, lp.TokenLogprobs[i], top, max(k, 1))
		}
		for other, v := range top {
			if other != tok && v >= lp.TokenLogprobs[i] {
				t.Errorf("token %q (%v): %q more likely (%v)", tok, lp.TokenLogprobs[i], other, v)
			}
		}
	}
}

// checkChatLogprobs checks chat logprobs for text: its tokens, their
// bytes, k top logprobs each, sorted, the sampled token first.
func checkChatLogprobs(t *testing.T, lp chatLogprobs, text string, k int) {
	t.Helper()
	var got strings.Builder
	for i, c := range lp.Content {
		got.WriteString(c.Token)
		if !bytes.Equal(c.Bytes, []byte(c.Token)) || c.Logprob >= 0 || len(c.TopLogprobs) != k {
			t.Errorf("token %d: %+v, want its bytes and %d top logprobs", i, c, k)
			continue
		}
		if k > 0 && (c.TopLogprobs[0].Token != c.Token || c.TopLogprobs[0].Logprob != c.Logprob) {
			t.Errorf("token %d: first top logprob %+v, want the token's", i, c.TopLogprobs[0])
		}
		for j := 1; j < len(c.TopLogprobs); j++ {
			if c.TopLogprobs[j].Logprob >= c.TopLogprobs[j-1].Logprob || !bytes.Equal(c.TopLogprobs[j].Bytes, []byte(c.TopLogprobs[j].Token)) {
				t.Errorf("token %d: top logprobs %+v not sorted or without their bytes", i, c.TopLogprobs)
			}
		}
	}
	if got.String() != text {
		t.Errorf("logprob tokens make %q, text %q", got.String(), text)
	}
}

// Completions logprobs: k (0..max) gives each token's logprob and the k
// most likely at its position, deterministic for a seed.
func TestCompletionLogprobs(t *testing.T) {
	p := startPod(t, nil)
	for _, k := range []int{0, 3, 20} {
		body := fmt.Sprintf(`{"prompt":"log my probabilities","max_tokens":6,"seed":5,"logprobs":%d}`, k)
		_, b := post(t, p.url+"/v1/completions", body)
		var r completionResponse
		strict(t, b, &r)
		var lp completionLogprobs
		reLogprobs(t, r.Choices[0].Logprobs, &lp)
		checkCompletionLogprobs(t, lp, r.Choices[0].Text, 0, k)
		_, again := post(t, p.url+"/v1/completions", body)
		var r2 completionResponse
		strict(t, again, &r2)
		if !reflect.DeepEqual(r2.Choices[0].Logprobs, r.Choices[0].Logprobs) {
			t.Errorf("logprobs=%d: differ between two answers", k)
		}
	}
	// without logprobs: null
	_, b := post(t, p.url+"/v1/completions", `{"prompt":"x","max_tokens":2}`)
	if !strings.Contains(string(b), `"logprobs":null`) {
		t.Errorf("no logprobs asked: %s", b)
	}
}

// Chat logprobs: true with top_logprobs k (0 by default) gives each
// token's logprob, bytes and k top logprobs.
func TestChatLogprobs(t *testing.T) {
	p := startPod(t, nil)
	for _, extra := range []string{`"logprobs":true`, `"logprobs":true,"top_logprobs":0`, `"logprobs":true,"top_logprobs":4`} {
		k := 0
		if strings.HasSuffix(extra, "4") {
			k = 4
		}
		_, b := post(t, p.url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"n":2,`+extra+`}`)
		var r chatResponse
		strict(t, b, &r)
		for _, c := range r.Choices {
			var lp chatLogprobs
			reLogprobs(t, c.Logprobs, &lp)
			checkChatLogprobs(t, lp, c.Message.Content, k)
		}
	}
	_, b := post(t, p.url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"logprobs":false}`)
	if !strings.Contains(string(b), `"logprobs":null`) {
		t.Errorf("logprobs false: %s", b)
	}
}

// Streamed logprobs: each chunk carries its token's, the values the plain
// answer has (completions' offsets continuing over the chunks).
func TestLogprobsStream(t *testing.T) {
	p := startPod(t, nil)
	t.Run("completions", func(t *testing.T) {
		body := `{"prompt":"stream my logprobs","max_tokens":6,"seed":2,"logprobs":2`
		_, b := post(t, p.url+"/v1/completions", body+"}")
		var plain completionResponse
		strict(t, b, &plain)
		var want completionLogprobs
		reLogprobs(t, plain.Choices[0].Logprobs, &want)
		var got completionLogprobs
		for _, c := range streamChunks(t, p.url, "/v1/completions", body+`,"stream":true}`) {
			var cr completionResponse
			strict(t, []byte(c), &cr)
			var lp completionLogprobs
			reLogprobs(t, cr.Choices[0].Logprobs, &lp)
			if len(lp.Tokens) != 1 {
				t.Fatalf("chunk %s: want one token's logprobs", c)
			}
			got.TextOffset = append(got.TextOffset, lp.TextOffset...)
			got.TokenLogprobs = append(got.TokenLogprobs, lp.TokenLogprobs...)
			got.Tokens = append(got.Tokens, lp.Tokens...)
			got.TopLogprobs = append(got.TopLogprobs, lp.TopLogprobs...)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("streamed %+v\nplain %+v", got, want)
		}
	})
	t.Run("chat", func(t *testing.T) {
		body := `{"messages":[{"role":"user","content":"stream"}],"max_tokens":6,"seed":2,"logprobs":true,"top_logprobs":3`
		_, b := post(t, p.url+"/v1/chat/completions", body+"}")
		var plain chatResponse
		strict(t, b, &plain)
		var want chatLogprobs
		reLogprobs(t, plain.Choices[0].Logprobs, &want)
		var got chatLogprobs
		for _, c := range streamChunks(t, p.url, "/v1/chat/completions", body+`,"stream":true}`) {
			var r chatResponse
			strict(t, []byte(c), &r)
			if r.Choices[0].Delta.Role != nil {
				if r.Choices[0].Logprobs != nil {
					t.Errorf("role chunk with logprobs: %s", c)
				}
				continue
			}
			var lp chatLogprobs
			reLogprobs(t, r.Choices[0].Logprobs, &lp)
			got.Content = append(got.Content, lp.Content...)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("streamed %+v\nplain %+v", got, want)
		}
	})
}

// --max-logprobs bounds what a request may ask for; generate's
// sampling_params.logprobs answers in chat's shape with token ids.
func TestLogprobsLimitAndGenerate(t *testing.T) {
	p := startPod(t, func(c *Config) { c.MaxLogprobs = 2 })
	resp, b := post(t, p.url+"/v1/completions", `{"prompt":"x","logprobs":3}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "Requested sample logprobs of 3, which is greater than max allowed: 2") {
		t.Errorf("over --max-logprobs: %d %s", resp.StatusCode, b)
	}
	_, b = post(t, p.url+"/inference/v1/generate", `{"token_ids":[1,2,3],"sampling_params":{"max_tokens":3,"logprobs":2}}`)
	var g generateResponse
	strict(t, b, &g)
	var lp struct {
		Content []struct {
			Token       string  `json:"token"`
			Logprob     float64 `json:"logprob"`
			Bytes       *[]int  `json:"bytes"`
			TopLogprobs []struct {
				Token   string  `json:"token"`
				Logprob float64 `json:"logprob"`
				Bytes   *[]int  `json:"bytes"`
			} `json:"top_logprobs"`
		} `json:"content"`
	}
	reLogprobs(t, g.Choices[0].Logprobs, &lp)
	if len(lp.Content) != 3 {
		t.Fatalf("logprobs %s", b)
	}
	for i, c := range lp.Content {
		if c.Token != fmt.Sprintf("token_id:%d", g.Choices[0].TokenIDs[i]) || c.Bytes != nil || len(c.TopLogprobs) != 2 ||
			c.TopLogprobs[0].Token != c.Token || c.TopLogprobs[1].Logprob >= c.Logprob || math.IsNaN(c.Logprob) {
			t.Errorf("token %d: %+v", i, c)
		}
	}
}
