package chattemplate

import (
	"testing"

	"github.com/hermod/hermod/libs/tokenizer"
)

func TestRewriteInlineIfs(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{{ a + (b if c else "") }}`, `{{ a + ` + inlineIfName + `(c, b, "") }}`},
		{`{{ (x if y else (p if q else r)) }}`, `{{ ` + inlineIfName + `(y, x, ` + inlineIfName + `(q, p, r)) }}`},
		{`{{ f(a if b else c) }}`, `{{ f(a if b else c) }}`},             // call arguments are left alone
		{`{{ ('(if' + x) }}`, `{{ ('(if' + x) }}`},                       // no conditional: unchanged
		{`{{ ("a if b else c") }}`, `{{ ("a if b else c") }}`},           // inside a string
		{`text (a if b else c) {{ x }}`, `text (a if b else c) {{ x }}`}, // outside tags
		{`{% set v = (a if b else c) %}`, `{% set v = ` + inlineIfName + `(b, a, c) %}`},
		{`{{ (elsewhere if iffy else other) }}`, `{{ ` + inlineIfName + `(iffy, elsewhere, other) }}`},
	} {
		if got := rewriteInlineIfs(c.in); got != c.want {
			t.Errorf("%s:\n got  %s\n want %s", c.in, got, c.want)
		}
	}
}

// Rewritten conditionals render as Jinja2 renders them: the value of the
// branch the condition picks (Jinja's truthiness).
func TestInlineIfRenders(t *testing.T) {
	cfg := `{"chat_template": "{% for m in messages %}{{ '[' + (m.content if m.content else 'empty') + (' first' if loop.first else '') + ']' }}{% endfor %}"}`
	tpl, err := Load([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	got, err := tpl.Render([]tokenizer.Message{{Role: "user", Content: "hi"}, {Role: "user"}}, false)
	if err != nil || got != "[hi first][empty]" {
		t.Errorf("Render = %q, %v", got, err)
	}
}
