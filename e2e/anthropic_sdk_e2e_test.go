package e2e

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// wantAnthropicError checks that err is the Anthropic error the SDK
// decodes, with status and error type.
func wantAnthropicError(t *testing.T, what string, err error, status int, typ string) {
	t.Helper()
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("%s: %v (%T), want an *anthropic.Error", what, err, err)
	}
	if apiErr.StatusCode != status || string(apiErr.Type()) != typ || apiErr.Message == "" {
		t.Errorf("%s: status %d type %q message %q, want %d %q and a message", what, apiErr.StatusCode, apiErr.Type(), apiErr.Message, status, typ)
	}
}

// The official Anthropic Go SDK drives the Messages API through the
// gateway (its key in x-api-key), plain and streamed, counts tokens, and
// decodes every error in Anthropic's shape; the gateway accounts the
// streams' usage and first tokens as it does OpenAI's.
func TestAnthropicSDK(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte("claude sk-ant-test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startStack(t, "--pods", "2", "--speed", "50", "--gateway-args=--api-keys-file,"+keys)
	client := func(key string) anthropic.Client {
		return anthropic.NewClient(option.WithBaseURL(s.url("/")), option.WithAPIKey(key), option.WithMaxRetries(0))
	}
	c := client("sk-ant-test")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	model := s.state.Model
	params := anthropic.MessageNewParams{Model: model, MaxTokens: 8,
		System:   []anthropic.TextBlockParam{{Text: "Be brief."}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is a KV cache?"))}}
	var outputTokens int64

	msg, err := c.Messages.New(ctx, params)
	if err != nil || msg.Role != "assistant" || len(msg.Content) == 0 || msg.Content[0].Text == "" || msg.Usage.InputTokens == 0 || msg.Usage.OutputTokens == 0 {
		t.Fatalf("message: %+v %v", msg, err)
	}
	outputTokens += msg.Usage.OutputTokens

	stream := c.Messages.NewStreaming(ctx, params)
	acc := anthropic.Message{}
	deltas := 0
	for stream.Next() {
		ev := stream.Current()
		if err := acc.Accumulate(ev); err != nil {
			t.Fatalf("accumulate %s: %v", ev.Type, err)
		}
		if ev.Type == "content_block_delta" {
			deltas++
		}
	}
	if err := stream.Err(); err != nil || len(acc.Content) == 0 || acc.Content[0].Text == "" || acc.Usage.InputTokens != msg.Usage.InputTokens ||
		acc.Usage.OutputTokens != int64(deltas) || acc.StopReason == "" {
		t.Fatalf("stream: %+v (%d deltas) %v", acc, deltas, err)
	}
	outputTokens += acc.Usage.OutputTokens

	count, err := c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: model,
		System:   anthropic.MessageCountTokensParamsSystemUnion{OfTextBlockArray: params.System},
		Messages: params.Messages})
	if err != nil || count.InputTokens != msg.Usage.InputTokens {
		t.Fatalf("count_tokens: %+v %v, want the message's %d input tokens", count, err, msg.Usage.InputTokens)
	}

	// a coding agent's request: tools offered (tool_choice auto, as
	// the SDK leaves it), and one that must call a tool
	tools := params
	tools.MaxTokens = 64
	tools.Tools = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "read_file",
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"path": map[string]any{"type": "string"}}, Required: []string{"path"}}}}}
	m, err := c.Messages.New(ctx, tools)
	if err != nil || len(m.Content) == 0 {
		t.Fatalf("tools offered: %+v %v", m, err)
	}
	outputTokens += m.Usage.OutputTokens
	tools.ToolChoice = anthropic.ToolChoiceUnionParam{OfAny: &anthropic.ToolChoiceAnyParam{}}
	m, err = c.Messages.New(ctx, tools)
	if err != nil || len(m.Content) == 0 || m.StopReason != anthropic.StopReasonToolUse {
		t.Fatalf("a tool required: %+v %v", m, err)
	}
	outputTokens += m.Usage.OutputTokens
	if use := m.Content[len(m.Content)-1].AsToolUse(); use.Name != "read_file" || len(use.Input) == 0 {
		t.Errorf("tool use %+v", m.Content)
	}

	unknown := params
	unknown.Model = "no-such-model"
	_, err = c.Messages.New(ctx, unknown)
	wantAnthropicError(t, "an unknown model", err, http.StatusNotFound, "not_found_error")
	unknownStream := c.Messages.NewStreaming(ctx, unknown)
	for unknownStream.Next() {
	}
	wantAnthropicError(t, "an unknown model, streamed", unknownStream.Err(), http.StatusNotFound, "not_found_error")
	empty := params
	empty.Messages = nil
	_, err = c.Messages.New(ctx, empty)
	wantAnthropicError(t, "no messages", err, http.StatusBadRequest, "invalid_request_error")
	nobody := client("sk-nobody")
	_, err = nobody.Messages.New(ctx, params)
	wantAnthropicError(t, "an unknown key", err, http.StatusUnauthorized, "authentication_error")

	// the gateway saw every answer's output tokens and first token
	ops := "http://" + s.state.GatewayOps[0] + "/metrics"
	if got := metricValue(t, ops, "inference_objective_output_tokens_sum"); got != float64(outputTokens) {
		t.Errorf("the gateway accounted %v output tokens, want %d", got, outputTokens)
	}
	if got := metricValue(t, ops, `hermod_gateway_time_to_first_token_seconds_count{api="messages"}`); got != 4 {
		t.Errorf("%v first tokens of messages observed, want 4 (the answers' and the stream's)", got)
	}
}
