package hf

import (
	"fmt"
	"strings"

	"github.com/hermod/hermod/libs/tokenizer"
)

// Tokenizer is a tokenizer loaded from a Hugging Face tokenizer.json: BPE
// (byte-level, or SentencePiece style on characters) or Unigram. It is immutable once loaded, apart from an internal
// cache, and safe for concurrent use.
type Tokenizer struct {
	name       string
	addSpecial bool
	added      *addedMatcher // added tokens matched in the raw text
	addedNorm  *addedMatcher // added tokens matched in normalized text
	normalizer normalizer
	pre        *preTokenizer
	model      model
	post       postProcessor
	vocab      vocabulary
}

var _ tokenizer.Tokenizer = (*Tokenizer)(nil)

// Name implements tokenizer.Tokenizer.
func (t *Tokenizer) Name() string { return t.name }

// VocabSize implements tokenizer.Tokenizer: the largest id of the model's
// vocabulary and the added tokens, plus one.
func (t *Tokenizer) VocabSize() int { return t.vocab.size }

// Encode implements tokenizer.Tokenizer: it appends the ids of text to
// dst, with the post-processor's special tokens unless the tokenizer was
// loaded with AddSpecialTokens(false).
func (t *Tokenizer) Encode(dst []uint32, text string) []uint32 {
	return t.EncodeWithSpecial(dst, text, t.addSpecial)
}

// EncodeWithSpecial appends the ids of text to dst; addSpecialTokens is
// the Hugging Face library's add_special_tokens. Special tokens written in
// the text are always recognized (unless SplitSpecialTokens).
func (t *Tokenizer) EncodeWithSpecial(dst []uint32, text string, addSpecialTokens bool) []uint32 {
	if addSpecialTokens {
		dst = append(dst, t.post.prefix...)
	}
	e := encoder{t: t, dst: dst, sc: scratchPool.Get().(*scratch), atStart: true}
	e.extract(text, t.added, (*encoder).normalize)
	e.sc.trim()
	scratchPool.Put(e.sc)
	dst = e.dst
	if addSpecialTokens {
		dst = append(dst, t.post.suffix...)
	}
	return dst
}

// Decode returns the text of ids: the bytes of model tokens (a
// byte_fallback token <0xNN> is its byte; SentencePiece's "▁" stays as
// it is) and the content of added tokens, concatenated. Ids from Encode
// decode back to the normalized, pre-tokenized text, unless it had
// characters the model does not know (encoded as its unknown token).
func (t *Tokenizer) Decode(ids []uint32) (string, error) {
	var b strings.Builder
	for _, id := range ids {
		tok, ok := t.vocab.tokens[id]
		if !ok {
			return "", fmt.Errorf("decode: id %d is not in the vocabulary", id)
		}
		b.WriteString(tok)
	}
	return b.String(), nil
}

// encoder is the state of one Encode call.
type encoder struct {
	t   *Tokenizer
	dst []uint32
	sc  *scratch
	// atStart tells whether the text passed on next starts the input
	// (Metaspace's prepend_scheme "first" needs to know).
	atStart bool
}

// extract appends the ids of the added tokens m finds in s and passes the
// text between them to then.
func (e *encoder) extract(s string, m *addedMatcher, then func(*encoder, string)) {
	atStart := e.atStart
	done := 0
	for {
		start, stop, id, ok := m.next(s, done)
		if !ok {
			break
		}
		if start > done {
			e.atStart = atStart && done == 0
			then(e, s[done:start])
		}
		e.dst = append(e.dst, id)
		done = stop
	}
	if done < len(s) {
		e.atStart = atStart && done == 0
		then(e, s[done:])
	}
}

// normalize normalizes text found between raw added tokens, then looks
// for normalized added tokens in it.
func (e *encoder) normalize(s string) {
	s = e.t.normalizer.apply(s)
	if e.t.addedNorm.empty() {
		e.t.pre.words(s, e.atStart, e)
		return
	}
	e.extract(s, e.t.addedNorm, (*encoder).pretokenize)
}

// pretokenize passes the words of s to word.
func (e *encoder) pretokenize(s string) { e.t.pre.words(s, e.atStart, e) }

// word appends the ids of one pre-tokenized word.
func (e *encoder) word(w string) { e.dst = e.t.model.encodeWord(e.dst, w, e.sc) }
