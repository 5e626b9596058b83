package parser_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/libs/plugins/parser"
	_ "github.com/hermod/hermod/libs/plugins/standard" // the other plugin types
	"github.com/hermod/hermod/libs/scheduling"
	"github.com/hermod/hermod/libs/scheduling/schedulingtest"
)

func TestOpenAIParserParsesTheOpenAIWire(t *testing.T) {
	p := schedulingtest.New[*parser.OpenAI](t, schedulingtest.NewHandle(), parser.OpenAIType, "", "")
	req, err := p.ParseRequest(openai.APIChatCompletions, []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`))
	if err != nil || req.Model != "m" || !req.Stream || len(req.Messages) != 1 {
		t.Fatalf("parsed %+v, %v", req, err)
	}
	if _, err := p.ParseRequest(openai.APIChatCompletions, []byte(`{"model":"m","messages":"hi"}`)); err == nil {
		t.Fatal("a malformed body parsed")
	}
}

// requestHandler.parsers (and the deprecated parser) name declared
// parsers, or parser types, made with their defaults, as upstream does.
func TestParserSection(t *testing.T) {
	for _, yaml := range []string{
		"plugins: [{type: queue-scorer}]\nparser: {pluginRef: openai-parser}",
		"plugins: [{type: queue-scorer}]\nrequestHandler: {parsers: [{pluginRef: openai-parser}]}",
		"plugins: [{type: queue-scorer}, {type: openai-parser, name: p}]\nrequestHandler: {parsers: [{pluginRef: p}]}",
	} {
		cfg, err := scheduling.ParseConfig([]byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		s, err := scheduling.New(cfg)
		if err != nil {
			t.Errorf("%s: %v", yaml, err)
			continue
		}
		_ = s.Close()
	}
	for yaml, want := range map[string]string{
		"plugins: [{type: queue-scorer}]\nrequestHandler: {parsers: [{pluginRef: nope}]}":                                     `requestHandler.parsers[0].pluginRef: no plugin named "nope" is declared in plugins, and no parser type has that name`,
		"plugins: [{type: queue-scorer}]\nparser: {pluginRef: queue-scorer}":                                                  "is not a request parser",
		"plugins: [{type: queue-scorer}]\nrequestHandler: {parsers: [{pluginRef: kv-cache-utilization-scorer}]}":              "is not a request parser type",
		"plugins: [{type: vllmgrpc-parser}, {type: queue-scorer}]\nrequestHandler: {parsers: [{pluginRef: vllmgrpc-parser}]}": "vllmgrpc-parser is not supported",
	} {
		cfg, err := scheduling.ParseConfig([]byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := scheduling.New(cfg); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", yaml, err, want)
		}
	}
}

// A config that lists parsers serves the APIs they claim; one that lists
// none serves every API, as upstream's default parsers do.
func TestParsersDecideTheAPIsServed(t *testing.T) {
	const (
		c, ch, m, ct, g, p = openai.APICompletions, openai.APIChatCompletions, openai.APIMessages, openai.APIMessagesCountTokens, openai.APIGenerate, openai.APIPassthrough
	)
	all := []openai.API{c, ch, m, ct, g, p}
	for _, tc := range []struct {
		parsers        string
		served, unread []openai.API
	}{
		{"", all, nil},
		{"[{pluginRef: openai-parser}]", []openai.API{c, ch, p}, nil},
		{"[{pluginRef: anthropic-parser}]", []openai.API{m, ct}, nil},
		{"[{pluginRef: vllmhttp-parser}]", []openai.API{g}, nil},
		{"[{pluginRef: openai-parser}, {pluginRef: a}]", []openai.API{c, ch, m, ct, p}, nil},
		{"[{pluginRef: openai-parser}, {pluginRef: anthropic-parser}, {pluginRef: vllmhttp-parser}]", all, nil},
		// upstream's perf config: passthrough alone routes everything unread
		{"[{pluginRef: passthrough-parser}]", all, all},
		{"[{pluginRef: openai-parser}, {pluginRef: passthrough-parser}]", all, []openai.API{m, ct, g}},
	} {
		yaml := "plugins: [{type: queue-scorer}, {type: anthropic-parser, name: a}]"
		if tc.parsers != "" {
			yaml += "\nrequestHandler: {parsers: " + tc.parsers + "}"
		}
		cfg, err := scheduling.ParseConfig([]byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		s, err := scheduling.New(cfg)
		if err != nil {
			t.Fatalf("%s: %v", yaml, err)
		}
		for _, api := range all {
			if want := slices.Contains(tc.served, api); s.Serves(api) != want {
				t.Errorf("%s: serves %s: %t, want %t", tc.parsers, api, !want, want)
			}
			if want := slices.Contains(tc.unread, api); s.Unread(api) != want {
				t.Errorf("%s: %s unread: %t, want %t", tc.parsers, api, !want, want)
			}
		}
		_ = s.Close()
	}
	a := schedulingtest.New[*parser.Anthropic](t, schedulingtest.NewHandle(), parser.AnthropicType, "", "")
	if r, err := a.ParseRequest(openai.APIMessages, []byte(`{"model":"m","max_tokens":4,"system":"s","messages":[{"role":"user","content":"hi"}]}`)); err != nil || len(r.Messages) != 2 {
		t.Errorf("anthropic-parser: %+v %v", r, err)
	}
	if _, err := a.ParseRequest(openai.APIChatCompletions, []byte(`{"messages":[]}`)); err == nil || !strings.Contains(err.Error(), "use openai-parser") {
		t.Errorf("anthropic-parser parsed a chat completions body: %v", err)
	}
	v := schedulingtest.New[*parser.VLLMHTTP](t, schedulingtest.NewHandle(), parser.VLLMHTTPType, "", "")
	if r, err := v.ParseRequest(openai.APIGenerate, []byte(`{"token_ids":[7,8,9],"sampling_params":{"max_tokens":3}}`)); err != nil || len(r.TokenIDs) != 3 || r.MaxTokens != 3 {
		t.Errorf("vllmhttp-parser: %+v %v", r, err)
	}
	if _, err := v.ParseRequest(openai.APICompletions, []byte(`{"prompt":"x"}`)); err == nil || !strings.Contains(err.Error(), "use openai-parser") {
		t.Errorf("vllmhttp-parser parsed a completions body: %v", err)
	}
	o := schedulingtest.New[*parser.OpenAI](t, schedulingtest.NewHandle(), parser.OpenAIType, "", "")
	if _, err := o.ParseRequest(openai.APIGenerate, []byte(`{"token_ids":[1],"sampling_params":{}}`)); err == nil || !strings.Contains(err.Error(), "use vllmhttp-parser") {
		t.Errorf("openai-parser parsed a generate body: %v", err)
	}
}

// promptRecorder is a scorer that records the prompts it was shown.
type promptRecorder struct {
	scheduling.Named
	seen []openai.Request
}

func (p *promptRecorder) Score(_ context.Context, _ *scheduling.CycleState, req *scheduling.Request, _ []*scheduling.Endpoint, _ []float64) {
	p.seen = append(p.seen, req.Body)
}

var recorders = map[string]*promptRecorder{}

func init() {
	scheduling.Register(scheduling.Registration{Type: "test-prompt-recorder", New: func(name string, _ json.RawMessage, _ scheduling.Handle) (scheduling.Plugin, error) {
		r := &promptRecorder{Named: scheduling.Named{Type: "test-prompt-recorder", Name: name}}
		recorders[name] = r
		return r, nil
	}})
}

// An API passthrough-parser takes is routed by its model and load: the
// scorers never see its prompt; an API another parser claims they do.
func TestPassthroughRoutesWithoutThePrompt(t *testing.T) {
	s := schedulingtest.Scheduler(t, `plugins:
- {type: test-prompt-recorder, name: unread-test}
- {type: max-score-picker}
requestHandler: {parsers: [{pluginRef: openai-parser}, {pluginRef: passthrough-parser}]}
schedulingProfiles:
- {name: default, plugins: [{pluginRef: unread-test}, {pluginRef: max-score-picker}]}`)
	rec := recorders["unread-test"]
	eps := schedulingtest.Endpoints(2)
	for _, c := range []struct {
		api  openai.API
		body string
	}{
		{openai.APIMessages, `{"model":"m","max_tokens":4,"system":"secret system prompt","messages":[{"role":"user","content":"hi"}]}`},
		{openai.APIGenerate, `{"model":"m","token_ids":[1,2,3],"sampling_params":{}}`},
		{openai.APIChatCompletions, `{"model":"m","messages":[{"role":"user","content":"read me"}]}`},
	} {
		req, err := schedulingtest.ParseRequest(c.api, []byte(c.body))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Schedule(context.Background(), req, eps); err != nil {
			t.Fatalf("%s: %v", c.api, err)
		}
	}
	if len(rec.seen) != 3 {
		t.Fatalf("%d requests scored", len(rec.seen))
	}
	for i, r := range rec.seen[:2] {
		if r.Model != "m" || len(r.Messages) != 0 || r.Prompt != "" || len(r.TokenIDs) != 0 {
			t.Errorf("request %d (%s) was scored with its prompt: %+v", i, r.API, r)
		}
	}
	if chat := rec.seen[2]; len(chat.Messages) != 1 || chat.Messages[0].Content != "read me" {
		t.Errorf("the chat request lost its prompt: %+v", chat)
	}
}
