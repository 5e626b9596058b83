// Package chattemplate renders the chat template of a Hugging Face
// tokenizer_config.json (a Jinja template) into the prompt text a model
// sees, the way transformers' apply_chat_template does, which is what
// vLLM's chat endpoints run: Jinja with trim_blocks and lstrip_blocks, the
// config's special tokens (bos_token, eos_token, ...) as variables, and
// raise_exception. The Jinja engine is github.com/nikolalohinski/gonja/v2.
//
// Checked against Python's Jinja2 for the Llama 3, Qwen 3, Gemma 3 and
// DeepSeek V3 templates with plain role/content messages. gonja does not
// parse a conditional expression in parentheses ("(a if c else b)", which
// Gemma 3's template has); such expressions are rewritten into a function
// call before parsing (see inlineif.go). Not covered: tools and
// documents, strftime_now, and tojson's exact formatting (Python's
// json.dumps keeps key order, which Go maps do not have).
package chattemplate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"strings"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"

	"github.com/hermod/hermod/libs/tokenizer"
)

// ErrNoTemplate is returned by Load for a tokenizer_config.json without
// the chat template asked for.
var ErrNoTemplate = errors.New("no chat template")

var errInlineIfArgs = errors.New(inlineIfName + " takes 3 arguments")

// Template is a loaded chat template. It is safe for concurrent use.
type Template struct {
	tpl  *exec.Template
	vars map[string]any // special tokens and WithVariables
}

var _ tokenizer.ChatTemplate = (*Template)(nil)

// Option configures Load.
type Option func(*options)

type options struct {
	name string
	vars map[string]any
}

// WithName selects, in a config with several named templates, the one
// to use (default "default").
func WithName(name string) Option {
	return func(o *options) { o.name = name }
}

// WithVariables sets extra template variables, as chat_template_kwargs
// do in vLLM (for example {"enable_thinking": false} for Qwen 3). They
// override the special tokens of the config.
func WithVariables(vars map[string]any) Option {
	return func(o *options) { maps.Copy(o.vars, vars) }
}

// LoadFile loads the chat template of a tokenizer_config.json file.
func LoadFile(path string, opts ...Option) (*Template, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load chat template: %w", err)
	}
	t, err := Load(data, opts...)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	return t, nil
}

// Load reads the chat template of a tokenizer_config.json.
func Load(configJSON []byte, opts ...Option) (*Template, error) {
	o := options{name: "default", vars: map[string]any{}}
	for _, opt := range opts {
		opt(&o)
	}
	cfg, err := parseConfig(configJSON, o.name)
	if err != nil {
		return nil, err
	}
	tpl, err := compile(cfg.template)
	if err != nil {
		return nil, fmt.Errorf("chat_template: %w", err)
	}
	vars := cfg.specialTokens
	maps.Copy(vars, o.vars)
	return &Template{tpl: tpl, vars: vars}, nil
}

// Render renders messages; with addGenerationPrompt the prompt ends with
// what starts the assistant's turn (if the template does that).
func (t *Template) Render(messages []tokenizer.Message, addGenerationPrompt bool) (string, error) {
	msgs := make([]any, len(messages))
	for i, m := range messages {
		msgs[i] = map[string]any{"role": m.Role, "content": m.Content}
	}
	data := make(map[string]any, len(t.vars)+2)
	maps.Copy(data, t.vars)
	data["messages"] = msgs
	data["add_generation_prompt"] = addGenerationPrompt
	out, err := t.tpl.ExecuteToString(exec.NewContext(data))
	if err != nil {
		return "", fmt.Errorf("render chat template: %w", err)
	}
	return out, nil
}

// Apply implements tokenizer.ChatTemplate. That interface has no error:
// Apply returns "" where Render fails (for example when the template
// raises an exception over the roles of the messages); use Render to
// see why.
func (t *Template) Apply(messages []tokenizer.Message, addGenerationPrompt bool) string {
	out, err := t.Render(messages, addGenerationPrompt)
	if err != nil {
		return ""
	}
	return out
}

