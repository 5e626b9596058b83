package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
)

// Every API beside OpenAI's chat and completions, on both ways in (the
// gateway, and Envoy with the picker's ext_proc server): Anthropic's
// Messages and count_tokens, vLLM's /inference/v1/generate, plain and
// streamed, and vLLM's other endpoints. Each is routed, served by a pod, and completed once with the
// tokens its answer reported.
func TestEveryAPIBothWaysIn(t *testing.T) {
	s := startStack(t, "--pods", "2", "--speed", "50")
	ev := s.follow(t)
	model := s.state.Model
	viaEnvoy := s.plainAt(newEnvoyStandIn(t, s, s.state.Pickers[0].GRPC).addr)

	type call struct {
		path, body string
		stream     bool
		generates  bool
		want       string // in the answer
	}
	calls := []call{
		{"/v1/messages", fmt.Sprintf(`{"model":%q,"max_tokens":6,"system":"Be brief.","messages":[{"role":"user","content":"hello"}]}`, model), false, true, `"type":"message"`},
		{"/v1/messages", fmt.Sprintf(`{"model":%q,"max_tokens":6,"stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"hello"}]}]}`, model), true, true, "content_block_delta"},
		{"/v1/messages/count_tokens", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hello"}]}`, model), false, false, `"input_tokens":`},
		{"/inference/v1/generate", fmt.Sprintf(`{"model":%q,"token_ids":[101,102,103,104],"sampling_params":{"max_tokens":5}}`, model), false, true, `"token_ids":[`},
		{"/inference/v1/generate", `{"token_ids":[101,102,103,104],"stream":true,"sampling_params":{"max_tokens":5}}`, true, true, `"token_ids":[`},
		// vLLM's other endpoints: routed by model, passed on unread
		{"/tokenize", fmt.Sprintf(`{"model":%q,"prompt":"hello world"}`, model), false, false, `"tokens":[`},
		{"/v1/chat/completions/render", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hello"}]}`, model), false, false, `"token_ids":[`},
	}
	for _, way := range []struct {
		name     string
		stack    *devstack
		reporter string
	}{{"gateway", s, ""}, {"envoy", viaEnvoy, s.state.Pickers[0].Name}} {
		t.Run(way.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var ids []string
			for _, c := range calls {
				r := way.stack.send(ctx, c.path, c.body, c.stream)
				if !r.ok() || !strings.Contains(r.body, c.want) || r.requestID == "" {
					t.Fatalf("%s (stream %t): %d %v: %s", c.path, c.stream, r.status, r.err, tail(r.body, 4))
				}
				if c.stream && strings.Contains(r.body, `"usage":{"prompt_tokens"`) && c.path != "/inference/v1/generate" {
					t.Errorf("%s: the stream carries a usage chunk the client did not ask for", c.path)
				}
				ids = append(ids, r.requestID)
			}
			waitFor(t, 10*time.Second, "one decision and one completion per request", func() bool {
				for _, id := range ids {
					if d, c := ev.counts(id); d != 1 || c != 1 {
						return false
					}
				}
				return true
			})
			for i, id := range ids {
				c, call := ev.completion(id), calls[i]
				if c.GetOutcome() != eventsv1.CompletionOutcome_COMPLETION_OUTCOME_SUCCESS || c.GetStreamed() != call.stream ||
					(way.reporter != "" && c.GetReporter() != way.reporter) {
					t.Errorf("%s (stream %t): completion %v", call.path, call.stream, c)
				}
				if call.generates && (c.GetPromptTokens() == 0 || c.GetCompletionTokens() == 0) {
					t.Errorf("%s (stream %t): tokens %d in, %d out: the answer's usage was not read", call.path, call.stream, c.GetPromptTokens(), c.GetCompletionTokens())
				}
			}
		})
	}
}
