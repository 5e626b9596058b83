package parser_test

import (
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
	all := []openai.API{openai.APICompletions, openai.APIChatCompletions, openai.APIMessages, openai.APIMessagesCountTokens, openai.APIGenerate}
	for yaml, served := range map[string][]openai.API{
		"plugins: [{type: queue-scorer}]": all,
		"plugins: [{type: queue-scorer}]\nrequestHandler: {parsers: [{pluginRef: openai-parser}]}":                                                              {openai.APICompletions, openai.APIChatCompletions},
		"plugins: [{type: queue-scorer}]\nrequestHandler: {parsers: [{pluginRef: anthropic-parser}]}":                                                           {openai.APIMessages, openai.APIMessagesCountTokens},
		"plugins: [{type: queue-scorer}]\nrequestHandler: {parsers: [{pluginRef: vllmhttp-parser}]}":                                                            {openai.APIGenerate},
		"plugins: [{type: queue-scorer}, {type: anthropic-parser, name: a}]\nrequestHandler: {parsers: [{pluginRef: openai-parser}, {pluginRef: a}]}":           all[:4],
		"plugins: [{type: queue-scorer}]\nrequestHandler: {parsers: [{pluginRef: openai-parser}, {pluginRef: anthropic-parser}, {pluginRef: vllmhttp-parser}]}": all,
	} {
		cfg, err := scheduling.ParseConfig([]byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		s, err := scheduling.New(cfg)
		if err != nil {
			t.Fatalf("%s: %v", yaml, err)
		}
		for _, api := range all {
			if want := slices.Contains(served, api); s.Serves(api) != want {
				t.Errorf("%s: serves %s: %t, want %t", yaml, api, !want, want)
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
