package tokenizer

import "strings"

// Llama3Template renders messages the way Llama 3 instruct models' chat
// template does:
//
//	<|begin_of_text|><|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>...
//
// and, with a generation prompt, ends with the assistant header.
type Llama3Template struct{}

var _ ChatTemplate = Llama3Template{}

// Apply implements ChatTemplate.
func (Llama3Template) Apply(messages []Message, addGenerationPrompt bool) string {
	n := len("<|begin_of_text|>") + 64
	for _, m := range messages {
		n += len(m.Role) + len(m.Content) + 48
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString("<|begin_of_text|>")
	for _, m := range messages {
		b.WriteString("<|start_header_id|>")
		b.WriteString(m.Role)
		b.WriteString("<|end_header_id|>\n\n")
		b.WriteString(m.Content)
		b.WriteString("<|eot_id|>")
	}
	if addGenerationPrompt {
		b.WriteString("<|start_header_id|>assistant<|end_header_id|>\n\n")
	}
	return b.String()
}
