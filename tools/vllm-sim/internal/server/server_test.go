package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/hermod/hermod/libs/kv/events"
	"github.com/hermod/hermod/libs/kv/kvzmq"
	"github.com/hermod/hermod/tools/vllm-sim/internal/engine"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

type testPod struct {
	*Pod
	url        string
	zmqPort    int
	replayPort int
}

// startPod runs a pod at speed 20 (tests wait less) with KV events on.
func startPod(t *testing.T, mutate func(*Config)) *testPod {
	t.Helper()
	zmqPort, replayPort := freePort(t), freePort(t)
	ec := engine.DefaultConfig("")
	ec.Adapters = []string{"sql-lora"}
	cfg := Config{
		Name: "pod-a", Host: "127.0.0.1", ModelPath: "meta-llama/Llama-3.1-8B-Instruct", ServedNames: []string{"llama"},
		Adapters: map[string]string{"sql-lora": "/adapters/sql"}, Engine: ec, Speed: 20, Seed: 1,
		KVEvents: KVEventsConfig{Enabled: true, Endpoint: fmt.Sprintf("tcp://*:%d", zmqPort), ReplayEndpoint: fmt.Sprintf("tcp://*:%d", replayPort),
			Topic: "kv@pod-a@llama", BufferSteps: 1000},
		PromptTokensDetails: true,
		Logger:              slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := New(cfg, engine.NewWallClock(cfg.Speed))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("pod run: %v", err)
		}
	})
	select {
	case <-p.Ready():
	case err := <-done:
		t.Fatalf("pod stopped: %v", err)
	}
	return &testPod{Pod: p, url: "http://" + p.Addr(), zmqPort: zmqPort, replayPort: replayPort}
}

// reply is a read HTTP response.
type reply struct {
	StatusCode int
	Header     http.Header
}

func post(t *testing.T, url, body string) (reply, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{resp.StatusCode, resp.Header}, b
}

// completionResponse is the OpenAI completions shape, decoded strictly.
type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

type completionResponse struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index        int     `json:"index"`
		Text         string  `json:"text"`
		Logprobs     any     `json:"logprobs"`
		FinishReason *string `json:"finish_reason"`
		StopReason   any     `json:"stop_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

type chatResponse struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message *struct {
			Role      string `json:"role"`
			Content   string `json:"content"`
			ToolCalls []any  `json:"tool_calls"`
		} `json:"message"`
		Delta *struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		Logprobs     any     `json:"logprobs"`
		FinishReason *string `json:"finish_reason"`
		StopReason   any     `json:"stop_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

func strict(t *testing.T, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("response does not match the OpenAI shape: %v\n%s", err, b)
	}
}

func TestCompletion(t *testing.T) {
	p := startPod(t, nil)
	prompt := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 40)
	resp, b := post(t, p.url+"/v1/completions", fmt.Sprintf(`{"model":"llama","prompt":%q,"max_tokens":12}`, prompt))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var r completionResponse
	strict(t, b, &r)
	if !strings.HasPrefix(r.ID, "cmpl-") || r.Object != "text_completion" || r.Model != "llama" || len(r.Choices) != 1 {
		t.Errorf("response %+v", r)
	}
	c := r.Choices[0]
	if *c.FinishReason != "length" || len(strings.Fields(c.Text)) != 12 {
		t.Errorf("choice %+v", c)
	}
	if r.Usage.CompletionTokens != 12 || r.Usage.PromptTokens == 0 || r.Usage.TotalTokens != r.Usage.PromptTokens+12 || r.Usage.PromptTokensDetails != nil {
		t.Errorf("usage %+v", r.Usage)
	}
	// The same prompt again hits the prefix cache; the text is the same
	// (seeded by the prompt).
	_, b = post(t, p.url+"/v1/completions", fmt.Sprintf(`{"model":"llama","prompt":%q,"max_tokens":12}`, prompt))
	var again completionResponse
	strict(t, b, &again)
	if again.Usage.PromptTokensDetails == nil || again.Usage.PromptTokensDetails.CachedTokens < r.Usage.PromptTokens-16 {
		t.Errorf("repeat usage %+v, want cached tokens", again.Usage)
	}
	if again.Choices[0].Text != c.Text {
		t.Errorf("text differs for the same prompt: %q vs %q", again.Choices[0].Text, c.Text)
	}
}

