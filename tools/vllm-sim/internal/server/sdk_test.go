package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// The official openai-go SDK decodes the simulator's n, logprobs and
// tool_calls, plain and streamed (its accumulator rebuilding the streamed
// choices as the plain answer has them).
func TestOpenAISDK(t *testing.T) {
	p := startPod(t, func(c *Config) { c.AutoToolChoice, c.ToolCallParser = true, "llama3_json" })
	client := openai.NewClient(option.WithBaseURL(p.url+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx := context.Background()

	t.Run("completions", func(t *testing.T) {
		c, err := client.Completions.New(ctx, openai.CompletionNewParams{
			Model:  "llama",
			Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("the SDK asks")},
			N:      openai.Int(2), MaxTokens: openai.Int(4), Logprobs: openai.Int(2), Seed: openai.Int(6),
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Choices) != 2 || c.Usage.CompletionTokens != 8 {
			t.Fatalf("completion %+v", c)
		}
		for i, ch := range c.Choices {
			lp := ch.Logprobs
			if ch.Index != int64(i) || strings.Join(lp.Tokens, "") != ch.Text || len(lp.TokenLogprobs) != 4 || len(lp.TopLogprobs) != 4 || len(lp.TopLogprobs[0]) != 2 || len(lp.TextOffset) != 4 {
				t.Errorf("choice %d: %+v", i, ch)
			}
		}
	})

	weather := openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name: "get_weather",
		Parameters: shared.FunctionParameters{
			"type":       "object",
			"properties": map[string]any{"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}},
			"required":   []string{"city", "days"},
		},
	})
	chats := []struct {
		name   string
		params openai.ChatCompletionNewParams
	}{
		{"n and logprobs", openai.ChatCompletionNewParams{
			Model:    "llama",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello SDK")},
			N:        openai.Int(3), MaxTokens: openai.Int(5), Logprobs: openai.Bool(true), TopLogprobs: openai.Int(3), Seed: openai.Int(2),
		}},
		{"required", openai.ChatCompletionNewParams{
			Model:      "llama",
			Messages:   []openai.ChatCompletionMessageParamUnion{openai.UserMessage("what is the weather")},
			Tools:      []openai.ChatCompletionToolUnionParam{weather},
			ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")},
			N:          openai.Int(2), Seed: openai.Int(3),
		}},
		{"named", openai.ChatCompletionNewParams{
			Model:      "llama",
			Messages:   []openai.ChatCompletionMessageParamUnion{openai.UserMessage("what is the weather")},
			Tools:      []openai.ChatCompletionToolUnionParam{weather},
			ToolChoice: openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"}),
			Seed:       openai.Int(3),
		}},
		{"auto", openai.ChatCompletionNewParams{
			Model:    "llama",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("call get_weather for Oslo")},
			Tools:    []openai.ChatCompletionToolUnionParam{weather},
			Seed:     openai.Int(3), Logprobs: openai.Bool(true),
		}},
	}
	for _, c := range chats {
		t.Run(c.name, func(t *testing.T) {
			plain, err := client.Chat.Completions.New(ctx, c.params)
			if err != nil {
				t.Fatal(err)
			}
			n := 1
			if c.params.N.Valid() {
				n = int(c.params.N.Value)
			}
			if len(plain.Choices) != n || plain.Usage.CompletionTokens == 0 {
				t.Fatalf("answer %+v", plain)
			}
			for i, ch := range plain.Choices {
				if ch.Index != int64(i) {
					t.Errorf("choice %d has index %d", i, ch.Index)
				}
				if c.params.Tools == nil {
					var text strings.Builder
					for _, lp := range ch.Logprobs.Content {
						text.WriteString(lp.Token)
						if len(lp.TopLogprobs) != 3 || lp.TopLogprobs[0].Token != lp.Token || len(lp.Bytes) != len(lp.Token) {
							t.Errorf("choice %d: logprob %+v", i, lp)
						}
					}
					if text.String() != ch.Message.Content || ch.Message.Content == "" {
						t.Errorf("choice %d: logprobs for %q, content %q", i, text.String(), ch.Message.Content)
					}
					continue
				}
				calls := ch.Message.ToolCalls
				var args map[string]any
				if len(calls) != 1 || calls[0].Function.Name != "get_weather" || json.Unmarshal([]byte(calls[0].Function.Arguments), &args) != nil || len(args) != 2 {
					t.Errorf("choice %d: tool calls %+v", i, calls)
				}
				want := "tool_calls"
				if c.name == "named" {
					want = "stop"
				}
				if ch.FinishReason != want {
					t.Errorf("choice %d: finish_reason %q, want %q", i, ch.FinishReason, want)
				}
			}

			stream := client.Chat.Completions.NewStreaming(ctx, c.params, option.WithJSONSet("stream_options", map[string]any{"include_usage": true}))
			var acc openai.ChatCompletionAccumulator
			for stream.Next() {
				if !acc.AddChunk(stream.Current()) {
					t.Fatalf("the accumulator refused chunk %s", stream.Current().RawJSON())
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if len(acc.Choices) != n || acc.Usage.CompletionTokens != plain.Usage.CompletionTokens {
				t.Fatalf("accumulated %d choices, usage %+v; plain %+v", len(acc.Choices), acc.Usage, plain.Usage)
			}
			for i, ch := range acc.Choices {
				want := plain.Choices[i]
				if ch.Message.Content != want.Message.Content || ch.FinishReason != want.FinishReason || len(ch.Message.ToolCalls) != len(want.Message.ToolCalls) {
					t.Errorf("choice %d streamed %+v, plain %+v", i, ch.Message, want.Message)
					continue
				}
				for j, call := range ch.Message.ToolCalls {
					w := want.Message.ToolCalls[j].Function
					if call.Function.Name != w.Name || call.Function.Arguments != w.Arguments || !toolCallID.MatchString(call.ID) {
						t.Errorf("choice %d: streamed call %+v, plain %+v", i, call, want.Message.ToolCalls[j])
					}
				}
				if len(ch.Logprobs.Content) != len(want.Logprobs.Content) {
					t.Errorf("choice %d: %d logprobs streamed, %d plain", i, len(ch.Logprobs.Content), len(want.Logprobs.Content))
				}
			}
		})
	}
}
