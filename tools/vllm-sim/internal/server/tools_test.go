package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// weatherTools offers get_weather (three required parameters) and
// get_time (none).
const weatherTools = `"tools":[{"type":"function","function":{"name":"get_weather","description":"the weather in a city",
"parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]},
"days":{"type":"integer","minimum":1,"maximum":3},"hourly":{"type":"boolean"}},"required":["city","unit","days"]}}},
{"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{}}}}]`

// toolChatResponse is a chat answer that may call tools, decoded strictly.
type toolChatResponse struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role      string         `json:"role"`
			Content   *string        `json:"content"`
			ToolCalls []toolCallJSON `json:"tool_calls"`
		} `json:"message"`
		Logprobs     any    `json:"logprobs"`
		FinishReason string `json:"finish_reason"`
		StopReason   any    `json:"stop_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

type toolCallJSON struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

var toolCallID = regexp.MustCompile(`^chatcmpl-tool-[0-9a-f]{32}$`)

func postToolChat(t *testing.T, url, body string) toolChatResponse {
	t.Helper()
	resp, b := post(t, url+"/v1/chat/completions", body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %s", body, resp.StatusCode, b)
	}
	var r toolChatResponse
	strict(t, b, &r)
	return r
}

// checkWeatherArgs checks get_weather's arguments: JSON with the required
// parameters, of their types and within their bounds, in Python's layout.
func checkWeatherArgs(t *testing.T, args string) {
	t.Helper()
	var a map[string]any
	if err := json.Unmarshal([]byte(args), &a); err != nil {
		t.Fatalf("arguments %q: %v", args, err)
	}
	city, _ := a["city"].(string)
	days, _ := a["days"].(float64)
	if city == "" || a["unit"] != "celsius" || days < 1 || days > 3 || days != float64(int(days)) || len(a) != 3 {
		t.Errorf("arguments %s", args)
	}
	if !strings.HasPrefix(args, `{"city": "`) || !strings.Contains(args, `", "unit": "celsius", "days": `) {
		t.Errorf("arguments %s: want json.dumps's layout", args)
	}
}

// tool_choice "required" and a named function get a tool call, as vLLM
// answers them: content "", the call in tool_calls with an id of vLLM's
// form and arguments filling the tool's required parameters, finish_reason
// "tool_calls" for required and "stop" for a named function. The call's
// tokens are the output's.
func TestToolCallRequiredAndNamed(t *testing.T) {
	p := startPod(t, nil)
	for _, c := range []struct{ choice, finish string }{
		{`"required"`, "tool_calls"},
		{`{"type":"function","function":{"name":"get_weather"}}`, "stop"},
	} {
		body := fmt.Sprintf(`{"messages":[{"role":"user","content":"what is the weather"}],%s,"tool_choice":%s,"seed":4}`, weatherTools, c.choice)
		r := postToolChat(t, p.url, body)
		ch := r.Choices[0]
		if ch.Message.Content == nil || *ch.Message.Content != "" || len(ch.Message.ToolCalls) != 1 || ch.FinishReason != c.finish {
			t.Fatalf("%s: %+v", c.choice, ch)
		}
		call := ch.Message.ToolCalls[0]
		if !toolCallID.MatchString(call.ID) || call.Type != "function" || call.Function.Name != "get_weather" {
			t.Errorf("%s: call %+v", c.choice, call)
		}
		checkWeatherArgs(t, call.Function.Arguments)
		if r.Usage.CompletionTokens < len(call.Function.Arguments)/4 {
			t.Errorf("%s: %d completion tokens for the call %s", c.choice, r.Usage.CompletionTokens, call.Function.Arguments)
		}
		// deterministic for a seed (the id is not)
		again := postToolChat(t, p.url, body)
		if a := again.Choices[0].Message.ToolCalls[0]; a.Function != call.Function || a.ID == call.ID {
			t.Errorf("%s: second call %+v, first %+v", c.choice, a, call)
		}
	}
	// a function without parameters is called with {}
	r := postToolChat(t, p.url, `{"messages":[{"role":"user","content":"what time is it"}],`+weatherTools+`,"tool_choice":{"type":"function","function":{"name":"get_time"}}}`)
	if args := r.Choices[0].Message.ToolCalls[0].Function.Arguments; args != "{}" {
		t.Errorf("get_time arguments %q", args)
	}
	// "required" calls the tool the user names, else the first
	r = postToolChat(t, p.url, `{"messages":[{"role":"user","content":"use get_time"}],`+weatherTools+`,"tool_choice":"required"}`)
	if name := r.Choices[0].Message.ToolCalls[0].Function.Name; name != "get_time" {
		t.Errorf("required with get_time named: called %s", name)
	}
	// "none" answers text
	r = postToolChat(t, p.url, `{"messages":[{"role":"user","content":"use get_time"}],`+weatherTools+`,"tool_choice":"none","max_tokens":3}`)
	if ch := r.Choices[0]; ch.Message.Content == nil || len(strings.Fields(*ch.Message.Content)) != 3 || len(ch.Message.ToolCalls) != 0 {
		t.Errorf("tool_choice none: %+v", ch)
	}
}

// A call cut short by max_tokens: a named function's arguments as far as
// written; a required call, which does not parse, is content.
func TestToolCallTruncated(t *testing.T) {
	p := startPod(t, nil)
	r := postToolChat(t, p.url, `{"messages":[{"role":"user","content":"weather"}],`+weatherTools+`,"tool_choice":{"type":"function","function":{"name":"get_weather"}},"max_tokens":4}`)
	ch := r.Choices[0]
	if ch.FinishReason != "length" || len(ch.Message.ToolCalls) != 1 || r.Usage.CompletionTokens != 4 ||
		!strings.HasPrefix(`{"city": "`, ch.Message.ToolCalls[0].Function.Arguments[:min(10, len(ch.Message.ToolCalls[0].Function.Arguments))]) {
		t.Errorf("named, cut short: %+v", ch)
	}
	r = postToolChat(t, p.url, `{"messages":[{"role":"user","content":"weather"}],`+weatherTools+`,"tool_choice":"required","max_tokens":4}`)
	ch = r.Choices[0]
	if ch.FinishReason != "length" || len(ch.Message.ToolCalls) != 0 || ch.Message.Content == nil || !strings.HasPrefix(*ch.Message.Content, `[{"`) {
		t.Errorf("required, cut short: %+v", ch)
	}
}