func TestChatCompletion(t *testing.T) {
	p := startPod(t, nil)
	resp, b := post(t, p.url+"/v1/chat/completions", `{"model":"llama","messages":[{"role":"user","content":"Hello there"}],"max_tokens":5}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var r chatResponse
	strict(t, b, &r)
	if !strings.HasPrefix(r.ID, "chatcmpl-") || r.Object != "chat.completion" || r.Choices[0].Message.Role != "assistant" ||
		len(strings.Fields(r.Choices[0].Message.Content)) != 5 || *r.Choices[0].FinishReason != "length" {
		t.Errorf("response %s", b)
	}
	// Without max_tokens a chat stops on its own ("stop").
	_, b = post(t, p.url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Tell me something"}]}`)
	strict(t, b, &r)
	if *r.Choices[0].FinishReason != "stop" || r.Usage.CompletionTokens < 1 {
		t.Errorf("unlimited chat: %s", b)
	}
}

// readSSE returns the data payloads of an event stream.
func readSSE(t *testing.T, body io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "data: ") {
			t.Fatalf("not an SSE data line: %q", line)
		}
		out = append(out, strings.TrimPrefix(line, "data: "))
	}
	return out
}

func TestStreaming(t *testing.T) {
	p := startPod(t, nil)
	for _, api := range []string{"completions", "chat"} {
		t.Run(api, func(t *testing.T) {
			body := `{"model":"llama","prompt":"Once upon a time","max_tokens":8,"stream":true,"stream_options":{"include_usage":true}}`
			path := "/v1/completions"
			if api == "chat" {
				body = `{"model":"llama","messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":8,"stream":true,"stream_options":{"include_usage":true}}`
				path = "/v1/chat/completions"
			}
			resp, err := http.Post(p.url+path, "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("content type %q", resp.Header.Get("Content-Type"))
			}
			data := readSSE(t, resp.Body)
			if data[len(data)-1] != "[DONE]" {
				t.Fatalf("stream does not end with [DONE]: %q", data[len(data)-1])
			}
			chunks := data[:len(data)-1]
			var text strings.Builder
			tokens, finished := 0, 0
			for i, c := range chunks {
				var r chatResponse
				if api == "chat" {
					strict(t, []byte(c), &r)
					if r.Object != "chat.completion.chunk" {
						t.Errorf("object %q", r.Object)
					}
				} else {
					var cr completionResponse
					strict(t, []byte(c), &cr)
					if cr.Object != "text_completion" {
						t.Errorf("object %q", cr.Object)
					}
					if len(cr.Choices) == 1 {
						text.WriteString(cr.Choices[0].Text)
						tokens++
						if cr.Choices[0].FinishReason != nil {
							finished++
						}
					}
					r.Usage = cr.Usage
					r.Choices = nil
				}
				if api == "chat" && len(r.Choices) == 1 {
					d := r.Choices[0].Delta
					if i == 0 {
						if d.Role == nil || *d.Role != "assistant" {
							t.Errorf("first chat chunk without the assistant role: %s", c)
						}
						continue
					}
					text.WriteString(*d.Content)
					tokens++
					if r.Choices[0].FinishReason != nil {
						finished++
					}
				}
				if i == len(chunks)-1 {
					if r.Usage == nil || r.Usage.CompletionTokens != 8 {
						t.Errorf("last chunk is not the usage chunk: %s", c)
					}
				} else if r.Usage != nil {
					t.Errorf("usage before the end: %s", c)
				}
			}
			if tokens != 8 || finished != 1 || len(strings.Fields(text.String())) != 8 {
				t.Errorf("%d token chunks, %d with finish_reason, text %q", tokens, finished, text.String())
			}
		})
	}
}

