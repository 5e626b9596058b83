package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"

	"github.com/hermod/hermod/libs/jsonenc"
	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/tools/vllm-sim/internal/engine"
)

// Tool calls, as vLLM makes them. A chat (or Messages) request with tools
// and tool_choice "required" (Anthropic's "any") or a named function
// (Anthropic's "tool") gets a call: vLLM constrains the output to a JSON
// list of {"name", "parameters"} (required) or to the function's
// arguments (named) and parses it back. "auto" needs
// --enable-auto-tool-choice and a --tool-call-parser; the simulated model
// then calls a tool when the last message, the user's, names it (it
// answers in text otherwise, and after a tool's result), writing the call
// in its parser's format. The call's text is what the engine generates,
// token by token, so usage, timing, the KV cache and its events count it.
// The arguments fill the tool's required parameters with values of their
// types (see appendArguments).

// toolMode is how a request lets the model call its tools.
type toolMode uint8

const (
	// toolsOff: no tools, or tool_choice "none": the model answers in text.
	toolsOff toolMode = iota
	// toolsAuto: "auto", with --enable-auto-tool-choice.
	toolsAuto
	// toolsRequired: "required" (Anthropic "any").
	toolsRequired
	// toolsNamed: {"type": "function", "function": {"name"}} (Anthropic
	// {"type": "tool", "name"}).
	toolsNamed
)

// tool is a function a request offers the model.
type tool struct {
	name string
	// params is its parameters' JSON schema (Anthropic's input_schema);
	// empty when it has none.
	params json.RawMessage
}

// toolRequest is what a chat or Messages request says about tools.
type toolRequest struct {
	mode  toolMode
	tools []tool
	// call is the tool the model calls, -1 when it answers in text.
	call int
}

// autoToolError is vLLM's answer to tool_choice "auto" on a server
// without --enable-auto-tool-choice and --tool-call-parser.
const autoToolError = `"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set`

const namedToolUsage = "Correct usage: `{\"type\": \"function\", \"function\": {\"name\": \"my_function\"}}`"

