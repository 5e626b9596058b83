package hf

// Option configures Load.
type Option func(*options)

type options struct {
	addSpecialTokens   bool
	splitSpecialTokens bool
	name               string
}

func defaultOptions() options {
	return options{addSpecialTokens: true}
}

// AddSpecialTokens sets whether Encode (the tokenizer.Tokenizer method)
// adds the post-processor's special tokens, such as Llama 3's
// <|begin_of_text|>. The default, true, gives the ids vLLM's
// /v1/completions sees for a prompt string; vLLM's chat path renders the
// chat template (which has them in its text) and encodes it without:
// use false, or EncodeWithSpecial, for that.
func AddSpecialTokens(add bool) Option {
	return func(o *options) { o.addSpecialTokens = add }
}

// SplitSpecialTokens sets whether special tokens written in the text are
// encoded as plain text (transformers' split_special_tokens). The
// default, false, turns "<|im_start|>" in a prompt into its one id, as
// vLLM does.
func SplitSpecialTokens(split bool) Option {
	return func(o *options) { o.splitSpecialTokens = split }
}

// WithName sets what Name returns. By default it is "hf-bpe-" and the
// first 16 hex digits of the SHA-256 of the tokenizer.json bytes, so that
// the same file has the same name in every process.
func WithName(name string) Option {
	return func(o *options) { o.name = name }
}