// tool_choice "auto" (the default with tools) needs
// --enable-auto-tool-choice, as in vLLM; with it the model calls a tool
// the user's last message names, in the --tool-call-parser's format
// (content null, finish_reason "tool_calls"), and answers in text
// otherwise and after a tool's result.
func TestToolCallAuto(t *testing.T) {
	off := startPod(t, nil)
	for _, choice := range []string{"", `,"tool_choice":"auto"`} {
		resp, b := post(t, off.url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"use get_time"}],`+weatherTools+choice+`}`)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set`) {
			t.Errorf("auto without the flag: %d %s", resp.StatusCode, b)
		}
	}
	for _, parser := range []string{"hermes", "llama3_json"} {
		t.Run(parser, func(t *testing.T) {
			p := startPod(t, func(c *Config) { c.AutoToolChoice, c.ToolCallParser = true, parser })
			r := postToolChat(t, p.url, `{"messages":[{"role":"user","content":"What is the weather? Use GET_WEATHER."}],`+weatherTools+`}`)
			ch := r.Choices[0]
			if ch.Message.Content != nil || len(ch.Message.ToolCalls) != 1 || ch.Message.ToolCalls[0].Function.Name != "get_weather" || ch.FinishReason != "tool_calls" {
				t.Fatalf("auto, tool named: %+v", ch)
			}
			checkWeatherArgs(t, ch.Message.ToolCalls[0].Function.Arguments)
			for _, msgs := range []string{
				`[{"role":"user","content":"hello there"}]`,
				`[{"role":"user","content":"use get_time"},{"role":"assistant","content":null,"tool_calls":[{"id":"x","type":"function","function":{"name":"get_time","arguments":"{}"}}]},{"role":"tool","tool_call_id":"x","content":"get_time: noon"}]`,
			} {
				r := postToolChat(t, p.url, `{"messages":`+msgs+`,`+weatherTools+`,"max_tokens":4}`)
				if ch := r.Choices[0]; ch.Message.Content == nil || len(strings.Fields(*ch.Message.Content)) != 4 || len(ch.Message.ToolCalls) != 0 || ch.FinishReason != "length" {
					t.Errorf("auto, %s: %+v", msgs, ch)
				}
			}
		})
	}
}

