// Package parser holds the request parsers a config's parser section
// names. Both of Hermod's ways in (the gateway and the Envoy ext_proc
// server) read the OpenAI wire with libs/openai; openai-parser is that
// parser by its upstream name. Upstream's parsers of other wires are
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
	VLLMGRPCType    = "vllmgrpc-parser"
	VertexAIType    = "vertexai-parser"
	PassthroughType = "passthrough-parser"
)

func init() {
	scheduling.Register(scheduling.Registration{Type: OpenAIType, New: newOpenAI})
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
	return openai.Parse(api, body)
}

// refuse returns the factory of a parser type Hermod does not provide.
func refuse(typ, why string) scheduling.Factory {
	return func(string, json.RawMessage, scheduling.Handle) (scheduling.Plugin, error) {
		return nil, fmt.Errorf("%s is not supported: %s; use %s", typ, why, OpenAIType)
	}
}

var _ scheduling.RequestParser = (*OpenAI)(nil)
