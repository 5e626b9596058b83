// Package tokenizer turns prompts into the token ids an inference engine
// sees. Hermod needs exact ids wherever it reasons about KV-cache blocks
// (precise prefix routing, the simulator's prefix cache), so every such
// path tokenizes through this interface with the same tokenizer.
package tokenizer

// Tokenizer encodes text into token ids.
type Tokenizer interface {
	// Name identifies the tokenizer (and its version).
	Name() string
	// Encode appends the token ids of text to dst and returns it.
	Encode(dst []uint32, text string) []uint32
	// VocabSize is the number of distinct ids Encode may return.
	VocabSize() int
}

// Message is one chat message for a chat template.
type Message struct {
	Role    string
	Content string
}

// ChatTemplate renders chat messages into the prompt text a model sees.
type ChatTemplate interface {
	// Apply renders messages; with addGenerationPrompt it ends with the
	// header of the assistant turn the model is to write.
	Apply(messages []Message, addGenerationPrompt bool) string
}