// toolDelta is a chat stream chunk's delta that may call tools.
type toolDelta struct {
	Role      *string `json:"role"`
	Content   *string `json:"content"`
	ToolCalls []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Index    int    `json:"index"`
		Function struct {
			Name      string  `json:"name"`
			Arguments *string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// A streamed tool call comes as vLLM streams it: a delta with the call's
// id, type, index and name once the name is written, then its arguments
// as they are written, the finish_reason last; the arguments are the
// plain answer's and usage counts the same tokens.
func TestToolCallStream(t *testing.T) {
	p := startPod(t, func(c *Config) { c.AutoToolChoice, c.ToolCallParser = true, "hermes" })
	for _, c := range []struct{ name, choice, finish string }{
		{"required", `,"tool_choice":"required"`, "tool_calls"},
		{"named", `,"tool_choice":{"type":"function","function":{"name":"get_weather"}}`, "stop"},
		{"auto", ``, "tool_calls"},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := `{"messages":[{"role":"user","content":"get_weather for me"}],"seed":8,` + weatherTools + c.choice
			plain := postToolChat(t, p.url, body+"}")
			want := plain.Choices[0].Message.ToolCalls[0]
			chunks := streamChunks(t, p.url, "/v1/chat/completions", body+`,"stream":true,"stream_options":{"include_usage":true}}`)
			var id, name, args, finish string
			announced := 0
			for i, chunk := range chunks[:len(chunks)-1] {
				var r struct {
					Choices []struct {
						Index        int       `json:"index"`
						Delta        toolDelta `json:"delta"`
						Logprobs     any       `json:"logprobs"`
						FinishReason *string   `json:"finish_reason"`
						StopReason   any       `json:"stop_reason"`
					} `json:"choices"`
					ID, Object, Model string
					Created           int64
				}
				strict(t, []byte(chunk), &r)
				d := r.Choices[0].Delta
				if i == 0 {
					if d.Role == nil || *d.Role != "assistant" {
						t.Errorf("first chunk %s", chunk)
					}
					continue
				}
				if d.Content != nil {
					t.Errorf("content in a tool call's stream: %s", chunk)
				}
				for _, tc := range d.ToolCalls {
					if tc.Index != 0 {
						t.Errorf("tool call index %d", tc.Index)
					}
					if tc.ID != "" {
						announced++
						id, name = tc.ID, tc.Function.Name
						if tc.Type != "function" {
							t.Errorf("announcing delta %s", chunk)
						}
					}
					if tc.Function.Arguments != nil {
						args += *tc.Function.Arguments
					}
				}
				if fr := r.Choices[0].FinishReason; fr != nil {
					if i != len(chunks)-2 {
						t.Errorf("finish_reason before the end: %s", chunk)
					}
					finish = *fr
				}
			}
			if announced != 1 || !toolCallID.MatchString(id) || name != "get_weather" || args != want.Function.Arguments || finish != c.finish {
				t.Errorf("streamed call %s %s(%s), finish %s (announced %d times); plain %s(%s)", id, name, args, finish, announced, want.Function.Name, want.Function.Arguments)
			}
			var last struct {
				Usage *usage `json:"usage"`
			}
			if err := json.Unmarshal([]byte(chunks[len(chunks)-1]), &last); err != nil || last.Usage == nil || last.Usage.CompletionTokens != plain.Usage.CompletionTokens {
				t.Errorf("usage chunk %s, plain usage %+v", chunks[len(chunks)-1], plain.Usage)
			}
		})
	}
}

