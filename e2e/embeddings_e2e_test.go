package e2e

import (
	"context"
	"errors"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// A fleet of embedding models behind the gateway, driven by the official
// OpenAI Go SDK: embeddings (float and base64) routed by model and
// accounted from their usage, and a generative API refused as vLLM
// refuses it for a pooling model.
func TestOpenAISDKEmbeddings(t *testing.T) {
	s := startStack(t, "--pods", "2", "--speed", "50", "--sim-args=--runner,pooling")
	ev := s.follow(t)
	client := openai.NewClient(option.WithBaseURL(s.url("/v1/")), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	model := s.state.Model

	inputs := []string{"the KV cache of a prompt", "routing by prefix"}
	var ids []string
	for _, format := range []openai.EmbeddingNewParamsEncodingFormat{openai.EmbeddingNewParamsEncodingFormatFloat, openai.EmbeddingNewParamsEncodingFormatBase64} {
		var resp *http.Response
		emb, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: model, EncodingFormat: format,
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: inputs}}, option.WithResponseInto(&resp))
		if err != nil || len(emb.Data) != len(inputs) || emb.Usage.PromptTokens == 0 {
			t.Fatalf("%s embeddings: %+v %v", format, emb, err)
		}
		for i, d := range emb.Data {
			norm := 0.0
			for _, x := range d.Embedding {
				norm += x * x
			}
			if d.Index != int64(i) || len(d.Embedding) == 0 || math.Abs(norm-1) > 1e-3 {
				t.Errorf("%s embedding %d: index %d, %d values, norm² %v", format, i, d.Index, len(d.Embedding), norm)
			}
		}
		ids = append(ids, resp.Header.Get("X-Request-Id"))
	}
	waitFor(t, 10*time.Second, "a completion per embeddings request", func() bool {
		for _, id := range ids {
			if _, c := ev.counts(id); c != 1 {
				return false
			}
		}
		return true
	})
	for _, id := range ids {
		if c := ev.completion(id); c.GetPromptTokens() == 0 || c.GetModel() != model {
			t.Errorf("completion %v: the embeddings' usage was not read", c)
		}
	}

	_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Message == "" {
		t.Errorf("chat on a pooling model: %v, want vLLM's 400", err)
	}
}