func TestErrors(t *testing.T) {
	p := startPod(t, func(c *Config) { c.Engine.MaxModelLen = 100 })
	cases := []struct {
		path, body string
		status     int
		msg        string
	}{
		{"/v1/completions", `not json`, 400, "invalid request body"},
		{"/v1/completions", `{"model":"nope","prompt":"x"}`, 404, "The model `nope` does not exist."},
		{"/v1/completions", `{"prompt":"x","max_tokens":0}`, 400, "max_tokens must be at least 1"},
		{"/v1/completions", `{"prompt":"x","max_tokens":500}`, 400, "maximum context length is 100 tokens"},
		{"/v1/completions", `{"prompt":"x","stream_options":{"include_usage":true}}`, 400, "Stream options"},
		{"/v1/chat/completions", `{"messages":"x"}`, 400, "messages: must be a list of messages"},
		{"/v1/completions", `{"prompt":"x","n":0}`, 400, "n must be at least 1, got 0."},
		{"/v1/completions", `{"prompt":"x","n":16385}`, 400, "n must be at most 16384, got 16385. To increase this limit, set the VLLM_MAX_N_SEQUENCES environment variable."},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"n":2,"temperature":0}`, 400, "n must be 1 when using greedy sampling, got 2."},
		{"/v1/completions", `{"prompt":"x","n":"2"}`, 400, "invalid request body"},
		{"/v1/completions", `{"prompt":"x","logprobs":21}`, 400, "Requested sample logprobs of 21, which is greater than max allowed: 20"},
		{"/v1/completions", `{"prompt":"x","logprobs":-1}`, 400, "Requested sample logprobs of 128256, which is greater than max allowed: 20"},
		{"/v1/completions", `{"prompt":"x","logprobs":-2}`, 400, "`logprobs` must be a positive value or -1."},
		{"/v1/completions", `{"prompt":"x","logprobs":"2"}`, 400, "`logprobs` must be an integer."},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"top_logprobs":2}`, 400, "when using `top_logprobs`, `logprobs` must be set to true."},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"logprobs":false,"top_logprobs":2}`, 400, "when using `top_logprobs`, `logprobs` must be set to true."},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21}`, 400, "Requested sample logprobs of 21, which is greater than max allowed: 20"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":-3}`, 400, "`top_logprobs` must be a positive value or -1."},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"logprobs":"yes"}`, 400, "logprobs: Input should be a valid boolean"},
	}
	for _, c := range cases {
		resp, b := post(t, p.url+c.path, c.body)
		var e errorBody
		strict(t, b, &e)
		if resp.StatusCode != c.status || e.Error.Code != c.status || !strings.Contains(e.Error.Message, c.msg) {
			t.Errorf("%s: %d %s", c.body, resp.StatusCode, b)
		}
	}
}

