package e2e

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
)

// wantAPIError checks that err is the OpenAI error the SDK decodes, with
// status and code.
func wantAPIError(t *testing.T, what string, err error, status int, code string) {
	t.Helper()
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("%s: %v (%T), want an *openai.Error", what, err, err)
	}
	if apiErr.StatusCode != status || apiErr.Code != code || apiErr.Message == "" || strings.Contains(apiErr.Message, "json.") {
		t.Errorf("%s: status %d code %q message %q, want %d %q and a plain message", what, apiErr.StatusCode, apiErr.Code, apiErr.Message, status, code)
	}
}

// The official OpenAI Go SDK drives every endpoint the gateway serves,
// streaming and not, and decodes every error it answers.
func TestOpenAISDK(t *testing.T) {
	s := startStack(t, "--pods", "2", "--speed", "50")
	client := openai.NewClient(option.WithBaseURL(s.url("/v1/")), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	model := s.state.Model

	t.Run("models", func(t *testing.T) {
		page, err := client.Models.List(ctx)
		if err != nil || len(page.Data) == 0 || page.Data[0].ID != model {
			t.Fatalf("list: %+v %v", page, err)
		}
		m, err := client.Models.Get(ctx, model)
		if err != nil || m.ID != model || m.Object != "model" {
			t.Fatalf("get %s: %+v %v", model, m, err)
		}
		_, err = client.Models.Get(ctx, "no-such-model")
		wantAPIError(t, "unknown model", err, http.StatusNotFound, "model_not_found")
	})

	t.Run("chat", func(t *testing.T) {
		params := openai.ChatCompletionNewParams{Model: model, MaxTokens: openai.Int(8),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("What is a KV cache?")}}
		cc, err := client.Chat.Completions.New(ctx, params)
		if err != nil || len(cc.Choices) != 1 || cc.Choices[0].Message.Content == "" || cc.Usage.CompletionTokens == 0 {
			t.Fatalf("chat: %+v %v", cc, err)
		}
		params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		stream := client.Chat.Completions.NewStreaming(ctx, params)
		acc := openai.ChatCompletionAccumulator{}
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil || len(acc.Choices) != 1 || acc.Choices[0].Message.Content == "" || acc.Usage.PromptTokens == 0 {
			t.Fatalf("chat stream: %+v %v", acc.ChatCompletion, err)
		}
		params.Model = "no-such-model"
		_, err = client.Chat.Completions.New(ctx, params)
		wantAPIError(t, "chat with an unknown model", err, http.StatusNotFound, "model_not_found")
	})

	t.Run("n, logprobs and tool calls", func(t *testing.T) {
		params := openai.ChatCompletionNewParams{Model: model, MaxTokens: openai.Int(6), N: openai.Int(2), Temperature: openai.Float(0.7),
			Logprobs: openai.Bool(true), TopLogprobs: openai.Int(2), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Name two colours.")}}
		cc, err := client.Chat.Completions.New(ctx, params)
		if err != nil || len(cc.Choices) != 2 || cc.Choices[1].Index != 1 {
			t.Fatalf("n=2: %+v %v", cc, err)
		}
		for _, c := range cc.Choices {
			lp := c.Logprobs.Content
			if len(lp) == 0 || len(lp[0].TopLogprobs) != 2 || lp[0].Logprob > 0 {
				t.Errorf("choice %d logprobs %+v", c.Index, c.Logprobs)
			}
		}
		stream := client.Chat.Completions.NewStreaming(ctx, params)
		acc := openai.ChatCompletionAccumulator{}
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil || len(acc.Choices) != 2 || acc.Choices[0].Message.Content == "" || acc.Choices[1].Message.Content == "" {
			t.Fatalf("n=2 stream: %+v %v", acc.ChatCompletion, err)
		}
		weather := openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "get_weather",
			Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}})
		tc, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model, MaxTokens: openai.Int(64),
			Messages:   []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Oslo?")},
			Tools:      []openai.ChatCompletionToolUnionParam{weather},
			ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}})
		if err != nil || len(tc.Choices) != 1 || len(tc.Choices[0].Message.ToolCalls) != 1 || tc.Choices[0].Message.ToolCalls[0].Function.Name != "get_weather" {
			t.Fatalf("tool call: %+v %v", tc, err)
		}
	})

	t.Run("completions", func(t *testing.T) {
		params := openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(model), MaxTokens: openai.Int(8),
			Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")}}
		c, err := client.Completions.New(ctx, params)
		if err != nil || len(c.Choices) != 1 || c.Choices[0].Text == "" {
			t.Fatalf("completion: %+v %v", c, err)
		}
		stream := client.Completions.NewStreaming(ctx, params)
		var text strings.Builder
		for stream.Next() {
			for _, ch := range stream.Current().Choices {
				text.WriteString(ch.Text)
			}
		}
		if err := stream.Err(); err != nil || text.Len() == 0 {
			t.Fatalf("completion stream: %q %v", text.String(), err)
		}
		params.MaxTokens = openai.Int(-5)
		_, err = client.Completions.New(ctx, params)
		wantAPIError(t, "a negative max_tokens", err, http.StatusBadRequest, "invalid_value")
	})

	t.Run("responses", func(t *testing.T) {
		first, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: model,
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Name a colour.")}})
		if err != nil || first.ID == "" || first.OutputText() == "" {
			t.Fatalf("response: %+v %v", first, err)
		}
		second, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: model, PreviousResponseID: openai.String(first.ID),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("And another.")}})
		if err != nil || second.OutputText() == "" {
			t.Fatalf("chained response: %+v %v", second, err)
		}
		got, err := client.Responses.Get(ctx, second.ID, responses.ResponseGetParams{})
		if err != nil || got.ID != second.ID {
			t.Fatalf("get: %+v %v", got, err)
		}
		items, err := client.Responses.InputItems.List(ctx, second.ID, responses.InputItemListParams{})
		if err != nil || len(items.Data) == 0 {
			t.Fatalf("input items: %+v %v", items, err)
		}
		stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: model,
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Stream a word.")}})
		completed := false
		for stream.Next() {
			completed = completed || stream.Current().Type == "response.completed"
		}
		if err := stream.Err(); err != nil || !completed {
			t.Fatalf("response stream: completed %v, %v", completed, err)
		}
		replayed := client.Responses.GetStreaming(ctx, second.ID, responses.ResponseGetParams{})
		var text strings.Builder
		for replayed.Next() {
			if ev := replayed.Current(); ev.Type == "response.output_text.delta" {
				text.WriteString(ev.Delta)
			}
		}
		if err := replayed.Err(); err != nil || text.String() != second.OutputText() {
			t.Fatalf("retrieve streamed: %q, want %q, %v", text.String(), second.OutputText(), err)
		}
		_, err = client.Responses.Cancel(ctx, first.ID)
		wantAPIError(t, "cancel a response that is not a background one", err, http.StatusBadRequest, "invalid_request")
		if err := client.Responses.Delete(ctx, first.ID); err != nil {
			t.Fatalf("delete: %v", err)
		}
		_, err = client.Responses.Get(ctx, first.ID, responses.ResponseGetParams{})
		wantAPIError(t, "a deleted response", err, http.StatusNotFound, "not_found")
	})

	t.Run("background", func(t *testing.T) { testBackgroundResponses(ctx, t, client, model) })
}

