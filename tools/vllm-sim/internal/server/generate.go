package server

import (
	"net/http"
	"strconv"

	"github.com/hermod/hermod/libs/jsonenc"
	"github.com/hermod/hermod/tools/vllm-sim/internal/engine"
)

// vLLM's token-in, token-out API (/inference/v1/generate): the prompt is
// the request's token_ids, run as a completion of that token-id prompt
// (the same engine, prefix cache, KV events and metrics), and the answer is
// the generated token ids, the same ids the engine caches the output
// under: a client that sends prompt and output back hits their blocks.
// Requests are checked and submitted by generate; this file renders the
// answers.

// appendTokenIDs appends output tokens [from, to) of the sequence as a
// JSON list.
func (o *output) appendTokenIDs(b []byte, from, to int) []byte {
	b = append(b, '[')
	for i := from; i < to; i++ {
		if i > from {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(engine.OutputToken(o.seq.Seed(), i)), 10)
	}
	return append(b, ']')
}

// completeTokens answers a generate request that does not stream, with
// vLLM's members: request_id, model, created, choices (one, its token_ids
// the output), usage, prompt_logprobs and kv_transfer_params (null).
func (o *output) completeTokens(w http.ResponseWriter, r *http.Request) {
	pr, ok := o.result(w, r)
	if !ok {
		return
	}
	b := make([]byte, 0, 256+8*pr.Generated)
	b = append(b, `{"request_id":`...)
	b = jsonenc.AppendString(b, o.id)
	b = append(b, `,"model":`...)
	b = jsonenc.AppendString(b, o.model)
	b = append(b, `,"created":`...)
	b = strconv.AppendInt(b, o.created, 10)
	b = append(b, `,"choices":[{"index":0,"logprobs":null,"finish_reason":`...)
	b = jsonenc.AppendString(b, pr.FinishReason)
	b = append(b, `,"token_ids":`...)
	b = o.appendTokenIDs(b, 0, pr.Generated)
	b = append(b, `}],"usage":`...)
	b = o.appendUsage(b, pr)
	b = append(b, `,"prompt_logprobs":null,"kv_transfer_params":null}`+"\n"...)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// streamTokens streams a generate answer as server-sent events: one chunk
// per token (its token_ids the one id; the last carrying finish_reason),
// then the usage chunk when asked for, then [DONE].
func (o *output) streamTokens(w http.ResponseWriter, r *http.Request, includeUsage bool) {
	var prefix []byte
	prefix = append(prefix, `data: {"request_id":`...)
	prefix = jsonenc.AppendString(prefix, o.id)
	o.pump(w, r, func(buf []byte, sent int, pr engine.Progress) []byte {
		for ; sent < pr.Generated; sent++ {
			buf = append(buf, prefix...)
			buf = append(buf, `,"choices":[{"index":0,"logprobs":null,"finish_reason":`...)
			if pr.Done && sent == pr.Generated-1 {
				buf = jsonenc.AppendString(buf, pr.FinishReason)
			} else {
				buf = append(buf, "null"...)
			}
			buf = append(buf, `,"token_ids":`...)
			buf = o.appendTokenIDs(buf, sent, sent+1)
			buf = append(buf, "}]}\n\n"...)
		}
		if pr.Done {
			buf = o.appendStreamEnd(buf, prefix, pr, includeUsage)
		}
		return buf
	})
}