func TestModelsAndTokenize(t *testing.T) {
	p := startPod(t, nil)
	resp, err := http.Get(p.url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var models struct {
		Object string `json:"object"`
		Data   []struct {
			ID          string  `json:"id"`
			Object      string  `json:"object"`
			Created     int64   `json:"created"`
			OwnedBy     string  `json:"owned_by"`
			Root        string  `json:"root"`
			Parent      *string `json:"parent"`
			MaxModelLen int     `json:"max_model_len"`
		} `json:"data"`
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	strict(t, b, &models)
	if len(models.Data) != 2 || models.Data[0].ID != "llama" || models.Data[0].Parent != nil || models.Data[1].ID != "sql-lora" || *models.Data[1].Parent != "llama" {
		t.Errorf("models %s", b)
	}
	_, b = post(t, p.url+"/tokenize", `{"prompt":"hello world"}`)
	var tok struct {
		Count       int      `json:"count"`
		MaxModelLen int      `json:"max_model_len"`
		Tokens      []uint32 `json:"tokens"`
	}
	strict(t, b, &tok)
	if tok.Count != 4 || len(tok.Tokens) != 4 {
		t.Errorf("tokenize %s", b)
	}
	// vLLM's render API gives the same tokens
	_, b = post(t, p.url+"/v1/completions/render", `{"model":"llama","prompt":"hello world"}`)
	var rendered []struct {
		TokenIDs []uint32 `json:"token_ids"`
	}
	strict(t, b, &rendered)
	if len(rendered) != 1 || !slices.Equal(rendered[0].TokenIDs, tok.Tokens) {
		t.Errorf("completions render %s, tokenize %v", b, tok.Tokens)
	}
	_, b = post(t, p.url+"/v1/chat/completions/render", `{"model":"llama","messages":[{"role":"user","content":"hello world"}]}`)
	var chat struct {
		TokenIDs []uint32 `json:"token_ids"`
	}
	strict(t, b, &chat)
	if len(chat.TokenIDs) <= len(tok.Tokens) {
		t.Errorf("chat render %s: want the template's tokens around the message", b)
	}
}

// /metrics parses with the Prometheus text parser and has every metric of
// spec/vllm-wire.md §4 with its type.
func TestMetrics(t *testing.T) {
	p := startPod(t, nil)
	post(t, p.url+"/v1/completions", `{"prompt":"warm up the metrics","max_tokens":3}`)
	post(t, p.url+"/v1/completions", `{"model":"sql-lora","prompt":"with an adapter","max_tokens":3}`)
	resp, err := http.Get(p.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("metrics do not parse: %v", err)
	}
	want := map[string]dto.MetricType{
		"vllm:num_requests_running":              dto.MetricType_GAUGE,
		"vllm:num_requests_waiting":              dto.MetricType_GAUGE,
		"vllm:kv_cache_usage_perc":               dto.MetricType_GAUGE,
		"vllm:cache_config_info":                 dto.MetricType_GAUGE,
		"vllm:lora_requests_info":                dto.MetricType_GAUGE,
		"vllm:prefix_cache_queries_total":        dto.MetricType_COUNTER,
		"vllm:prefix_cache_hits_total":           dto.MetricType_COUNTER,
		"vllm:prompt_tokens_total":               dto.MetricType_COUNTER,
		"vllm:generation_tokens_total":           dto.MetricType_COUNTER,
		"vllm:request_success_total":             dto.MetricType_COUNTER,
		"vllm:num_preemptions_total":             dto.MetricType_COUNTER,
		"vllm:time_to_first_token_seconds":       dto.MetricType_HISTOGRAM,
		"vllm:inter_token_latency_seconds":       dto.MetricType_HISTOGRAM,
		"vllm:time_per_output_token_seconds":     dto.MetricType_HISTOGRAM,
		"vllm:e2e_request_latency_seconds":       dto.MetricType_HISTOGRAM,
		"vllm:request_queue_time_seconds":        dto.MetricType_HISTOGRAM,
		"vllm:request_prefill_time_seconds":      dto.MetricType_HISTOGRAM,
		"vllm:request_decode_time_seconds":       dto.MetricType_HISTOGRAM,
		"vllm:request_prompt_tokens":             dto.MetricType_HISTOGRAM,
		"vllm:request_generation_tokens":         dto.MetricType_HISTOGRAM,
		"vllm:request_inference_time_seconds":    dto.MetricType_HISTOGRAM,
		"vllm:iteration_tokens_total":            dto.MetricType_HISTOGRAM,
		"vllm:request_max_num_generation_tokens": dto.MetricType_HISTOGRAM,
	}
	for name, typ := range want {
		mf, ok := mfs[name]
		if !ok {
			t.Errorf("%s missing", name)
			continue
		}
		if mf.GetType() != typ {
			t.Errorf("%s is a %s, want %s", name, mf.GetType(), typ)
		}
	}
	label := func(m *dto.Metric, name string) string {
		for _, l := range m.GetLabel() {
			if l.GetName() == name {
				return l.GetValue()
			}
		}
		return ""
	}
	ttft := mfs["vllm:time_to_first_token_seconds"].GetMetric()[0]
	if label(ttft, "model_name") != "llama" || label(ttft, "engine") != "0" || ttft.GetHistogram().GetSampleCount() != 2 {
		t.Errorf("TTFT metric %v", ttft)
	}
	var bounds []float64
	for _, b := range ttft.GetHistogram().GetBucket() {
		bounds = append(bounds, b.GetUpperBound())
	}
	if fmt.Sprint(bounds[:len(bounds)-1]) != fmt.Sprint(ttftBucketsForTest) {
		t.Errorf("TTFT buckets %v, vLLM's %v (+Inf)", bounds, ttftBucketsForTest)
	}
	cc := mfs["vllm:cache_config_info"].GetMetric()[0]
	if label(cc, "block_size") != "16" || label(cc, "num_gpu_blocks") != "20000" || cc.GetGauge().GetValue() != 1 {
		t.Errorf("cache_config_info %v", cc)
	}
	lora := mfs["vllm:lora_requests_info"].GetMetric()[0]
	if label(lora, "max_lora") != "1" || lora.GetGauge().GetValue() < 1e9 {
		t.Errorf("lora_requests_info %v", lora)
	}
	var success float64
	for _, m := range mfs["vllm:request_success_total"].GetMetric() {
		if label(m, "finished_reason") == "length" {
			success = m.GetCounter().GetValue()
		}
	}
	if success != 2 {
		t.Errorf("request_success_total{finished_reason=length} = %v", success)
	}
}

var ttftBucketsForTest = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}

// KV events flow over ZeroMQ in both encodings and decode to what the pool
// did.
func TestKVEvents(t *testing.T) {
	for _, enc := range []events.Encoding{events.EncodingArray, events.EncodingMap} {
		t.Run(enc.String(), func(t *testing.T) {
			p := startPod(t, func(c *Config) { c.EventEncoding = enc })
			sub, err := kvzmq.Subscribe(fmt.Sprintf("tcp://127.0.0.1:%d", p.zmqPort), false, "kv@", 0)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			time.Sleep(200 * time.Millisecond)     // let the SUB join
			prompt := strings.Repeat("abcd ", 100) // 100+ tokens: several full blocks
			post(t, p.url+"/v1/completions", fmt.Sprintf(`{"prompt":%q,"max_tokens":2}`, prompt))
			var dec events.Decoder
			stored := 0
			for {
				m, err := sub.Recv(time.Second)
				if err != nil {
					break
				}
				if m.Topic != "kv@pod-a@llama" {
					t.Errorf("topic %q", m.Topic)
				}
				var b events.Batch
				if err := dec.Decode(m.Payload, &b); err != nil {
					t.Fatalf("seq %d: %v", m.Seq, err)
				}
				for _, e := range b.Events {
					if e.Kind == events.KindBlockStored {
						stored += len(e.BlockHashes)
						if len(e.TokenIDs) != len(e.BlockHashes)*16 || e.BlockSize != 16 || e.Medium != "GPU" {
							t.Errorf("BlockStored %+v", e)
						}
					}
				}
			}
			if stored == 0 {
				t.Error("no BlockStored event received")
			}
		})
	}
}

func TestFaultInjection(t *testing.T) {
	p := startPod(t, func(c *Config) { c.Faults = Faults{ErrorRates: map[string]float64{"503": 1}} })
	resp, b := post(t, p.url+"/v1/completions", `{"prompt":"x","max_tokens":1}`)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "injected") {
		t.Errorf("status %d: %s", resp.StatusCode, b)
	}
	if status := put(t, p.url+"/sim/faults", `{"error_rates":{"429":0.5,"500":0.5}}`); status != http.StatusOK {
		t.Fatalf("put faults: %d", status)
	}
	codes := map[int]int{}
	for range 40 {
		resp, _ := post(t, p.url+"/v1/completions", `{"prompt":"x","max_tokens":1}`)
		codes[resp.StatusCode]++
	}
	if codes[429] == 0 || codes[500] == 0 || codes[http.StatusOK] != 0 {
		t.Errorf("status counts %v", codes)
	}
	if status := put(t, p.url+"/sim/faults", `{"error_rates":{"418":1}}`); status != http.StatusBadRequest {
		t.Errorf("invalid faults accepted: %d", status)
	}
}

