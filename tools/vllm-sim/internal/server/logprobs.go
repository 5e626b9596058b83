package server

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/hermod/hermod/libs/jsonenc"
	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/libs/tokenizer"
	"github.com/hermod/hermod/tools/vllm-sim/internal/engine"
)

// Logprobs, as vLLM returns them: completions' logprobs: k, chat's
// logprobs: true with top_logprobs: k, and a generate request's
// sampling_params.logprobs: k ask for the logprob of each output token and
// of the k most likely tokens at its position (the sampled token among
// them, first: the simulated model samples its most likely token). The
// values are the simulated model's (engine.Logprobs): deterministic, below
// 0, the sampled token's the highest.

// DefaultMaxLogprobs is vLLM's --max-logprobs default.
const DefaultMaxLogprobs = 20

// noLogprobs is a request's logprobs when it asks for none.
const noLogprobs = -1

// requestLogprobs checks a request's logprobs (and chat's top_logprobs)
// as vLLM does and returns how many top logprobs a token gets, or
// noLogprobs. raw is completions' and generate's count, chat's boolean.
func (p *Pod) requestLogprobs(api openai.API, raw, rawTop json.RawMessage) (int, *requestError) {
	var k int
	switch api {
	case openai.APIChatCompletions:
		var on *bool
		if !isNull(raw) && json.Unmarshal(raw, &on) != nil {
			return 0, badRequest("logprobs: Input should be a valid boolean")
		}
		top, rerr := logprobsCount(rawTop, "top_logprobs")
		if rerr != nil {
			return 0, rerr
		}
		if top == nil {
			top = new(int)
		}
		switch {
		case *top < 0 && *top != -1:
			return 0, badRequest("`top_logprobs` must be a positive value or -1.")
		case *top != 0 && (on == nil || !*on):
			return 0, badRequest("when using `top_logprobs`, `logprobs` must be set to true.")
		case on == nil || !*on:
			return noLogprobs, nil
		}
		k = *top
	case openai.APICompletions, openai.APIGenerate:
		n, rerr := logprobsCount(raw, "logprobs")
		switch {
		case rerr != nil:
			return 0, rerr
		case n == nil:
			return noLogprobs, nil
		case *n < 0 && *n != -1 && api == openai.APIGenerate:
			return 0, badRequest(fmt.Sprintf("logprobs must be non-negative or -1, got %d.", *n))
		case *n < 0 && *n != -1:
			return 0, badRequest("`logprobs` must be a positive value or -1.")
		}
		k = *n
	default:
		return noLogprobs, nil
	}
	limit := p.cfg.MaxLogprobs
	if limit == -1 {
		limit = tokenizer.BuiltinVocabSize
	}
	if k == -1 {
		k = tokenizer.BuiltinVocabSize
	}
	if k > limit {
		return 0, badRequest(fmt.Sprintf("Requested sample logprobs of %d, which is greater than max allowed: %d", k, limit))
	}
	return k, nil
}

// logprobsCount reads an integer member (null or absent: nil).
func logprobsCount(raw json.RawMessage, name string) (*int, *requestError) {
	if isNull(raw) {
		return nil, nil
	}
	var f float64
	if json.Unmarshal(raw, &f) != nil {
		return nil, badRequest(fmt.Sprintf("`%s` must be an integer.", name))
	}
	if f != float64(int(f)) {
		return nil, badRequest(fmt.Sprintf("%s: Input should be a valid integer, got a number with a fractional part", name))
	}
	n := int(f)
	return &n, nil
}

// tokenLogprobs returns the logprob of output token i of c and appends
// the top-1 others of its top (the sampled token is the first).
func (o *output) tokenLogprobs(c *choice, i, top int) float64 {
	lp, cands := engine.Logprobs(o.cands[:0], c.seq.Seed(), i, c.piece(i), top-1)
	o.cands = cands
	return lp
}

func appendFloat(b []byte, v float64) []byte { return strconv.AppendFloat(b, v, 'g', -1, 64) }

func appendBytes(b []byte, s string) []byte {
	b = append(b, '[')
	for j := 0; j < len(s); j++ {
		if j > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(s[j]), 10)
	}
	return append(b, ']')
}

// appendChatLogprob appends a chat logprob object's members after its
// opening brace: token, logprob, bytes.
func appendChatLogprob(b []byte, token string, lp float64) []byte {
	b = append(b, `"token":`...)
	b = jsonenc.AppendString(b, token)
	b = append(b, `,"logprob":`...)
	b = appendFloat(b, lp)
	b = append(b, `,"bytes":`...)
	return appendBytes(b, token)
}

