package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/hermod/hermod/libs/jsonenc"
	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/tools/vllm-sim/internal/engine"
)

// Anthropic's Messages API, as vLLM (0.11 and later) serves it beside the
// OpenAI API: the request runs as a chat completion (the same chat
// template, engine and metrics; tools and tool_choice converted to the
// chat request's, without n) and is answered in Anthropic's shapes.
// Requests are checked and submitted by generate; this file renders the
// answers.

// stopReason is Anthropic's stop_reason for a chat finish reason, vLLM's
// map: "length" is max_tokens, "tool_calls" tool_use, the rest end_turn
// (a named tool's call finishes with "stop", so end_turn).
func stopReason(finishReason string) string {
	switch finishReason {
	case engine.FinishLength:
		return "max_tokens"
	case "tool_calls":
		return "tool_use"
	}
	return "end_turn"
}

// appendAnthropicMessage appends a message object. Before the end
// (message_start's message, done false) its content is empty, its
// stop_reason null and its output_tokens 0; at the end it holds the text
// as one text block, or the tool call as a tool_use block (its input the
// arguments; a call cut short, which does not parse, is text). Usage comes
// last, as in Anthropic's answers.
func (o *output) appendAnthropicMessage(b []byte, pr engine.Progress, done bool) []byte {
	c := &o.choices[0]
	b = append(b, `{"id":`...)
	b = jsonenc.AppendString(b, o.id)
	b = append(b, `,"type":"message","role":"assistant","model":`...)
	b = jsonenc.AppendString(b, o.model)
	b = append(b, `,"content":[`...)
	switch {
	case !done:
	case c.call != nil && c.call.complete(pr.Generated):
		b = appendToolUse(b, c.call, true)
	case pr.Generated > 0:
		b = append(b, `{"type":"text","text":`...)
		b = jsonenc.AppendString(b, c.text(pr.Generated))
		b = append(b, '}')
	}
	b = append(b, `],"stop_reason":`...)
	output := 0
	if done {
		b = jsonenc.AppendString(b, stopReason(c.call.finishReason(pr)))
		output = pr.Generated
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"stop_sequence":null,"usage":{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(pr.PromptTokens), 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, int64(output), 10)
	return append(b, "}}"...)
}

// appendToolUse appends a tool_use block: its input the call's arguments
// (withInput), or {} (a stream's content_block_start, whose input follows
// in input_json_delta events).
func appendToolUse(b []byte, call *toolCall, withInput bool) []byte {
	b = append(b, `{"type":"tool_use","id":`...)
	b = jsonenc.AppendString(b, call.id)
	b = append(b, `,"name":`...)
	b = jsonenc.AppendString(b, call.name)
	b = append(b, `,"input":`...)
	if !withInput {
		return append(b, "{}}"...)
	}
	var compact bytes.Buffer
	if json.Compact(&compact, []byte(call.args)) != nil {
		return append(b, "{}}"...)
	}
	b = append(b, compact.Bytes()...)
	return append(b, '}')
}

// completeMessage answers a Messages request that does not stream.
func (o *output) completeMessage(w http.ResponseWriter, r *http.Request) {
	prs, ok := o.result(w, r)
	if !ok {
		return
	}
	b := o.appendAnthropicMessage(make([]byte, 0, 512), prs[0], true)
	b = append(b, '\n')
	writeBody(w, b)
}

// Anthropic stream events: "event: <type>" then the data line.
const (
	eventMessageStart = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":"
	eventBlockStart   = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":"
	eventTextBlock    = "{\"type\":\"text\",\"text\":\"\"}}\n\n"
	eventBlockDelta   = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":"
	eventTextDelta    = "{\"type\":\"text_delta\",\"text\":"
	eventJSONDelta    = "{\"type\":\"input_json_delta\",\"partial_json\":"
	eventBlockStop    = "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
	eventMessageDelta = "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
	eventMessageStop  = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
)

// streamMessage streams a Messages answer as Anthropic's events:
// message_start with the first token (as vLLM sends it, so that the first
// byte is the first token), then the content block: a text block
// (content_block_start with the first token, a content_block_delta per
// token) or a tool_use block (content_block_start once the call's name is
// written, as vLLM converts its chat stream's tool call deltas, then an
// input_json_delta per token writing arguments), then content_block_stop,
// message_delta (stop_reason and output_tokens) and message_stop.
func (o *output) streamMessage(w http.ResponseWriter, r *http.Request) {
	c := &o.choices[0]
	block := false
	o.pump(w, r, func(buf []byte, sent []int, prs []engine.Progress) []byte {
		pr := prs[0]
		if sent[0] == 0 {
			buf = append(buf, eventMessageStart...)
			buf = o.appendAnthropicMessage(buf, pr, false)
			buf = append(buf, "}\n\n"...)
		}
		for t := sent[0]; t < pr.Generated; t++ {
			call := c.call
			if call == nil {
				if !block {
					block = true
					buf = append(buf, eventBlockStart...)
					buf = append(buf, eventTextBlock...)
				}
				buf = append(buf, eventBlockDelta...)
				buf = append(buf, eventTextDelta...)
				buf = jsonenc.AppendString(buf, c.piece(t))
				buf = append(buf, "}}\n\n"...)
				continue
			}
			if t == call.head {
				block = true
				buf = append(buf, eventBlockStart...)
				buf = appendToolUse(buf, call, false)
				buf = append(buf, "}\n\n"...)
			}
			if args := call.argsPart(t, t+1); block && args != "" {
				buf = append(buf, eventBlockDelta...)
				buf = append(buf, eventJSONDelta...)
				buf = jsonenc.AppendString(buf, args)
				buf = append(buf, "}}\n\n"...)
			}
		}
		if pr.Done {
			if block {
				buf = append(buf, eventBlockStop...)
			}
			buf = append(buf, eventMessageDelta...)
			buf = jsonenc.AppendString(buf, stopReason(c.call.finishReason(pr)))
			buf = append(buf, `,"stop_sequence":null},"usage":{"output_tokens":`...)
			buf = strconv.AppendInt(buf, int64(pr.Generated), 10)
			buf = append(buf, "}}\n\n"...)
			buf = append(buf, eventMessageStop...)
		}
		return buf
	})
}

// countTokens answers /v1/messages/count_tokens: {"input_tokens": n}, n
// the prompt's tokens as a Messages request with the same body would
// have them (the chat template applied), without running the engine.
func (p *Pod) countTokens(w http.ResponseWriter, r *http.Request) {
	const api = openai.APIMessagesCountTokens
	body, ok := readBody(w, r, api)
	if !ok {
		return
	}
	parsed, err := openai.Parse(api, body)
	if err != nil {
		writeAPIError(w, api, http.StatusBadRequest, err.Error())
		return
	}
	if _, _, ok := p.resolveModel(parsed.Model); !ok {
		e := unknownModel(parsed.Model)
		writeAPIError(w, api, e.status, e.msg)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": len(p.promptTokens(api, parsed))})
}
