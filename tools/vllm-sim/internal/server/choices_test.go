package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// choicesBody is a completions or chat request body for the prompt text
// with the extra members (a JSON object's inside, without braces).
func choicesBody(api, text, extra string) (path, body string) {
	if api == "chat" {
		return "/v1/chat/completions", fmt.Sprintf(`{"model":"llama","messages":[{"role":"user","content":%q}],%s}`, text, extra)
	}
	return "/v1/completions", fmt.Sprintf(`{"model":"llama","prompt":%q,%s}`, text, extra)
}

// choiceTexts posts a completions or chat request and returns the text of
// each choice, checking that the choices are indexed 0..n-1.
func choiceTexts(t *testing.T, url, api, text, extra string) ([]string, usage) {
	t.Helper()
	path, body := choicesBody(api, text, extra)
	resp, b := post(t, url+path, body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %s", body, resp.StatusCode, b)
	}
	var texts []string
	var u *usage
	if api == "chat" {
		var r chatResponse
		strict(t, b, &r)
		for i, c := range r.Choices {
			if c.Index != i {
				t.Errorf("choice %d has index %d", i, c.Index)
			}
			texts = append(texts, c.Message.Content)
		}
		u = r.Usage
	} else {
		var r completionResponse
		strict(t, b, &r)
		for i, c := range r.Choices {
			if c.Index != i || *c.FinishReason != "length" {
				t.Errorf("choice %d: index %d, finish_reason %s", i, c.Index, *c.FinishReason)
			}
			texts = append(texts, c.Text)
		}
		u = r.Usage
	}
	return texts, *u
}

// A request for n outputs gets n choices, indexed 0..n-1, each its own
// deterministic text: output i of a request seeded s is seeded s+i, as
// vLLM seeds its child requests. Usage counts the prompt once and the
// tokens of every output.
func TestNChoices(t *testing.T) {
	p := startPod(t, nil)
	for _, api := range []string{"completions", "chat"} {
		t.Run(api, func(t *testing.T) {
			texts, u := choiceTexts(t, p.url, api, "tell me three things", `"max_tokens":6,"n":3,"seed":40`)
			if len(texts) != 3 {
				t.Fatalf("%d choices", len(texts))
			}
			for i, text := range texts {
				if len(strings.Fields(text)) != 6 {
					t.Errorf("choice %d: %q, want 6 words", i, text)
				}
			}
			if texts[0] == texts[1] || texts[1] == texts[2] {
				t.Errorf("choices alike: %q", texts)
			}
			single, su := choiceTexts(t, p.url, api, "tell me three things", `"max_tokens":6`)
			if u.CompletionTokens != 18 || u.PromptTokens != su.PromptTokens || u.TotalTokens != u.PromptTokens+18 {
				t.Errorf("usage %+v, one output's %+v", u, su)
			}
			if len(single) != 1 {
				t.Errorf("n absent: %d choices", len(single))
			}
			again, _ := choiceTexts(t, p.url, api, "tell me three things", `"max_tokens":6,"n":3,"seed":40`)
			if !slices.Equal(again, texts) {
				t.Errorf("the same request answered %q, then %q", texts, again)
			}
			second, _ := choiceTexts(t, p.url, api, "tell me three things", `"max_tokens":6,"seed":41`)
			if second[0] != texts[1] {
				t.Errorf("output 1 of seed 40 %q, output 0 of seed 41 %q: want the same", texts[1], second[0])
			}
		})
	}
}

// streamChunks posts a streaming request and returns its chunks (without
// [DONE], which it checks ends the stream).
func streamChunks(t *testing.T, url, path, body string) []string {
	t.Helper()
	resp, err := http.Post(url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%s: %d %s", body, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	data := readSSE(t, resp.Body)
	if len(data) == 0 || data[len(data)-1] != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %q", data)
	}
	return data[:len(data)-1]
}