// compile parses a template in an environment like transformers': Jinja's
// built-ins plus raise_exception, trim_blocks and lstrip_blocks, and no
// access to files (include, import and extends fail).
func compile(source string) (*exec.Template, error) {
	source = rewriteInlineIfs(source)
	cfg := config.New()
	cfg.TrimBlocks = true
	cfg.LeftStripBlocks = true
	env := &exec.Environment{
		Context: exec.EmptyContext().
			Update(builtins.GlobalFunctions).
			Update(builtins.GlobalVariables).
			Update(exec.NewContext(map[string]any{"raise_exception": raiseException, inlineIfName: inlineIf})),
		Filters:           exec.NewFilterSet(map[string]exec.FilterFunction{}).Update(builtins.Filters),
		Tests:             builtins.Tests,
		ControlStructures: builtins.ControlStructures,
		Methods:           builtins.Methods,
	}
	const name = "chat_template"
	tpl, err := exec.NewTemplate(name, cfg, sourceLoader{name: name, source: source}, env)
	if err != nil {
		// gonja's message quotes the whole template; keep its cause.
		return nil, errors.New(strings.Replace(err.Error(), source, "...", 1))
	}
	return tpl, nil
}

// raiseException is Jinja's raise_exception(message) as transformers
// defines it: rendering fails with message.
func raiseException(_ *exec.Evaluator, params *exec.VarArgs) (string, error) {
	msg := "raise_exception"
	if len(params.Args) > 0 {
		msg = params.Args[0].String()
	}
	return "", fmt.Errorf("template raised an exception: %s", msg)
}

// sourceLoader serves the one template and nothing else.
type sourceLoader struct {
	name, source string
}

func (l sourceLoader) Read(path string) (io.Reader, error) {
	if path != l.name {
		return nil, fmt.Errorf("template %q: chat templates cannot load other templates", path)
	}
	return strings.NewReader(l.source), nil
}

func (l sourceLoader) Resolve(path string) (string, error) { return path, nil }

func (l sourceLoader) Inherit(string) (loaders.Loader, error) { return l, nil }

// configFile is what Load reads of tokenizer_config.json.
type configFile struct {
	template      string
	specialTokens map[string]any
}

var specialTokenNames = []string{"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}

func parseConfig(data []byte, name string) (configFile, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return configFile{}, fmt.Errorf("parse tokenizer_config.json: %w", err)
	}
	cfg := configFile{specialTokens: map[string]any{}}
	var err error
	if cfg.template, err = chatTemplate(raw["chat_template"], name); err != nil {
		return configFile{}, err
	}
	for _, key := range specialTokenNames {
		tok, err := specialToken(key, raw[key])
		if err != nil {
			return configFile{}, err
		}
		if tok != "" {
			cfg.specialTokens[key] = tok
		}
	}
	if extra, ok := raw["additional_special_tokens"]; ok && string(extra) != "null" {
		var list []json.RawMessage
		if err := json.Unmarshal(extra, &list); err != nil {
			return configFile{}, fmt.Errorf("additional_special_tokens: %w", err)
		}
		toks := make([]any, 0, len(list))
		for i, r := range list {
			tok, err := specialToken(fmt.Sprintf("additional_special_tokens[%d]", i), r)
			if err != nil {
				return configFile{}, err
			}
			toks = append(toks, tok)
		}
		cfg.specialTokens["additional_special_tokens"] = toks
	}
	return cfg, nil
}

// chatTemplate reads chat_template: a string, or a list of named
// templates.
func chatTemplate(raw json.RawMessage, name string) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", fmt.Errorf("chat_template: %w", ErrNoTemplate)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", fmt.Errorf("chat_template: want a string or a list of {name, template}: %w", err)
	}
	for _, n := range named {
		if n.Name == name {
			return n.Template, nil
		}
	}
	return "", fmt.Errorf("chat_template: no template named %q: %w", name, ErrNoTemplate)
}

// specialToken reads a special token: a string, an AddedToken object
// ({"content": ...}) or null ("").
func specialToken(field string, raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var obj struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return "", fmt.Errorf("%s: want a string or {\"content\": ...}: %w", field, err)
	}
	return obj.Content, nil
}