// appendChatLogprobs appends a chat choice's logprobs for its output
// tokens [from, to): {"content": [{"token", "logprob", "bytes",
// "top_logprobs": [{"token", "logprob", "bytes"}, ...]}, ...]}, k top
// logprobs each (vLLM's _create_chat_logprobs).
func (o *output) appendChatLogprobs(b []byte, c *choice, from, to int) []byte {
	b = append(b, `{"content":[`...)
	for i := from; i < to; i++ {
		if i > from {
			b = append(b, ',')
		}
		lp := o.tokenLogprobs(c, i, o.logprobs)
		b = append(b, '{')
		b = appendChatLogprob(b, c.piece(i), lp)
		b = append(b, `,"top_logprobs":[`...)
		if o.logprobs > 0 {
			b = append(b, '{')
			b = appendChatLogprob(b, c.piece(i), lp)
			b = append(b, '}')
			for _, alt := range o.cands {
				b = append(b, ",{"...)
				b = appendChatLogprob(b, alt.Text, alt.Logprob)
				b = append(b, '}')
			}
		}
		b = append(b, "]}"...)
	}
	return append(b, "]}"...)
}

// appendCompletionLogprobs appends a completions choice's logprobs for its
// output tokens [from, to), whose text starts at offset (characters):
// {"text_offset", "token_logprobs", "tokens", "top_logprobs": [{token:
// logprob}, ...]}, the k top logprobs (the sampled token's alone for k 0)
// of each (vLLM's _create_completion_logprobs). It returns the offset
// after the tokens.
func (o *output) appendCompletionLogprobs(b []byte, c *choice, from, to, offset int) ([]byte, int) {
	b = append(b, `{"text_offset":[`...)
	for i := from; i < to; i++ {
		if i > from {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(offset), 10)
		offset += utf8.RuneCountInString(c.piece(i))
	}
	b = append(b, `],"token_logprobs":[`...)
	for i := from; i < to; i++ {
		if i > from {
			b = append(b, ',')
		}
		b = appendFloat(b, o.tokenLogprobs(c, i, 1))
	}
	b = append(b, `],"tokens":[`...)
	for i := from; i < to; i++ {
		if i > from {
			b = append(b, ',')
		}
		b = jsonenc.AppendString(b, c.piece(i))
	}
	b = append(b, `],"top_logprobs":[`...)
	for i := from; i < to; i++ {
		if i > from {
			b = append(b, ',')
		}
		lp := o.tokenLogprobs(c, i, max(o.logprobs, 1))
		b = append(b, '{')
		b = jsonenc.AppendString(b, c.piece(i))
		b = append(b, ':')
		b = appendFloat(b, lp)
		for _, alt := range o.cands {
			b = append(b, ',')
			b = jsonenc.AppendString(b, alt.Text)
			b = append(b, ':')
			b = appendFloat(b, alt.Logprob)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...), offset
}

// appendTokenIDLogprob appends a generate logprob object's members after
// its opening brace.
func appendTokenIDLogprob(b []byte, id uint32, lp float64) []byte {
	b = append(b, `"token":"token_id:`...)
	b = strconv.AppendUint(b, uint64(id), 10)
	b = append(b, `","logprob":`...)
	b = appendFloat(b, lp)
	return append(b, `,"bytes":null`...)
}

// appendTokenLogprobs appends a generate choice's logprobs for its output
// tokens [from, to): chat's shape with tokens as "token_id:<id>" and no
// bytes, max(k, 1) top logprobs each (vLLM's _create_tokens_logprobs).
func (o *output) appendTokenLogprobs(b []byte, c *choice, from, to int) []byte {
	b = append(b, `{"content":[`...)
	for i := from; i < to; i++ {
		if i > from {
			b = append(b, ',')
		}
		lp := o.tokenLogprobs(c, i, max(o.logprobs, 1))
		id := c.seq.OutputToken(i)
		b = append(b, '{')
		b = appendTokenIDLogprob(b, id, lp)
		b = append(b, `,"top_logprobs":[{`...)
		b = appendTokenIDLogprob(b, id, lp)
		b = append(b, '}')
		for _, alt := range o.cands {
			b = append(b, ",{"...)
			b = appendTokenIDLogprob(b, alt.ID, alt.Logprob)
			b = append(b, '}')
		}
		b = append(b, "]}"...)
	}
	return append(b, "]}"...)
}
