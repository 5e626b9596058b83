package parser_test

import (
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