// openAITools reads a chat request's tools and tool_choice with vLLM's
// checks (ChatCompletionRequest.check_tool_usage): a tool_choice other
// than "none" needs tools; no tool_choice with tools is "auto"; a named
// function must be one of the tools.
func (p *Pod) openAITools(rawTools, rawChoice json.RawMessage) (toolRequest, *requestError) {
	tr := toolRequest{call: -1}
	if !isNull(rawTools) {
		var defs []struct {
			Function *struct {
				Name       *string         `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if err := json.Unmarshal(rawTools, &defs); err != nil {
			return tr, badRequest("tools: must be a list of tools: " + err.Error())
		}
		if len(defs) == 0 {
			return tr, badRequest("`tools` must not be an empty array. Either provide at least one tool or omit the field entirely.")
		}
		for i, d := range defs {
			if d.Function == nil {
				return tr, badRequest(fmt.Sprintf("tools.%d.function: Field required", i))
			}
			if d.Function.Name == nil {
				return tr, badRequest(fmt.Sprintf("tools.%d.function.name: Field required", i))
			}
			tr.tools = append(tr.tools, tool{name: *d.Function.Name, params: d.Function.Parameters})
		}
	}
	choice := "auto"
	var named string
	switch {
	case rawChoice == nil && tr.tools == nil:
		choice = "none"
	case rawChoice == nil:
	case isNull(rawChoice):
		// vLLM validates nothing and calls tools only when it may choose to
		if tr.tools == nil || !p.cfg.AutoToolChoice {
			return tr, nil
		}
	case rawChoice[0] == '"':
		if err := json.Unmarshal(rawChoice, &choice); err != nil {
			return tr, badRequest("tool_choice: " + err.Error())
		}
		if choice == "none" {
			return tr, nil
		}
		if tr.tools == nil {
			return tr, badRequest("When using `tool_choice`, `tools` must be set.")
		}
		if choice != "auto" && choice != "required" {
			return tr, badRequest(fmt.Sprintf(`Invalid value for `+"`tool_choice`"+`: %s! Only named tools, "none", "auto" or "required" are supported.`, choice))
		}
	default:
		if tr.tools == nil {
			return tr, badRequest("When using `tool_choice`, `tools` must be set.")
		}
		var obj struct {
			Function json.RawMessage `json:"function"`
		}
		if err := json.Unmarshal(rawChoice, &obj); err != nil {
			return tr, badRequest(fmt.Sprintf(`Invalid value for `+"`tool_choice`"+`: %s! Only named tools, "none", "auto" or "required" are supported.`, rawChoice))
		}
		var fn map[string]json.RawMessage
		if len(obj.Function) == 0 || json.Unmarshal(obj.Function, &fn) != nil || fn == nil {
			shown := string(obj.Function)
			if shown == "" {
				shown = "None"
			}
			return tr, badRequest(fmt.Sprintf("Invalid value for `function`: `%s` in `tool_choice`! %s", shown, namedToolUsage))
		}
		rawName, ok := fn["name"]
		if !ok {
			return tr, badRequest("Expected field `name` in `function` in `tool_choice`! " + namedToolUsage)
		}
		if json.Unmarshal(rawName, &named) != nil || named == "" {
			return tr, badRequest(fmt.Sprintf("Invalid `name` in `function`: `%s` in `tool_choice`! %s", rawName, namedToolUsage))
		}
		choice = ""
	}
	if choice == "none" {
		return tr, nil
	}
	return p.chooseTools(tr, choice, named)
}

// anthropicTools reads a Messages request's tools ({"name",
// "description", "input_schema"}) and tool_choice ({"type": "auto" | "any"
// | "tool" | "none", "name"}), which vLLM turns into a chat request's:
// "any" is "required", "tool" a named function, and tools without a
// tool_choice "auto".
func (p *Pod) anthropicTools(rawTools, rawChoice json.RawMessage) (toolRequest, *requestError) {
	tr := toolRequest{call: -1}
	if !isNull(rawTools) {
		var defs []struct {
			Name        *string         `json:"name"`
			InputSchema json.RawMessage `json:"input_schema"`
		}
		if err := json.Unmarshal(rawTools, &defs); err != nil {
			return tr, badRequest("tools: must be a list of tools: " + err.Error())
		}
		for i, d := range defs {
			if d.Name == nil {
				return tr, badRequest(fmt.Sprintf("tools.%d.name: Field required", i))
			}
			if !bytes.HasPrefix(bytes.TrimSpace(d.InputSchema), []byte("{")) {
				return tr, badRequest(fmt.Sprintf("tools.%d.input_schema: Input should be a valid dictionary", i))
			}
			tr.tools = append(tr.tools, tool{name: *d.Name, params: d.InputSchema})
		}
	}
	if isNull(rawChoice) {
		if len(tr.tools) == 0 {
			return tr, nil
		}
		return p.chooseTools(tr, "auto", "")
	}
	var tc struct {
		Type string  `json:"type"`
		Name *string `json:"name"`
	}
	if err := json.Unmarshal(rawChoice, &tc); err != nil {
		return tr, badRequest("tool_choice: " + err.Error())
	}
	choice := ""
	switch tc.Type {
	case "none":
		return tr, nil
	case "auto":
		choice = "auto"
	case "any":
		choice = "required"
	case "tool":
		if tc.Name == nil || *tc.Name == "" {
			return tr, badRequest("tool_choice.name is required when type is 'tool'")
		}
	default:
		return tr, badRequest("tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'")
	}
	if len(tr.tools) == 0 {
		return tr, badRequest("When using `tool_choice`, `tools` must be set.")
	}
	name := ""
	if tc.Name != nil {
		name = *tc.Name
	}
	return p.chooseTools(tr, choice, name)
}

// chooseTools sets a request's mode from its (checked) tool choice:
// "auto", "required", or "" for the function named.
func (p *Pod) chooseTools(tr toolRequest, choice, named string) (toolRequest, *requestError) {
	switch choice {
	case "auto":
		if !p.cfg.AutoToolChoice {
			return tr, badRequest(autoToolError)
		}
		tr.mode = toolsAuto
	case "required":
		tr.mode = toolsRequired
	default:
		tr.mode, tr.call = toolsNamed, -1
		for i, t := range tr.tools {
			if t.name == named {
				tr.call = i
				break
			}
		}
		if tr.call < 0 {
			return tr, badRequest("The tool specified in `tool_choice` does not match any of the specified `tools`")
		}
	}
	return tr, nil
}

// pick decides which tool the model calls, given the request's messages:
// the named one; for "required" the first the last message names, else
// the first; for "auto" the first the last message names when it is the
// user's (not a tool's result), else none.
func (tr *toolRequest) pick(msgs []openai.Message, toolResult bool) {
	switch tr.mode {
	case toolsOff, toolsNamed:
		return
	case toolsRequired:
		tr.call = 0
	}
	if len(msgs) == 0 {
		return
	}
	last := msgs[len(msgs)-1]
	if last.Role != "user" || toolResult {
		return
	}
	text := strings.ToLower(last.Content)
	for i, t := range tr.tools {
		if t.name != "" && strings.Contains(text, strings.ToLower(t.name)) {
			tr.call = i
			return
		}
	}
}

// endsWithToolResult reports whether the last message of a Messages body
// holds a tool_result block (the user's turn that answers a tool call).
func endsWithToolResult(messages []json.RawMessage) bool {
	if len(messages) == 0 {
		return false
	}
	var m struct {
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(messages[len(messages)-1], &m) != nil {
		return false
	}
	var blocks []struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(m.Content, &blocks) != nil {
		return false
	}
	for _, b := range blocks {
		if b.Type == "tool_result" {
			return true
		}
	}
	return false
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// toolCall is a call the model writes: the text it generates (raw, in its
// mode's format, the arguments at argsAt) and its tokens, which the engine
// generates.
type toolCall struct {
	mode toolMode
	// id is the call's id, vLLM's "chatcmpl-tool-<32 hex digits>".
	id   string
	name string
	args string
	raw  string
	// argsAt is where args starts in raw.
	argsAt int
	ids    []uint32
	pieces []string
	// ends[i] is where token i's piece ends in raw.
	ends []int
	// head is the token with which the call's name is known (its text
	// before the arguments written): the one a stream announces the call
	// with.
	head int
}

// newToolCall is the call of choice seeded with seed: the tool of tr.call
// with arguments for its parameters, written as vLLM's model writes it in
// tr.mode (for "auto", in the --tool-call-parser's format).
func (p *Pod) newToolCall(tr toolRequest, seed uint64) *toolCall {
	if tr.call < 0 {
		return nil
	}
	t := tr.tools[tr.call]
	c := &toolCall{mode: tr.mode, id: fmt.Sprintf("chatcmpl-tool-%016x%016x", rand.Uint64(), rand.Uint64()), name: t.name}
	c.args = string(appendArguments(nil, t.params, seed))
	var prefix []byte
	suffix := ""
	switch {
	case tr.mode == toolsNamed:
		// constrained to the arguments
	case tr.mode == toolsRequired:
		prefix = jsonenc.AppendString(append(prefix, `[{"name": `...), t.name)
		prefix = append(prefix, `, "parameters": `...)
		suffix = "}]"
	case p.cfg.ToolCallParser == "llama3_json" || p.cfg.ToolCallParser == "llama4_json":
		// Llama 3.1's JSON-based tool calling
		prefix = jsonenc.AppendString(append(prefix, `{"name": `...), t.name)
		prefix = append(prefix, `, "parameters": `...)
		suffix = "}"
	default:
		// Hermes-style <tool_call> tags (hermes, qwen and most parsers)
		prefix = jsonenc.AppendString(append(prefix, "<tool_call>\n{\"name\": "...), t.name)
		prefix = append(prefix, `, "arguments": `...)
		suffix = "}\n</tool_call>"
	}
	c.argsAt = len(prefix)
	c.raw = string(prefix) + c.args + suffix
	c.ids = p.encode(c.raw)
	c.pieces = builtinVocab.Split(make([]string, 0, len(c.ids)), c.raw, c.ids)
	c.ends = make([]int, len(c.pieces))
	end := 0
	c.head = len(c.pieces)
	for i, piece := range c.pieces {
		end += len(piece)
		c.ends[i] = end
		if end >= c.argsAt && c.head == len(c.pieces) {
			c.head = i
		}
	}
	return c
}

// written is the part of raw the first n tokens write.
func (c *toolCall) written(n int) string {
	if n <= 0 {
		return ""
	}
	return c.raw[:c.ends[n-1]]
}

// writtenArgs is the part of the arguments the first n tokens write.
func (c *toolCall) writtenArgs(n int) string {
	return c.argsPart(0, n)
}

// argsPart is the part of the arguments that tokens [from, to) write.
func (c *toolCall) argsPart(from, to int) string {
	lo, hi := c.argsAt, c.argsAt+len(c.args)
	start, end := 0, 0
	if from > 0 {
		start = c.ends[from-1]
	}
	if to > 0 {
		end = c.ends[to-1]
	}
	start, end = min(max(start, lo), hi), min(max(end, lo), hi)
	if end <= start {
		return ""
	}
	return c.raw[start:end]
}

// complete reports whether a call of n tokens was written to its end (not
// cut short by max_tokens): vLLM parses only a complete call out of
// "required" or "auto" output.
func (c *toolCall) complete(n int) bool { return n == len(c.ids) }

// finishReason is a choice's finish reason: "tool_calls" for a call the
// model chose ("required", "auto") and wrote to its end; "stop" for a
// named one, as OpenAI's API has it.
func (c *toolCall) finishReason(pr engine.Progress) string {
	if c != nil && c.mode != toolsNamed && pr.FinishReason == engine.FinishStop && c.complete(pr.Generated) {
		return "tool_calls"
	}
	return pr.FinishReason
}

// appendArguments appends arguments for a function whose parameters have
// the JSON schema schema, in Python's json.dumps layout (", " and ": "),
// as vLLM renders parsed arguments: the required properties, in the order
// "required" lists them, each a value of its schema (appendValue).
func appendArguments(b []byte, schema json.RawMessage, seed uint64) []byte {
	var root map[string]any
	if len(schema) > 0 {
		dec := json.NewDecoder(bytes.NewReader(schema))
		dec.UseNumber()
		_ = dec.Decode(&root)
	}
	if root == nil {
		return append(b, "{}"...)
	}
	if _, ok := root["type"]; !ok {
		root["type"] = "object"
	}
	g := argGen{root: root, rng: rand.New(rand.NewPCG(seed, 0x7f4a7c159e3779b9))}
	return g.value(b, root, 0)
}

// argGen fills a schema with values drawn from a seed.
type argGen struct {
	root map[string]any
	rng  *rand.Rand
}

func (g *argGen) next() uint64 { return g.rng.Uint64() }

// maxSchemaDepth bounds nesting (and $ref cycles): deeper values are null.
const maxSchemaDepth = 8

// value appends a value of schema s: its const, first enum value or
// default if it has one; else one of its type (the first not "null" of a
// list; an object's required properties, one item for an array — none
// when maxItems is 0 —, a word for a string, or a date, date-time, email
// or URI for those formats, a number within its bounds, a boolean). A
// local $ref ("#/$defs/..." or "#/definitions/...") is followed; anyOf,
// oneOf and allOf take their first schema.
func (g *argGen) value(b []byte, s map[string]any, depth int) []byte {
	if depth > maxSchemaDepth || s == nil {
		return append(b, "null"...)
	}
	if ref, ok := s["$ref"].(string); ok {
		return g.value(b, g.resolve(ref), depth+1)
	}
	if v, ok := s["const"]; ok {
		return appendPyJSON(b, v)
	}
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		return appendPyJSON(b, enum[0])
	}
	if v, ok := s["default"]; ok {
		return appendPyJSON(b, v)
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := s[k].([]any); ok && len(alts) > 0 {
			alt, _ := alts[0].(map[string]any)
			return g.value(b, alt, depth+1)
		}
	}
	typ := ""
	switch t := s["type"].(type) {
	case string:
		typ = t
	case []any:
		for _, x := range t {
			if x, ok := x.(string); ok && x != "null" {
				typ = x
				break
			}
		}
		if typ == "" && len(t) > 0 {
			typ = "null"
		}
	}
	if typ == "" {
		switch {
		case s["properties"] != nil || s["required"] != nil:
			typ = "object"
		case s["items"] != nil:
			typ = "array"
		default:
			typ = "string"
		}
	}
	switch typ {
	case "object":
		props, _ := s["properties"].(map[string]any)
		required, _ := s["required"].([]any)
		b = append(b, '{')
		n := 0
		for _, r := range required {
			name, ok := r.(string)
			if !ok {
				continue
			}
			if n > 0 {
				b = append(b, ", "...)
			}
			n++
			b = jsonenc.AppendString(b, name)
			b = append(b, ": "...)
			ps, _ := props[name].(map[string]any)
			if ps == nil {
				ps = map[string]any{"type": "string"}
			}
			b = g.value(b, ps, depth+1)
		}
		return append(b, '}')
	case "array":
		items := 1
		if v, ok := number(s["minItems"]); ok {
			items = max(items, int(v))
		}
		if v, ok := number(s["maxItems"]); ok {
			items = min(items, int(v))
		}
		item, _ := s["items"].(map[string]any)
		if item == nil {
			item = map[string]any{"type": "string"}
		}
		b = append(b, '[')
		for i := range min(items, 16) {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = g.value(b, item, depth+1)
		}
		return append(b, ']')
	case "integer", "number":
		v := float64(1 + g.next()%9)
		if typ == "number" {
			v += 0.5
		}
		if lo, ok := number(s["minimum"]); ok && v < lo {
			v = lo
		}
		if lo, ok := number(s["exclusiveMinimum"]); ok && v <= lo {
			v = lo + 1
		}
		if hi, ok := number(s["maximum"]); ok && v > hi {
			v = hi
		}
		if hi, ok := number(s["exclusiveMaximum"]); ok && v >= hi {
			v = hi - 1
		}
		if typ == "integer" {
			return strconv.AppendInt(b, int64(math.Ceil(v)), 10)
		}
		return strconv.AppendFloat(b, v, 'f', -1, 64)
	case "boolean":
		return strconv.AppendBool(b, g.next()&1 == 0)
	case "null":
		return append(b, "null"...)
	}
	format, _ := s["format"].(string)
	switch format {
	case "date":
		return append(b, `"2025-01-01"`...)
	case "date-time":
		return append(b, `"2025-01-01T00:00:00Z"`...)
	case "email":
		return append(b, `"user@example.com"`...)
	case "uri", "url":
		return append(b, `"https://example.com"`...)
	}
	words := engine.OutputWords()
	text := words[g.next()%uint64(len(words))]
	if v, ok := number(s["minLength"]); ok {
		for len(text) < int(v) && len(text) < 1<<10 {
			text += " " + words[g.next()%uint64(len(words))]
		}
	}
	if v, ok := number(s["maxLength"]); ok && int(v) >= 0 && len(text) > int(v) {
		text = text[:int(v)]
	}
	return jsonenc.AppendString(b, text)
}

// resolve follows a local reference.
func (g *argGen) resolve(ref string) map[string]any {
	for _, prefix := range []string{"#/$defs/", "#/definitions/"} {
		if name, ok := strings.CutPrefix(ref, prefix); ok {
			defs, _ := g.root[strings.TrimSuffix(strings.TrimPrefix(prefix, "#/"), "/")].(map[string]any)
			s, _ := defs[name].(map[string]any)
			return s
		}
	}
	if ref == "#" {
		return g.root
	}
	return nil
}

func number(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

// appendPyJSON appends a decoded JSON value in Python's json.dumps layout
// (an object's keys sorted, for a deterministic answer).
func appendPyJSON(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		return strconv.AppendBool(b, v)
	case json.Number:
		return append(b, v...)
	case string:
		return jsonenc.AppendString(b, v)
	case []any:
		b = append(b, '[')
		for i, x := range v {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = appendPyJSON(b, x)
		}
		return append(b, ']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = jsonenc.AppendString(b, k)
			b = append(b, ": "...)
			b = appendPyJSON(b, v[k])
		}
		return append(b, '}')
	}
	return append(b, "null"...)
}