// Background responses run in the responses service: queued at once,
// completed later, retrievable streamed once done, and cancellable.
func testBackgroundResponses(ctx context.Context, t *testing.T, client openai.Client, model string) {
	params := responses.ResponseNewParams{Model: model, Background: openai.Bool(true), MaxOutputTokens: openai.Int(16),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Name a river.")}}
	queued, err := client.Responses.New(ctx, params)
	if err != nil || queued.Status != responses.ResponseStatusQueued || !queued.Background || len(queued.Output) != 0 {
		t.Fatalf("background create: %s %v", queued.RawJSON(), err)
	}
	// a streamed retrieval waits for the run, then replays it
	replayed := client.Responses.GetStreaming(ctx, queued.ID, responses.ResponseGetParams{})
	var text strings.Builder
	for replayed.Next() {
		if ev := replayed.Current(); ev.Type == "response.output_text.delta" {
			text.WriteString(ev.Delta)
		}
	}
	done, err := client.Responses.Get(ctx, queued.ID, responses.ResponseGetParams{})
	finished := done.Status == responses.ResponseStatusCompleted || done.Status == responses.ResponseStatusIncomplete
	if err != nil || !finished || done.OutputText() == "" || !done.Background || done.CreatedAt != queued.CreatedAt {
		t.Fatalf("background response: %s %v", done.RawJSON(), err)
	}
	if err := replayed.Err(); err != nil || text.String() != done.OutputText() {
		t.Fatalf("streamed retrieval: %q, want %q, %v", text.String(), done.OutputText(), err)
	}
	// it continues like any other
	params.PreviousResponseID, params.Background = openai.String(done.ID), openai.Bool(false)
	if next, err := client.Responses.New(ctx, params); err != nil || next.OutputText() == "" {
		t.Fatalf("continue a background response: %+v %v", next, err)
	}
	// a long one is cancelled and stays cancelled
	params = responses.ResponseNewParams{Model: model, Background: openai.Bool(true), MaxOutputTokens: openai.Int(4000),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Tell a long story.")}}
	long, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	cancelled, err := client.Responses.Cancel(ctx, long.ID)
	if err != nil || cancelled.Status != responses.ResponseStatusCancelled {
		t.Fatalf("cancel: %s %v", cancelled.RawJSON(), err)
	}
	time.Sleep(time.Second)
	if got, err := client.Responses.Get(ctx, long.ID, responses.ResponseGetParams{}); err != nil || got.Status != responses.ResponseStatusCancelled {
		t.Fatalf("after cancel: %s %v", got.RawJSON(), err)
	}
	// refusals
	params.Store = openai.Bool(false)
	_, err = client.Responses.New(ctx, params)
	wantAPIError(t, "an unstored background response", err, http.StatusBadRequest, "invalid_value")
}

// With API keys, a stored response belongs to the key that created it:
// another key finds nothing, and background runs act for their owner.
func TestResponsesOwnedByTheirKey(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte("alice sk-alice\nbob sk-bob\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startStack(t, "--pods", "1", "--speed", "50", "--gateway-args=--api-keys-file,"+keys)
	client := func(key string) openai.Client {
		return openai.NewClient(option.WithBaseURL(s.url("/v1/")), option.WithAPIKey(key), option.WithMaxRetries(0))
	}
	alice, bob := client("sk-alice"), client("sk-bob")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	params := responses.ResponseNewParams{Model: s.state.Model, MaxOutputTokens: openai.Int(8),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Whose is this?")}}
	nobody := client("sk-nobody")
	_, err := nobody.Responses.New(ctx, params)
	wantAPIError(t, "an unknown key", err, http.StatusUnauthorized, "invalid_api_key")
	_, err = nobody.Models.List(ctx)
	wantAPIError(t, "an unknown key's model list", err, http.StatusUnauthorized, "invalid_api_key")
	mine, err := alice.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	_, err = bob.Responses.Get(ctx, mine.ID, responses.ResponseGetParams{})
	wantAPIError(t, "another key's get", err, http.StatusNotFound, "not_found")
	_, err = bob.Responses.InputItems.List(ctx, mine.ID, responses.InputItemListParams{})
	wantAPIError(t, "another key's input items", err, http.StatusNotFound, "not_found")
	err = bob.Responses.Delete(ctx, mine.ID)
	wantAPIError(t, "another key's delete", err, http.StatusNotFound, "not_found")
	params.PreviousResponseID = openai.String(mine.ID)
	_, err = bob.Responses.New(ctx, params)
	wantAPIError(t, "another key's continuation", err, http.StatusNotFound, "not_found")
	if _, err := alice.Responses.New(ctx, params); err != nil {
		t.Fatalf("the owner continues: %v", err)
	}
	params.PreviousResponseID, params.Background = param.Opt[string]{}, openai.Bool(true)
	queued, err := alice.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	_, err = bob.Responses.Cancel(ctx, queued.ID)
	wantAPIError(t, "another key's cancel", err, http.StatusNotFound, "not_found")
	for {
		got, err := alice.Responses.Get(ctx, queued.ID, responses.ResponseGetParams{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == responses.ResponseStatusCompleted || got.Status == responses.ResponseStatusIncomplete {
			break
		}
		if got.Status != responses.ResponseStatusQueued && got.Status != responses.ResponseStatusInProgress {
			t.Fatalf("the background run with keys: %s", got.RawJSON())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