// Invalid tools and tool choices are refused with vLLM's messages.
func TestToolErrors(t *testing.T) {
	p := startPod(t, nil)
	msgs := `"messages":[{"role":"user","content":"x"}]`
	for _, c := range []struct{ body, msg string }{
		{`{` + msgs + `,"tools":[]}`, "`tools` must not be an empty array. Either provide at least one tool or omit the field entirely."},
		{`{` + msgs + `,"tool_choice":"required"}`, "When using `tool_choice`, `tools` must be set."},
		{`{` + msgs + `,"tool_choice":{"type":"function","function":{"name":"f"}}}`, "When using `tool_choice`, `tools` must be set."},
		{`{` + msgs + `,` + weatherTools + `,"tool_choice":"sometimes"}`, `Invalid value for ` + "`tool_choice`" + `: sometimes! Only named tools, "none", "auto" or "required" are supported.`},
		{`{` + msgs + `,` + weatherTools + `,"tool_choice":{"type":"function"}}`, "Invalid value for `function`: `None` in `tool_choice`! Correct usage: `{\"type\": \"function\", \"function\": {\"name\": \"my_function\"}}`"},
		{`{` + msgs + `,` + weatherTools + `,"tool_choice":{"type":"function","function":{}}}`, "Expected field `name` in `function` in `tool_choice`!"},
		{`{` + msgs + `,` + weatherTools + `,"tool_choice":{"type":"function","function":{"name":""}}}`, "Invalid `name` in `function`"},
		{`{` + msgs + `,` + weatherTools + `,"tool_choice":{"type":"function","function":{"name":"get_news"}}}`, "The tool specified in `tool_choice` does not match any of the specified `tools`"},
		{`{` + msgs + `,"tools":[{"type":"function","function":{}}],"tool_choice":"required"}`, "tools.0.function.name: Field required"},
		{`{` + msgs + `,"tools":{"a":1}}`, "tools: must be a list of tools"},
	} {
		resp, b := post(t, p.url+"/v1/chat/completions", c.body)
		var e errorBody
		strict(t, b, &e)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(e.Error.Message, c.msg) {
			t.Errorf("%s: %d %s, want %q", c.body, resp.StatusCode, b, c.msg)
		}
	}
}

