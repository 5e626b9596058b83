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
// With sampling_params.n it answers n outputs (at most --max-num-seqs, as
// vLLM's), with sampling_params.logprobs their logprobs. Requests are
// checked and submitted by generate; this file renders the answers.

// appendTokenIDs appends output tokens [from, to) of c as a JSON list.
func appendTokenIDs(b []byte, c *choice, from, to int) []byte {
	b = append(b, '[')
	for i := from; i < to; i++ {
		if i > from {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(c.seq.OutputToken(i)), 10)
	}
	return append(b, ']')
}

// completeTokens answers a generate request that does not stream, with
// vLLM's members: request_id, model, created, choices (one per output, its
// token_ids the output), usage, prompt_logprobs and kv_transfer_params
// (null).
func (o *output) completeTokens(w http.ResponseWriter, r *http.Request) {
	prs, ok := o.result(w, r)
	if !ok {
		return
	}
	b := make([]byte, 0, 256)
	b = append(b, `{"request_id":`...)
	b = jsonenc.AppendString(b, o.id)
	b = append(b, `,"model":`...)
	b = jsonenc.AppendString(b, o.model)
	b = append(b, `,"created":`...)
	b = strconv.AppendInt(b, o.created, 10)
	b = append(b, `,"choices":[`...)
	for i := range o.choices {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"logprobs":`...)
		b = o.appendLogprobs(b, &o.choices[i], 0, prs[i].Generated, 0)
		b = append(b, `,"finish_reason":`...)
		b = jsonenc.AppendString(b, prs[i].FinishReason)
		b = append(b, `,"token_ids":`...)
		b = appendTokenIDs(b, &o.choices[i], 0, prs[i].Generated)
		b = append(b, '}')
	}
	b = append(b, `],"usage":`...)
	b = o.appendUsage(b, prs)
	b = append(b, `,"prompt_logprobs":null,"kv_transfer_params":null}`+"\n"...)
	writeBody(w, b)
}

// streamTokens streams a generate answer as server-sent events: one chunk
// per token of each output (its token_ids the one id; the last of an
// output carrying its finish_reason), then the usage chunk when asked
// for, then [DONE].
func (o *output) streamTokens(w http.ResponseWriter, r *http.Request, includeUsage bool) {
	var prefix []byte
	prefix = append(prefix, `data: {"request_id":`...)
	prefix = jsonenc.AppendString(prefix, o.id)
	o.pump(w, r, func(buf []byte, sent []int, prs []engine.Progress) []byte {
		eachNewToken(sent, prs, func(i, t int) {
			c, pr := &o.choices[i], prs[i]
			buf = append(buf, prefix...)
			buf = append(buf, `,"choices":[{"index":`...)
			buf = strconv.AppendInt(buf, int64(i), 10)
			buf = append(buf, `,"logprobs":`...)
			buf = o.appendLogprobs(buf, c, t, t+1, 0)
			buf = append(buf, `,"finish_reason":`...)
			if pr.Done && t == pr.Generated-1 {
				buf = jsonenc.AppendString(buf, pr.FinishReason)
			} else {
				buf = append(buf, "null"...)
			}
			buf = append(buf, `,"token_ids":`...)
			buf = appendTokenIDs(buf, c, t, t+1)
			buf = append(buf, "}]}\n\n"...)
		})
		if allDone(prs) {
			buf = o.appendStreamEnd(buf, prefix, prs, includeUsage)
		}
		return buf
	})
}