func put(t *testing.T, url, body string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode
}

// A crash drops connections and the cache; the pod comes back with an
// empty cache and its event sequence restarted at 0, AllBlocksCleared first.
func TestCrashRestart(t *testing.T) {
	p := startPod(t, nil)
	sub, err := kvzmq.Subscribe(fmt.Sprintf("tcp://127.0.0.1:%d", p.zmqPort), false, "kv@", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	prompt := fmt.Sprintf(`{"prompt":%q,"max_tokens":2}`, strings.Repeat("crash test ", 50))
	post(t, p.url+"/v1/completions", prompt)
	if err := p.Crash(context.Background(), 40*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the SUB reconnects to the new socket
	// the cache is empty: the same prompt is a miss
	_, b := post(t, p.url+"/v1/completions", prompt)
	var r completionResponse
	strict(t, b, &r)
	if r.Usage.PromptTokensDetails != nil {
		t.Errorf("cached tokens after a crash: %s", b)
	}
	// After the restart the publisher's history starts again at 0 with
	// AllBlocksCleared, then the new request's blocks.
	got, err := kvzmq.Replay(fmt.Sprintf("tcp://127.0.0.1:%d", p.replayPort), 0, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < 2 || got[0].Seq != 0 {
		t.Fatalf("post-restart history: %d batches from %d", len(got), got[0].Seq)
	}
	var dec events.Decoder
	var batch events.Batch
	if err := dec.Decode(got[0].Payload, &batch); err != nil {
		t.Fatal(err)
	}
	if len(batch.Events) != 1 || batch.Events[0].Kind != events.KindAllBlocksCleared {
		t.Errorf("first batch after the restart: %+v", batch.Events)
	}
	if err := dec.Decode(got[1].Payload, &batch); err != nil || batch.Events[0].Kind != events.KindBlockStored || batch.Events[0].HasParent {
		t.Errorf("second batch after the restart: %+v %v", batch.Events, err)
	}
}

// Crashes with no downtime, one after another, leave the pod serving.
func TestRepeatedCrashes(t *testing.T) {
	p := startPod(t, nil)
	for i := range 20 {
		if err := p.Crash(context.Background(), 0); err != nil {
			t.Fatalf("crash %d: %v", i, err)
		}
	}
	resp, b := post(t, p.url+"/v1/completions", `{"prompt":"still here","max_tokens":2}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("after crashes: %d %s", resp.StatusCode, b)
	}
}

// A chat stream's first byte comes with the first token (after the
// prefill), not at once: time to first byte is time to first token.
func TestChatStreamFirstByteIsFirstToken(t *testing.T) {
	p := startPod(t, func(c *Config) { c.Speed = 1 })
	long := strings.Repeat("a long prompt that takes a while to prefill ", 400) // ~4.4k tokens: ~165 ms TTFT
	body := fmt.Sprintf(`{"messages":[{"role":"user","content":%q}],"max_tokens":2,"stream":true}`, long)
	start := time.Now()
	resp, err := http.Post(p.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
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
	if !strings.Contains(data[0], `"role":"assistant"`) || !strings.Contains(data[1], `"content":`) {
		t.Errorf("chunks %q", data[:2])
	}
}

// Stopping a pod with requests in flight returns promptly; the requests end.
func TestStopWithRequestsInFlight(t *testing.T) {
	zmqPort := freePort(t)
	ec := engine.DefaultConfig("")
	cfg := Config{Name: "p", Host: "127.0.0.1", ModelPath: "m", Engine: ec, Speed: 1,
		KVEvents: KVEventsConfig{Enabled: true, Endpoint: fmt.Sprintf("tcp://*:%d", zmqPort)}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	p, err := New(cfg, engine.NewWallClock(1))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	<-p.Ready()
	url := "http://" + p.Addr() + "/v1/completions"
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		resp, err := http.Post(url, "application/json", strings.NewReader(`{"prompt":"x","max_tokens":5000,"stream":true}`))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the pod did not stop")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("stopping took %s", d)
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the in-flight request never ended")
	}
}