// A stream of n outputs sends every output's tokens as chunks of its
// index, interleaved as the engine produces them, a finish_reason for
// each, the assistant role for each first (chat), and the usage summed
// over them at the end; the texts are the plain answer's.
func TestNChoicesStream(t *testing.T) {
	p := startPod(t, nil)
	for _, api := range []string{"completions", "chat"} {
		t.Run(api, func(t *testing.T) {
			plain, _ := choiceTexts(t, p.url, api, "stream three", `"max_tokens":5,"n":3,"seed":9`)
			path, body := choicesBody(api, "stream three", `"max_tokens":5,"n":3,"seed":9,"stream":true,"stream_options":{"include_usage":true}`)
			chunks := streamChunks(t, p.url, path, body)
			texts := make([]strings.Builder, 3)
			finished, roles := make([]int, 3), make([]int, 3)
			var order []int
			for i, c := range chunks {
				if i == len(chunks)-1 {
					var last struct {
						Choices []any  `json:"choices"`
						Usage   *usage `json:"usage"`
					}
					if err := json.Unmarshal([]byte(c), &last); err != nil || len(last.Choices) != 0 || last.Usage == nil || last.Usage.CompletionTokens != 15 {
						t.Errorf("last chunk %s, want the usage of 15 tokens", c)
					}
					continue
				}
				var r chatResponse
				if api == "chat" {
					strict(t, []byte(c), &r)
				} else {
					var cr completionResponse
					strict(t, []byte(c), &cr)
					for _, ch := range cr.Choices {
						texts[ch.Index].WriteString(ch.Text)
						order = append(order, ch.Index)
						if ch.FinishReason != nil {
							finished[ch.Index]++
						}
					}
				}
				for _, ch := range r.Choices {
					if ch.Delta.Role != nil {
						roles[ch.Index]++
						continue
					}
					texts[ch.Index].WriteString(*ch.Delta.Content)
					order = append(order, ch.Index)
					if ch.FinishReason != nil {
						finished[ch.Index]++
					}
				}
			}
			for i := range 3 {
				if texts[i].String() != plain[i] || finished[i] != 1 || api == "chat" && roles[i] != 1 {
					t.Errorf("choice %d: streamed %q (%d finish reasons, %d roles), plain %q", i, texts[i].String(), finished[i], roles[i], plain[i])
				}
			}
			// interleaved: not all of one output before the next
			if slices.IsSorted(order) {
				t.Errorf("chunks by index %v: want the outputs interleaved", order)
			}
		})
	}
}

// The n outputs run as n sequences of the engine, as vLLM runs n child
// requests: their tokens are counted, the others share the first's
// prompt blocks, and vllm:request_params_n observes n once.
func TestNChoicesEngine(t *testing.T) {
	p := startPod(t, nil)
	prompt := strings.Repeat("a prompt of many blocks ", 40)
	genBefore := counter(t, p.url, "vllm:generation_tokens_total")
	_, u := choiceTexts(t, p.url, "completions", prompt, `"max_tokens":4,"n":4`)
	if gen := counter(t, p.url, "vllm:generation_tokens_total") - genBefore; gen != 16 {
		t.Errorf("generation tokens %v, want 16", gen)
	}
	if hits := counter(t, p.url, "vllm:prefix_cache_hits_total"); hits != float64(3*((u.PromptTokens-1)/16*16)) {
		t.Errorf("prefix cache hits %v: want three outputs to find the first's %d-token prompt", hits, u.PromptTokens)
	}
	if got := successTotal(t, p.url, "length"); got != 4 {
		t.Errorf("request_success_total{length} %v, want 4 (one per output)", got)
	}
	n := scrape(t, p.url)["vllm:request_params_n"].GetMetric()[0].GetHistogram()
	if n.GetSampleCount() != 1 || n.GetSampleSum() != 4 {
		t.Errorf("request_params_n: %d samples summing to %v, want one of 4", n.GetSampleCount(), n.GetSampleSum())
	}
}

// vLLM's generate API answers sampling_params.n outputs too, plain and
// streamed.
func TestGenerateN(t *testing.T) {
	p := startPod(t, nil)
	body := func(stream bool) string {
		return fmt.Sprintf(`{"token_ids":%s,"sampling_params":{"max_tokens":4,"n":2,"seed":3},"stream":%t}`, idsJSON(promptIDs(20, 1)), stream)
	}
	resp, b := post(t, p.url+"/inference/v1/generate", body(false))
	var r generateResponse
	strict(t, b, &r)
	if resp.StatusCode != http.StatusOK || len(r.Choices) != 2 || r.Choices[1].Index != 1 ||
		slices.Equal(r.Choices[0].TokenIDs, r.Choices[1].TokenIDs) || r.Usage.CompletionTokens != 8 {
		t.Fatalf("answer %d %s", resp.StatusCode, b)
	}
	ids := make([][]uint32, 2)
	for _, c := range streamChunks(t, p.url, "/inference/v1/generate", body(true)) {
		var chunk generateResponse
		strict(t, []byte(c), &chunk)
		for _, ch := range chunk.Choices {
			ids[ch.Index] = append(ids[ch.Index], ch.TokenIDs...)
		}
	}
	for i := range 2 {
		if !slices.Equal(ids[i], r.Choices[i].TokenIDs) {
			t.Errorf("output %d streamed %v, plain %v", i, ids[i], r.Choices[i].TokenIDs)
		}
	}
}
