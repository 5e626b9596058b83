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
	scheduling.Register(scheduling.Registration{Type: OpenAIType, New: newClaimant(OpenAIType, func(c claimant) scheduling.Plugin { return &OpenAI{c} })})
	scheduling.Register(scheduling.Registration{Type: AnthropicType, New: newClaimant(AnthropicType, func(c claimant) scheduling.Plugin { return &Anthropic{c} })})
	scheduling.Register(scheduling.Registration{Type: VLLMHTTPType, New: newClaimant(VLLMHTTPType, func(c claimant) scheduling.Plugin { return &VLLMHTTP{c} })})
	scheduling.Register(scheduling.Registration{Type: PassthroughType, New: newPassthrough})
	for typ, why := range map[string]string{
		VLLMGRPCType: "Hermod's ways in speak HTTP; vLLM's gRPC API is not served",
		VertexAIType: "Hermod's ways in speak HTTP; Vertex AI's PredictionService is not served",
	} {
		scheduling.Register(scheduling.Registration{Type: typ, New: refuse(typ, why)})
	}
}

// claims are the APIs each parser type claims.
var claims = map[string][]openai.API{
	OpenAIType:    {openai.APICompletions, openai.APIChatCompletions, openai.APIPassthrough},
	AnthropicType: {openai.APIMessages, openai.APIMessagesCountTokens},
	VLLMHTTPType:  {openai.APIGenerate},
}

// OpenAI is openai-parser: the OpenAI request parser both ways in use
// (completions and chat completions, read for routing; embeddings and
// vLLM's other endpoints, routed by model).
type OpenAI struct{ claimant }

// Anthropic is anthropic-parser: Anthropic's Messages API
// (/v1/messages, routed by its system prompt and messages, usage from
// its answer or its stream's message_start and message_delta events) and
// its /v1/messages/count_tokens.
type Anthropic struct{ claimant }

// VLLMHTTP is vllmhttp-parser: vLLM's /inference/v1/generate, a prompt
// of token ids (token_ids, routed and prefix-hashed as those ids), its
// limit in sampling_params.max_tokens, answered with OpenAI's usage.
type VLLMHTTP struct{ claimant }

// claimant is a parser that claims its type's APIs (claims) and parses
// them with libs/openai.
type claimant struct {
	scheduling.Named
}

// newClaimant returns the factory of a claimant parser type, wrap making
// the plugin of its own type.
func newClaimant(typ string, wrap func(claimant) scheduling.Plugin) scheduling.Factory {
	return func(name string, raw json.RawMessage, h scheduling.Handle) (scheduling.Plugin, error) {
		named, err := parameterless(typ, name, raw, h)
		if err != nil {
			return nil, err
		}
		return wrap(claimant{named}), nil
	}
}

// APIs implements scheduling.RequestParser.
func (c *claimant) APIs() []openai.API { return claims[c.Type] }

// ParseRequest implements scheduling.RequestParser: a body of a claimed
// API parsed, or an error naming the parser that claims api.
func (c *claimant) ParseRequest(api openai.API, body []byte) (openai.Request, error) {
	if !slices.Contains(c.APIs(), api) {
		for typ, apis := range claims {
			if slices.Contains(apis, api) {
				return openai.Request{}, fmt.Errorf("%s does not parse %s; use %s", c.Type, api.Describe(), typ)
			}
		}
		return openai.Request{}, fmt.Errorf("%s does not parse %s", c.Type, api.Describe())
	}
	return openai.Parse(api, body)
}

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