// Arguments fill a schema's required properties with values of their
// types, following local $refs and taking enums' first values.
func TestArgumentsFromSchema(t *testing.T) {
	for _, c := range []struct{ schema, want string }{
		{``, `{}`},
		{`{"type":"object"}`, `{}`},
		{`{"type":"object","properties":{"a":{"type":"string"}}}`, `{}`},
		{`{"properties":{"n":{"type":"integer","minimum":10}},"required":["n"]}`, `{"n": 10}`},
		{`{"type":"object","properties":{"x":{"type":"number","maximum":0}},"required":["x"]}`, `{"x": 0}`},
		{`{"type":"object","properties":{"x":{"type":"number","minimum":20}},"required":["x"]}`, `{"x": 20}`},
		{`{"type":"object","properties":{"u":{"enum":["a","b"]},"c":{"const":{"k":[1,2]}}},"required":["u","c"]}`, `{"u": "a", "c": {"k": [1, 2]}}`},
		{`{"type":"object","properties":{"d":{"type":"string","format":"date"},"e":{"type":["null","string"],"format":"email"}},"required":["d","e"]}`, `{"d": "2025-01-01", "e": "user@example.com"}`},
		{`{"type":"object","properties":{"l":{"type":"array","items":{"type":"integer","minimum":5,"maximum":5},"minItems":2}},"required":["l"]}`, `{"l": [5, 5]}`},
		{`{"type":"object","properties":{"l":{"type":"array","maxItems":0}},"required":["l"]}`, `{"l": []}`},
		{`{"type":"object","$defs":{"P":{"type":"object","properties":{"z":{"type":"null"}},"required":["z"]}},"properties":{"p":{"$ref":"#/$defs/P"}},"required":["p"]}`, `{"p": {"z": null}}`},
		{`{"type":"object","properties":{"o":{"anyOf":[{"type":"boolean","default":false},{"type":"string"}]}},"required":["o"]}`, `{"o": false}`},
	} {
		got := string(appendArguments(nil, json.RawMessage(c.schema), 1))
		if got != c.want {
			t.Errorf("schema %s: arguments %s, want %s", c.schema, got, c.want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("schema %s: arguments %s are not JSON", c.schema, got)
		}
	}
	// a recursive schema ends
	rec := `{"type":"object","properties":{"next":{"$ref":"#"}},"required":["next"]}`
	if got := appendArguments(nil, json.RawMessage(rec), 1); !json.Valid(got) || !strings.Contains(string(got), "null") {
		t.Errorf("recursive schema: %s", got)
	}
}

// anthropicWeatherTools is weatherTools in Anthropic's shape.
const anthropicWeatherTools = `"tools":[{"name":"get_weather","description":"the weather in a city","input_schema":{"type":"object",
"properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]},"days":{"type":"integer","minimum":1,"maximum":3}},
"required":["city","unit","days"]}},{"name":"get_time","input_schema":{"type":"object"}}]`

// anthropicToolMessage is a Messages answer that may use tools, decoded
// strictly.
type anthropicToolMessage struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Role    string `json:"role"`
	Model   string `json:"model"`
	Content []struct {
		Type  string          `json:"type"`
		Text  string          `json:"text"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"content"`
	StopReason   string          `json:"stop_reason"`
	StopSequence *string         `json:"stop_sequence"`
	Usage        *anthropicUsage `json:"usage"`
}

// Messages with tools: tool_choice "any" and "tool" get a tool_use block
// (its input the arguments), stop_reason tool_use for "any" and end_turn
// for "tool" (vLLM maps the named call's "stop"); tools without a
// tool_choice are "auto", which needs --enable-auto-tool-choice; a user
// turn answering a tool_use (tool_result) gets text, max_tokens long as
// every Messages text answer.
func TestMessagesToolUse(t *testing.T) {
	p := startPod(t, func(c *Config) { c.AutoToolChoice, c.ToolCallParser = true, "hermes" })
	body := func(content, extra string) string {
		return fmt.Sprintf(`{"model":"llama","max_tokens":200,"messages":[{"role":"user","content":%s}],%s%s}`, content, anthropicWeatherTools, extra)
	}
	for _, c := range []struct{ name, body, stop, tool string }{
		{"any", body(`"weather please"`, `,"tool_choice":{"type":"any"}`), "tool_use", "get_weather"},
		{"tool", body(`"weather please"`, `,"tool_choice":{"type":"tool","name":"get_time"}`), "end_turn", "get_time"},
		{"auto", body(`"weather please, get_weather"`, ``), "tool_use", "get_weather"},
		// text is max_tokens long, as any Messages answer
		{"auto text", body(`"hello"`, ``), "max_tokens", ""},
		{"none", body(`"weather please, get_weather"`, `,"tool_choice":{"type":"none"}`), "max_tokens", ""},
		{"tool result", body(`[{"type":"tool_result","tool_use_id":"x","content":"get_weather: rain"}]`, ``), "max_tokens", ""},
	} {
		resp, b := post(t, p.url+"/v1/messages", c.body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", c.name, resp.StatusCode, b)
		}
		var m anthropicToolMessage
		strict(t, b, &m)
		if m.StopReason != c.stop || len(m.Content) != 1 {
			t.Errorf("%s: %s", c.name, b)
			continue
		}
		block := m.Content[0]
		if c.tool == "" {
			if block.Type != "text" || block.Text == "" {
				t.Errorf("%s: %s, want text", c.name, b)
			}
			continue
		}
		if block.Type != "tool_use" || block.Name != c.tool || !toolCallID.MatchString(block.ID) {
			t.Errorf("%s: block %+v", c.name, block)
		}
		var input map[string]any
		if err := json.Unmarshal(block.Input, &input); err != nil || c.tool == "get_weather" && input["unit"] != "celsius" || c.tool == "get_time" && len(input) != 0 {
			t.Errorf("%s: input %s", c.name, block.Input)
		}
		if m.Usage.OutputTokens < len(block.Input)/4 {
			t.Errorf("%s: usage %+v", c.name, m.Usage)
		}
	}
	off := startPod(t, nil)
	for _, c := range []struct{ body, msg string }{
		{body(`"x"`, ``), `"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set`},
		{body(`"x"`, `,"tool_choice":{"type":"tool"}`), "tool_choice.name is required when type is 'tool'"},
		{body(`"x"`, `,"tool_choice":{"type":"tool","name":"get_news"}`), "The tool specified in `tool_choice` does not match any of the specified `tools`"},
		{body(`"x"`, `,"tool_choice":{"type":"maybe"}`), "tool_choice.type"},
		{`{"model":"llama","max_tokens":9,"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"any"}}`, "When using `tool_choice`, `tools` must be set."},
		{`{"model":"llama","max_tokens":9,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"f"}],"tool_choice":{"type":"any"}}`, "tools.0.input_schema"},
	} {
		resp, b := post(t, off.url+"/v1/messages", c.body)
		var e anthropicError
		strict(t, b, &e)
		if resp.StatusCode != http.StatusBadRequest || e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, c.msg) {
			t.Errorf("%s: %d %s, want %q", c.body, resp.StatusCode, b, c.msg)
		}
	}
}

