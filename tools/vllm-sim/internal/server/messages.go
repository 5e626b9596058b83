package server

import (
	"net/http"
	"strconv"

	"github.com/hermod/hermod/libs/jsonenc"
	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/tools/vllm-sim/internal/engine"
)

// Anthropic's Messages API, as vLLM (0.11 and later) serves it beside the
// OpenAI API: the request runs as a chat completion (the same chat
// template, engine and metrics) and is answered in Anthropic's shapes.
// Requests are checked and submitted by generate; this file renders the
// answers.

// stopReason is Anthropic's stop_reason for an engine finish reason.
func stopReason(finishReason string) string {
	if finishReason == engine.FinishLength {
		return "max_tokens"
	}
	return "end_turn"
}

// appendMessage appends a message object. Before the end (message_start's
// message, done false) its content is empty, its stop_reason null and its
// output_tokens 0; at the end it holds the text as one text block. Usage
// comes last, as in Anthropic's answers.
func (o *output) appendMessage(b []byte, pr engine.Progress, text []byte, done bool) []byte {
	b = append(b, `{"id":`...)
	b = jsonenc.AppendString(b, o.id)
	b = append(b, `,"type":"message","role":"assistant","model":`...)
	b = jsonenc.AppendString(b, o.model)
	b = append(b, `,"content":[`...)
	if done && len(text) > 0 {
		b = append(b, `{"type":"text","text":`...)
		b = jsonenc.AppendString(b, string(text))
		b = append(b, '}')
	}
	b = append(b, `],"stop_reason":`...)
	output := 0
	if done {
		b = jsonenc.AppendString(b, stopReason(pr.FinishReason))
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

// completeMessage answers a Messages request that does not stream.
func (o *output) completeMessage(w http.ResponseWriter, r *http.Request) {
	pr, ok := o.result(w, r)
	if !ok {
		return
	}
	text := o.text(pr.Generated)
	b := o.appendMessage(make([]byte, 0, len(text)+256), pr, text, true)
	b = append(b, '\n')
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// Anthropic stream events: "event: <type>" then the data line.
const (
	eventMessageStart = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":"
	eventBlockStart   = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
	eventBlockDelta   = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":"
	eventBlockStop    = "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
	eventMessageDelta = "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
	eventMessageStop  = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
)

// streamMessage streams a Messages answer as Anthropic's events:
// message_start and content_block_start with the first token (as vLLM
// sends them, so that the first byte is the first token), one
// content_block_delta per token, then content_block_stop, message_delta
// (stop_reason and output_tokens) and message_stop.
func (o *output) streamMessage(w http.ResponseWriter, r *http.Request) {
	o.pump(w, r, func(buf []byte, sent int, pr engine.Progress) []byte {
		if sent == 0 {
			buf = append(buf, eventMessageStart...)
			buf = o.appendMessage(buf, pr, nil, false)
			buf = append(buf, "}\n\n"...)
			buf = append(buf, eventBlockStart...)
		}
		for ; sent < pr.Generated; sent++ {
			buf = append(buf, eventBlockDelta...)
			buf = jsonenc.AppendString(buf, string(appendTokenText(nil, o.seq.Seed(), sent)))
			buf = append(buf, "}}\n\n"...)
		}
		if pr.Done {
			buf = append(buf, eventBlockStop...)
			buf = append(buf, eventMessageDelta...)
			buf = jsonenc.AppendString(buf, stopReason(pr.FinishReason))
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
