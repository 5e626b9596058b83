package tokenize_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hermod/hermod/libs/plugins/tokenize"
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
	"github.com/hermod/hermod/libs/tokenizer"
)

func TestTokenizesPromptsOnce(t *testing.T) {
	h := schedulingtest.NewHandle(scheduling.GatePrepareDataPlugins)
	p := schedulingtest.New[*tokenize.Plugin](t, h, tokenize.Type, "", `{"modelName": "builtin", "udsTokenizerConfig": {"socketFile": "/tmp/x.sock"}}`)
	if len(h.Warnings) != 1 {
		t.Fatalf("warnings %v", h.Warnings)
	}
	req := schedulingtest.Completion("r", "m", "hello there, general routing")
	if err := p.PrepareData(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if want := (tokenizer.Builtin{}).Encode(nil, "hello there, general routing"); len(req.TokenIDs) != len(want) || req.TokenIDs[0] != want[0] {
		t.Fatalf("ids %v, want %v", req.TokenIDs, want)
	}
	chat := schedulingtest.Chat("r", "m", "be terse", "what is a KV cache?")
	if err := p.PrepareData(context.Background(), chat); err != nil {
		t.Fatal(err)
	}
	rendered := tokenizer.Llama3Template{}.Apply([]tokenizer.Message{{Role: chat.Body.Messages[0].Role, Content: "be terse"}, {Role: chat.Body.Messages[1].Role, Content: "what is a KV cache?"}}, true)
	if want := (tokenizer.Builtin{}).Encode(nil, rendered); len(chat.TokenIDs) != len(want) {
		t.Fatalf("chat ids %d, want %d", len(chat.TokenIDs), len(want))
	}
	// ids the client sent are kept
	pre := schedulingtest.Completion("r", "m", "ignored")
	pre.TokenIDs = []uint32{7, 8, 9}
	_ = p.PrepareData(context.Background(), pre)
	if len(pre.TokenIDs) != 3 {
		t.Fatal("client token ids replaced")
	}
}

func TestParametersAndGate(t *testing.T) {
	h := schedulingtest.NewHandle(scheduling.GatePrepareDataPlugins)
	if _, err := schedulingtest.NewErr(h, tokenize.Type, "", `{"modelName": "no/such-model"}`); err == nil || !strings.Contains(err.Error(), "no/such-model") {
		t.Fatalf("unknown model: %v", err)
	}
}

// token-producer (llm-d's name) is the same plugin; without modelName each
// request's model selects the tokenizer; a model without a local one goes
// to the vllm render backend (here unreachable: an error, no ids).
func TestTokenProducerWithoutModelName(t *testing.T) {
	h := schedulingtest.NewHandle()
	p := schedulingtest.New[*tokenize.Plugin](t, h, tokenize.ProducerType, "", `{"vllm": {"http": "http://127.0.0.1:1"}}`)
	if p.TypedName().Type != tokenize.ProducerType || len(h.Warnings) != 1 {
		t.Fatalf("type %s, warnings %q", p.TypedName().Type, h.Warnings)
	}
	// the handle provides no tokenizer service: "builtin" is the simulator's
	req := schedulingtest.Completion("r", "builtin", "hello there")
	if err := p.PrepareData(context.Background(), req); err != nil || len(req.TokenIDs) == 0 {
		t.Fatalf("ids %v, error %v", req.TokenIDs, err)
	}
	unknown := schedulingtest.Completion("r", "no/such-model", "hello there")
	if err := p.PrepareData(context.Background(), unknown); err == nil || len(unknown.TokenIDs) != 0 {
		t.Fatalf("a model without a tokenizer: ids %v, error %v", unknown.TokenIDs, err)
	}
}

// A model without a local tokenizer is tokenized by the vLLM render API,
// once per prompt (cached); the local tokenizer stays the fast path.
func TestRenderAPIForModelsWithoutALocalTokenizer(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var body struct {
			Model    string            `json:"model"`
			Prompt   string            `json:"prompt"`
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Model != "remote/model" {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		switch r.URL.Path {
		case "/v1/completions/render":
			_, _ = w.Write([]byte(`[{"token_ids":[1,2,3]}]`))
		case "/v1/chat/completions/render":
			_, _ = w.Write([]byte(`{"token_ids":[7,8,9,10]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	h := schedulingtest.NewHandle()
	p := schedulingtest.New[*tokenize.Plugin](t, h, tokenize.ProducerType, "", `{"vllm": {"url": "`+srv.URL+`", "timeout": "2s"}}`)
	for range 2 {
		req := schedulingtest.Completion("r", "remote/model", "hello")
		if err := p.PrepareData(context.Background(), req); err != nil || !slices.Equal(req.TokenIDs, []uint32{1, 2, 3}) {
			t.Fatalf("completion: %v %v", req.TokenIDs, err)
		}
	}
	chat := schedulingtest.Chat("r", "remote/model", "be terse", "hi")
	if err := p.PrepareData(context.Background(), chat); err != nil || len(chat.TokenIDs) != 4 {
		t.Fatalf("chat: %v %v", chat.TokenIDs, err)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("%d render calls, want 2 (the repeated prompt is cached)", n)
	}
	local := schedulingtest.Completion("r", "builtin", "hello there")
	if err := p.PrepareData(context.Background(), local); err != nil || len(local.TokenIDs) == 0 || calls.Load() != 2 {
		t.Errorf("a model with a local tokenizer: %v %v, %d calls", local.TokenIDs, err, calls.Load())
	}
	if _, err := schedulingtest.NewErr(schedulingtest.NewHandle(), tokenize.ProducerType, "", `{"vllm": {"http": "localhost:8000"}}`); err == nil {
		t.Error("a URL without a scheme was accepted")
	}
}
