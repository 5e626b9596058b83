// Package parser holds the request parsers a config's parser section
// names. Both of Hermod's ways in (the gateway and the Envoy ext_proc
// server) read request bodies with libs/openai: openai-parser is its
// OpenAI reading by its upstream name, anthropic-parser its reading of
// Anthropic's Messages API. A config that names parsers serves the APIs
// they claim. Upstream's parsers of wires Hermod does not serve are
// refused, saying what to use instead.
package parser

import (
	"encoding/json"
	"fmt"

	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/libs/scheduling"
)

// Registered plugin types.
const (
	OpenAIType      = "openai-parser"
	AnthropicType   = "anthropic-parser"
	VLLMGRPCType    = "vllmgrpc-parser"
	VertexAIType    = "vertexai-parser"
	PassthroughType = "passthrough-parser"
)

func init() {
	scheduling.Register(scheduling.Registration{Type: OpenAIType, New: newOpenAI})
	scheduling.Register(scheduling.Registration{Type: AnthropicType, New: newAnthropic})
	for typ, why := range map[string]string{
		VLLMGRPCType: "Hermod's ways in speak the OpenAI API over HTTP; vLLM's gRPC API is not served",
		VertexAIType: "Hermod's ways in speak the OpenAI API over HTTP; Vertex AI's PredictionService is not served",
		PassthroughType: "Hermod routes by the parsed OpenAI request (model, prompt, tokens, media); " +
			"an unparsed payload would leave every scorer blind",
	} {
		scheduling.Register(scheduling.Registration{Type: typ, New: refuse(typ, why)})
	}
}

// OpenAI is openai-parser: the OpenAI request parser both ways in use
// (completions, chat completions, responses, embeddings).
type OpenAI struct {
	scheduling.Named
}

func newOpenAI(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	if err := scheduling.DecodeParameters(raw, &struct{}{}, h); err != nil {
		return nil, err
	}
	if name == "" {
		name = OpenAIType
	}
	return &OpenAI{scheduling.Named{Type: OpenAIType, Name: name}}, nil
}

// ParseRequest implements scheduling.RequestParser.
func (*OpenAI) ParseRequest(api openai.API, body []byte) (openai.Request, error) {
	if api.Anthropic() {
		return openai.Request{}, fmt.Errorf("%s does not parse %s; use %s", OpenAIType, api.Path(), AnthropicType)
	}
	return openai.Parse(api, body)
}

// APIs implements scheduling.RequestParser.
func (*OpenAI) APIs() []openai.API {
	return []openai.API{openai.APICompletions, openai.APIChatCompletions}
}

// Anthropic is anthropic-parser: Anthropic's Messages API
// (/v1/messages, routed by its system prompt and messages, usage from
// its answer or its stream's message_start and message_delta events) and
// its /v1/messages/count_tokens.
type Anthropic struct {
	scheduling.Named
}

func newAnthropic(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	if err := scheduling.DecodeParameters(raw, &struct{}{}, h); err != nil {
		return nil, err
	}
	if name == "" {
		name = AnthropicType
	}
	return &Anthropic{scheduling.Named{Type: AnthropicType, Name: name}}, nil
}

// ParseRequest implements scheduling.RequestParser.
func (*Anthropic) ParseRequest(api openai.API, body []byte) (openai.Request, error) {
	if !api.Anthropic() {
		return openai.Request{}, fmt.Errorf("%s does not parse %s; use %s", AnthropicType, api.Path(), OpenAIType)
	}
	return openai.Parse(api, body)
}

// APIs implements scheduling.RequestParser.
func (*Anthropic) APIs() []openai.API {
	return []openai.API{openai.APIMessages, openai.APIMessagesCountTokens}
}

// refuse returns the factory of a parser type Hermod does not provide.
func refuse(typ, why string) scheduling.Factory {
	return func(string, json.RawMessage, scheduling.Handle) (scheduling.Plugin, error) {
		return nil, fmt.Errorf("%s is not supported: %s; use %s", typ, why, OpenAIType)
	}
}

var (
	_ scheduling.RequestParser = (*OpenAI)(nil)
	_ scheduling.RequestParser = (*Anthropic)(nil)
)