// A streamed tool_use block comes as vLLM converts its chat stream's tool
// call: content_block_start with the block (input {}) once the name is
// written, input_json_delta events making the input, content_block_stop,
// then message_delta with stop_reason tool_use.
func TestMessagesToolUseStream(t *testing.T) {
	p := startPod(t, nil)
	body := `{"model":"llama","max_tokens":200,"seed":3,"messages":[{"role":"user","content":"weather"}],` + anthropicWeatherTools + `,"tool_choice":{"type":"any"}`
	_, b := post(t, p.url+"/v1/messages", body+"}")
	var plain anthropicToolMessage
	strict(t, b, &plain)
	resp, err := http.Post(p.url+"/v1/messages", "application/json", strings.NewReader(body+`,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	evs := readEvents(t, resp.Body)
	var names []string
	var input strings.Builder
	var start struct {
		ContentBlock struct {
			Type, ID, Name string
			Input          json.RawMessage
		} `json:"content_block"`
	}
	var delta struct {
		Delta struct {
			StopReason string `json:"stop_reason"`
		} `json:"delta"`
		Usage anthropicUsage `json:"usage"`
	}
	for _, ev := range evs {
		if len(names) == 0 || names[len(names)-1] != ev.name {
			names = append(names, ev.name)
		}
		switch ev.name {
		case "content_block_start":
			if err := json.Unmarshal([]byte(ev.data), &start); err != nil {
				t.Fatal(err)
			}
		case "content_block_delta":
			var d struct {
				Delta struct{ Type, PartialJSON string } `json:"delta"`
			}
			if err := json.Unmarshal([]byte(ev.data), &d); err != nil || d.Delta.Type != "input_json_delta" {
				t.Fatalf("delta %s", ev.data)
			}
			var pj struct {
				Delta struct {
					PartialJSON string `json:"partial_json"`
				} `json:"delta"`
			}
			_ = json.Unmarshal([]byte(ev.data), &pj)
			input.WriteString(pj.Delta.PartialJSON)
		case "message_delta":
			if err := json.Unmarshal([]byte(ev.data), &delta); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := []string{"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("events %v, want %v", names, want)
	}
	pb := plain.Content[0]
	var got, wantInput any
	_ = json.Unmarshal([]byte(input.String()), &got)
	_ = json.Unmarshal(pb.Input, &wantInput)
	if start.ContentBlock.Type != "tool_use" || start.ContentBlock.Name != "get_weather" || string(start.ContentBlock.Input) != "{}" ||
		!toolCallID.MatchString(start.ContentBlock.ID) || fmt.Sprint(got) != fmt.Sprint(wantInput) {
		t.Errorf("streamed block %+v with input %s; plain %+v", start.ContentBlock, input.String(), pb)
	}
	if delta.Delta.StopReason != "tool_use" || delta.Usage.OutputTokens != plain.Usage.OutputTokens {
		t.Errorf("message_delta %+v, plain usage %+v", delta, plain.Usage)
	}
}
