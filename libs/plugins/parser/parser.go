// Package parser holds the request parsers a config's parser section
// names. Both of Hermod's ways in (the gateway and the Envoy ext_proc
// server) read request bodies with libs/openai: openai-parser is its
// OpenAI reading by its upstream name, anthropic-parser its reading of
// Anthropic's Messages API, vllmhttp-parser its reading of vLLM's
// token-in, token-out /inference/v1/generate. A config that names parsers
// serves the APIs they claim. Upstream's parsers of wires Hermod does not serve are
// refused, saying what to use instead.
package parser

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/libs/scheduling"
)

// Registered plugin types.
const (
	OpenAIType      = "openai-parser"
	AnthropicType   = "anthropic-parser"
	VLLMHTTPType    = "vllmhttp-parser"
	VLLMGRPCType    = "vllmgrpc-parser"
	VertexAIType    = "vertexai-parser"
	PassthroughType = "passthrough-parser"
)

func init() {
	scheduling.Register(scheduling.Registration{Type: OpenAIType, New: newOpenAI})
	scheduling.Register(scheduling.Registration{Type: AnthropicType, New: newAnthropic})
	scheduling.Register(scheduling.Registration{Type: VLLMHTTPType, New: newVLLMHTTP})
	scheduling.Register(scheduling.Registration{Type: PassthroughType, New: newPassthrough})
	for typ, why := range map[string]string{
		VLLMGRPCType: "Hermod's ways in speak HTTP; vLLM's gRPC API is not served",
		VertexAIType: "Hermod's ways in speak HTTP; Vertex AI's PredictionService is not served",
	} {
		scheduling.Register(scheduling.Registration{Type: typ, New: refuse(typ, why)})
	}
}

// OpenAI is openai-parser: the OpenAI request parser both ways in use
// (completions and chat completions, read for routing; embeddings and
// vLLM's other endpoints, routed by model).
type OpenAI struct {
	scheduling.Named
}

func newOpenAI(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	named, err := parameterless(OpenAIType, name, raw, h)
	return &OpenAI{named}, err
}

// ParseRequest implements scheduling.RequestParser.
func (p *OpenAI) ParseRequest(api openai.API, body []byte) (openai.Request, error) {
	return parse(p, api, body)
}

// APIs implements scheduling.RequestParser.
func (*OpenAI) APIs() []openai.API {
	return []openai.API{openai.APICompletions, openai.APIChatCompletions, openai.APIPassthrough}
}

// Anthropic is anthropic-parser: Anthropic's Messages API
// (/v1/messages, routed by its system prompt and messages, usage from
// its answer or its stream's message_start and message_delta events) and
// its /v1/messages/count_tokens.
type Anthropic struct {
	scheduling.Named
}

func newAnthropic(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	named, err := parameterless(AnthropicType, name, raw, h)
	return &Anthropic{named}, err
}

// ParseRequest implements scheduling.RequestParser.
func (p *Anthropic) ParseRequest(api openai.API, body []byte) (openai.Request, error) {
	return parse(p, api, body)
}

// APIs implements scheduling.RequestParser.
func (*Anthropic) APIs() []openai.API {
	return []openai.API{openai.APIMessages, openai.APIMessagesCountTokens}
}

// VLLMHTTP is vllmhttp-parser: vLLM's /inference/v1/generate, a prompt
// of token ids (token_ids, routed and prefix-hashed as those ids), its
// limit in sampling_params.max_tokens, answered with OpenAI's usage.
type VLLMHTTP struct {
	scheduling.Named
}

func newVLLMHTTP(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	named, err := parameterless(VLLMHTTPType, name, raw, h)
	return &VLLMHTTP{named}, err
}

// ParseRequest implements scheduling.RequestParser.
func (p *VLLMHTTP) ParseRequest(api openai.API, body []byte) (openai.Request, error) {
	return parse(p, api, body)
}

// APIs implements scheduling.RequestParser.
func (*VLLMHTTP) APIs() []openai.API { return []openai.API{openai.APIGenerate} }

// Passthrough is passthrough-parser: it takes every API no other listed
// parser claims (every API, listed alone) and reads none of its prompt;
// those requests are routed by their model (where the body names one)
// and by load, every prompt-reading scorer blind to them, and passed on
// as they came.
type Passthrough struct {
	scheduling.Named
}

func newPassthrough(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
	named, err := parameterless(PassthroughType, name, raw, h)
	return &Passthrough{named}, err
}

// ParseRequest implements scheduling.RequestParser: the model and stream
// flag of a JSON body, nothing else.
func (*Passthrough) ParseRequest(api openai.API, body []byte) (openai.Request, error) {
	r, err := openai.Parse(openai.APIPassthrough, body)
	r.API = api
	return r, err
}

// APIs implements scheduling.RequestParser: as a fallback it claims
// none by name.
func (*Passthrough) APIs() []openai.API { return nil }

// Fallback implements scheduling.FallbackParser.
func (*Passthrough) Fallback() {}

// parameterless decodes the (absent) parameters of a parser that takes
// none; a parser's name defaults to its type.
func parameterless(typ, name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Named, error) {
	if err := scheduling.DecodeParameters(raw, &struct{}{}, h); err != nil {
		return scheduling.Named{}, err
	}
	if name == "" {
		name = typ
	}
	return scheduling.Named{Type: typ, Name: name}, nil
}

// parsers are the built parser types, each by the APIs it claims.
var parsers = map[string][]openai.API{
	OpenAIType:    (*OpenAI)(nil).APIs(),
	AnthropicType: (*Anthropic)(nil).APIs(),
	VLLMHTTPType:  (*VLLMHTTP)(nil).APIs(),
}

// parse parses a body sent to api with libs/openai if p claims api; else
// it names the parser that does.
func parse(p scheduling.RequestParser, api openai.API, body []byte) (openai.Request, error) {
	if !slices.Contains(p.APIs(), api) {
		for typ, apis := range parsers {
			if slices.Contains(apis, api) {
				return openai.Request{}, fmt.Errorf("%s does not parse %s; use %s", p.TypedName().Type, api.Describe(), typ)
			}
		}
		return openai.Request{}, fmt.Errorf("%s does not parse %s", p.TypedName().Type, api.Describe())
	}
	return openai.Parse(api, body)
}

// refuse returns the factory of a parser type Hermod does not provide.
func refuse(typ, why string) scheduling.Factory {
	return func(string, json.RawMessage, scheduling.Handle) (scheduling.Plugin, error) {
		return nil, fmt.Errorf("%s is not supported: %s; use %s", typ, why, OpenAIType)
	}
}

var (
	_ scheduling.RequestParser  = (*OpenAI)(nil)
	_ scheduling.RequestParser  = (*Anthropic)(nil)
	_ scheduling.RequestParser  = (*VLLMHTTP)(nil)
	_ scheduling.FallbackParser = (*Passthrough)(nil)
)
