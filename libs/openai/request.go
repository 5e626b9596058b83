package openai

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// Request is what Hermod reads of a request body (OpenAI completions or
// chat completions, Anthropic Messages): enough to route, stream and
// account for it.
type Request struct {
	API API
	// Model is the "model" member ("" when absent or null).
	Model string
	// Stream is the "stream" member.
	Stream bool
	// HasStreamOptions says whether "stream_options" is present (null
	// included); IncludeUsage is its "include_usage".
	HasStreamOptions bool
	IncludeUsage     bool
	// MaxTokens is the output limit the request sets
	// (max_completion_tokens, else max_tokens), at most MaxInt32; 0 when
	// it sets none.
	MaxTokens int
	// Prompt is the completions prompt (several prompts joined by "\n";
	// token-id prompts as their decimal ids joined by spaces).
	Prompt string
	// Messages are the chat messages; a Messages request's "system"
	// comes first, as a message of role "system".
	Messages []Message
	// TokenIDs is a completions prompt given as one list of token ids.
	TokenIDs []uint32
}

// MediaKind is a bit set of multimodal content kinds.
type MediaKind uint8

// Media kinds found in chat content parts.
const (
	MediaImage MediaKind = 1 << iota
	MediaAudio
	MediaVideo
)

// Message is one chat message: its role, the concatenated text of its
// content, and the kinds of media parts it carries with a hash of each.
type Message struct {
	Role    string
	Content string
	Media   MediaKind
	// Items are the message's media parts: their kind and a hash of what
	// the part says (the image's URL or data, the audio's data, ...), so
	// that the same item sent again hashes alike. At most MaxMediaItems
	// per request are hashed.
	Items []MediaItem
}

// MediaItem is one media part of a message.
type MediaItem struct {
	Kind MediaKind
	Hash uint64
}

// MaxMediaItems bounds the media parts of a request that are hashed
// (Message.Items); the kinds of further parts are still noted.
const MaxMediaItems = 256

// BodyError is a request body Hermod refuses (HTTP 400); Param names the
// member at fault ("messages[2].content"), "" for the body as a whole.
type BodyError struct {
	Param string
	Msg   string
}

func (e *BodyError) Error() string {
	if e.Param == "" {
		return e.Msg
	}
	return e.Param + ": " + e.Msg
}

func fieldError(param, format string, args ...any) error {
	return &BodyError{Param: param, Msg: fmt.Sprintf(format, args...)}
}

// Parse reads a request body sent to api in one pass: it checks
// that the body is one JSON object and reads the members of Request from
// it, skipping the others without building them. A body that is not valid
// JSON, or whose members have the wrong types, is a *BodyError naming the
// member. Of duplicate members the last counts, as in encoding/json.
func Parse(api API, body []byte) (Request, error) {
	r := Request{API: api}
	if !api.Valid() {
		return Request{}, &BodyError{Msg: fmt.Sprintf("unsupported API %d", api)}
	}
	s := scanner{b: body, anthropic: api.Anthropic()}
	s.ws()
	if api == APIPassthrough {
		return parsePassthrough(&s, r)
	}
	if s.peek() != '{' {
		return Request{}, &BodyError{Msg: "request body must be a JSON object"}
	}
	var p parser
	if err := s.object(0, func(key []byte) error { return p.member(&s, &r, key) }); err != nil {
		return Request{}, err
	}
	s.ws()
	if s.i != len(s.b) {
		return Request{}, s.syntaxError("unexpected data after the JSON object")
	}
	if err := p.finish(&r); err != nil {
		return Request{}, err
	}
	return r, nil
}

// parsePassthrough reads the model (and stream) of a body sent to another
// endpoint: a JSON object's members, else nothing (a form, say, which
// FormModel reads). Its prompt is not read: nothing routes by it.
func parsePassthrough(s *scanner, r Request) (Request, error) {
	if s.peek() != '{' {
		return r, nil
	}
	var p parser
	err := s.object(0, func(key []byte) error {
		if k := string(key); k == "model" || k == "stream" {
			return p.member(s, &r, key)
		}
		return s.skip(1)
	})
	if err != nil {
		return Request{}, err
	}
	if s.ws(); s.i != len(s.b) {
		return Request{}, s.syntaxError("unexpected data after the JSON object")
	}
	return r, nil
}

// parser holds what Parse resolves once the whole object is read.
type parser struct {
	maxTokens, maxCompletionTokens int
	hasPrompt, hasMessages         bool
	hasMaxTokens                   bool
	hasSamplingParams              bool
	// system is a Messages request's system prompt (hasSystem: given)
	system    Message
	hasSystem bool
}

func (p *parser) member(s *scanner, r *Request, key []byte) error {
	switch string(key) {
	case "model":
		if null, err := s.null(); null || err != nil {
			r.Model = ""
			return err
		}
		v, ok, err := s.stringValue()
		if err == nil && !ok {
			return fieldError("model", "must be a string")
		}
		r.Model = v
		return err
	case "stream":
		v, _, err := s.boolValue("stream")
		r.Stream = v
		return err
	case "stream_options":
		return s.streamOptions(r)
	case "max_tokens":
		if r.API == APIGenerate { // its limit is sampling_params.max_tokens
			return s.skip(1)
		}
		null, err := s.null()
		if null || err != nil {
			p.maxTokens, p.hasMaxTokens = 0, false
			return err
		}
		p.hasMaxTokens = true
		return s.maxTokens("max_tokens", &p.maxTokens)
	case "system":
		if !r.API.Anthropic() {
			return s.skip(1)
		}
		null, err := s.null()
		p.hasSystem = !null
		if null || err != nil {
			return err
		}
		p.system = Message{Role: "system"}
		return s.content(&p.system, "system")
	case "max_completion_tokens":
		if r.API.Anthropic() || r.API == APIGenerate { // not a member: vLLM ignores it there
			return s.skip(1)
		}
		return s.maxTokens("max_completion_tokens", &p.maxCompletionTokens)
	case "prompt":
		if r.API != APICompletions {
			return s.skip(1)
		}
		null, err := s.null()
		p.hasPrompt = !null
		if null || err != nil {
			r.Prompt, r.TokenIDs = "", nil
			return err
		}
		return s.prompt(r)
	case "token_ids":
		if r.API != APIGenerate {
			return s.skip(1)
		}
		p.hasPrompt = true
		ids, err := s.tokenIDs("token_ids")
		if err != nil {
			return err
		}
		r.Prompt, r.TokenIDs = tokenText(ids), ids
		return nil
	case "sampling_params":
		if r.API != APIGenerate {
			return s.skip(1)
		}
		p.hasSamplingParams = true
		return s.samplingParams(p)
	case "messages":
		if !r.API.Chat() {
			return s.skip(1)
		}
		null, err := s.null()
		p.hasMessages = !null
		if null || err != nil {
			r.Messages = nil
			return err
		}
		return s.messages(r)
	}
	return s.skip(1)
}

func (p *parser) finish(r *Request) error {
	switch {
	case r.API == APICompletions && !p.hasPrompt:
		return fieldError("prompt", "required")
	case r.API.Chat() && !p.hasMessages:
		return fieldError("messages", "required")
	case r.API == APIGenerate && len(r.TokenIDs) == 0:
		return fieldError("token_ids", "must hold at least one token id")
	case r.API == APIGenerate && !p.hasSamplingParams:
		return fieldError("sampling_params", "required")
	case r.API == APIMessages && !p.hasMaxTokens:
		return fieldError("max_tokens", "required")
	case r.API.Anthropic() && r.Model == "":
		return fieldError("model", "required")
	case r.API.Anthropic() && len(r.Messages) == 0:
		return fieldError("messages", "must hold at least one message")
	}
	if p.hasSystem {
		r.Messages = append([]Message{p.system}, r.Messages...)
	}
	r.MaxTokens = p.maxCompletionTokens
	if r.MaxTokens == 0 {
		r.MaxTokens = p.maxTokens
	}
	return nil
}

// boolValue reads a boolean or null (null reads false).
func (s *scanner) boolValue(param string) (v, null bool, err error) {
	switch s.peek() {
	case 't':
		return true, false, s.literal("true")
	case 'f':
		return false, false, s.literal("false")
	case 'n':
		return false, true, s.literal("null")
	}
	if err := s.skip(1); err != nil {
		return false, false, err
	}
	return false, false, fieldError(param, "must be a boolean")
}

func (s *scanner) streamOptions(r *Request) error {
	switch s.peek() {
	case 'n':
		r.HasStreamOptions, r.IncludeUsage = true, false
		return s.literal("null")
	case '{':
		r.HasStreamOptions, r.IncludeUsage = true, false
		return s.object(1, func(key []byte) error {
			if string(key) != "include_usage" {
				return s.skip(2)
			}
			v, _, err := s.boolValue("stream_options.include_usage")
			r.IncludeUsage = v
			return err
		})
	}
	if err := s.skip(1); err != nil {
		return err
	}
	return fieldError("stream_options", "must be an object")
}

// samplingParams reads a generate request's sampling_params: an object
// whose max_tokens is the request's limit.
func (s *scanner) samplingParams(p *parser) error {
	if s.peek() != '{' {
		if err := s.skip(1); err != nil {
			return err
		}
		return fieldError("sampling_params", "must be an object")
	}
	return s.object(1, func(key []byte) error {
		if string(key) != "max_tokens" {
			return s.skip(2)
		}
		return s.maxTokens("sampling_params.max_tokens", &p.maxTokens)
	})
}

// maxTokens reads a token limit: a non-negative integer or null (0),
// clamped to MaxInt32.
func (s *scanner) maxTokens(param string, dst *int) error {
	if null, err := s.null(); null || err != nil {
		*dst = 0
		return err
	}
	v, ok, err := s.uintValue()
	if err != nil {
		return err
	}
	if !ok {
		return fieldError(param, "must be a non-negative integer")
	}
	*dst = int(min(v, math.MaxInt32))
	return nil
}

// prompt reads a completions prompt: a string, a list of strings (joined
// by "\n"), one list of token ids (kept as TokenIDs, and as their decimal
// text so that the prompt still hashes and counts), or a list of token-id
// lists.
func (s *scanner) prompt(r *Request) error {
	r.Prompt, r.TokenIDs = "", nil
	switch c := s.peek(); {
	case c == '"':
		v, _, err := s.stringValue()
		r.Prompt = v
		return err
	case c != '[':
		if err := s.skip(1); err != nil {
			return err
		}
		return fieldError("prompt", "must be a string or a list")
	}
	// A list: of token ids if its first element is a number, else of
	// strings and token-id lists.
	save := s.i
	s.i++
	s.ws()
	c := s.peek()
	s.i = save
	if c == '-' || (c >= '0' && c <= '9') {
		ids, err := s.tokenIDs("prompt")
		if err != nil {
			return err
		}
		r.Prompt, r.TokenIDs = tokenText(ids), ids
		return nil
	}
	var sb strings.Builder
	err := s.array(1, func(i int) error {
		if i > 0 {
			sb.WriteByte('\n')
		}
		param := "prompt[" + strconv.Itoa(i) + "]"
		switch s.peek() {
		case '"':
			v, _, err := s.stringValue()
			sb.WriteString(v)
			return err
		case '[':
			ids, err := s.tokenIDs(param)
			sb.WriteString(tokenText(ids))
			return err
		}
		if err := s.skip(2); err != nil {
			return err
		}
		return fieldError(param, "must be a string or a list of token ids")
	})
	r.Prompt = sb.String()
	return err
}

// tokenIDs reads a list of token ids (integers 0..MaxUint32).
func (s *scanner) tokenIDs(param string) ([]uint32, error) {
	if s.peek() != '[' {
		if err := s.skip(2); err != nil {
			return nil, err
		}
		return nil, fieldError(param, "must be a list of token ids")
	}
	var ids []uint32
	bad := false
	err := s.array(2, func(int) error {
		v, ok, err := s.uintValue()
		if !ok || v > math.MaxUint32 {
			bad = true
		}
		ids = append(ids, uint32(v))
		return err
	})
	if err != nil {
		return nil, err
	}
	if bad {
		return nil, fieldError(param, "must be a list of token ids (integers 0..%d)", uint32(math.MaxUint32))
	}
	return ids, nil
}

func tokenText(ids []uint32) string {
	b := make([]byte, 0, len(ids)*6)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendUint(b, uint64(id), 10)
	}
	return string(b)
}

// messages reads the chat messages.
func (s *scanner) messages(r *Request) error {
	if s.peek() != '[' {
		if err := s.skip(1); err != nil {
			return err
		}
		return fieldError("messages", "must be a list of messages")
	}
	r.Messages = r.Messages[:0]
	if r.Messages == nil {
		r.Messages = []Message{}
	}
	return s.array(1, func(i int) error {
		r.Messages = append(r.Messages, Message{})
		return s.message(&r.Messages[i], "messages["+strconv.Itoa(i)+"]")
	})
}

func (s *scanner) message(m *Message, param string) error {
	if s.peek() != '{' {
		if err := s.skip(2); err != nil {
			return err
		}
		return fieldError(param, "must be an object")
	}
	return s.object(2, func(key []byte) error {
		switch string(key) {
		case "role":
			if null, err := s.null(); null || err != nil {
				m.Role = ""
				return err
			}
			v, ok, err := s.stringValue()
			if err == nil && !ok {
				return fieldError(param+".role", "must be a string")
			}
			m.Role = v
			return err
		case "content":
			return s.content(m, param+".content")
		}
		return s.skip(3)
	})
}

// content reads a message's content: null, a string, or a list of
// content parts whose texts are joined and whose media kinds are noted.
func (s *scanner) content(m *Message, param string) error {
	m.Content, m.Media, m.Items = "", 0, nil
	switch s.peek() {
	case 'n':
		return s.literal("null")
	case '"':
		v, _, err := s.stringValue()
		m.Content = v
		return err
	case '[':
		var sb strings.Builder
		err := s.array(3, func(j int) error { return s.contentPart(m, &sb, param+"["+strconv.Itoa(j)+"]") })
		m.Content = sb.String()
		return err
	}
	if err := s.skip(3); err != nil {
		return err
	}
	return fieldError(param, "must be a string or a list of content parts")
}

func (s *scanner) contentPart(m *Message, sb *strings.Builder, param string) error {
	if s.peek() != '{' {
		if err := s.skip(4); err != nil {
			return err
		}
		return fieldError(param, "must be a content part object")
	}
	var typ, text string
	hasText := false
	// an Anthropic block's nested text (a tool result's content, a tool
	// call's input)
	var inner strings.Builder
	// The part's other members (its payload: image_url, input_audio, ...)
	// are hashed as sent.
	var payload xxhash.Digest
	payload.Reset()
	err := s.object(4, func(key []byte) error {
		switch string(key) {
		case "type":
			if null, err := s.null(); null || err != nil {
				typ = ""
				return err
			}
			v, ok, err := s.stringValue()
			if err == nil && !ok {
				return fieldError(param+".type", "must be a string")
			}
			typ = v
			return err
		case "text":
			if null, err := s.null(); null || err != nil {
				text, hasText = "", false
				return err
			}
			v, ok, err := s.stringValue()
			if err == nil && !ok {
				return fieldError(param+".text", "must be a string")
			}
			text, hasText = v, true
			return err
		case "content", "input", "thinking":
			if s.anthropic {
				return s.blockText(m, &inner, key, param)
			}
		}
		start := s.i
		if err := s.skip(5); err != nil {
			return err
		}
		_, _ = payload.Write(key)
		_, _ = payload.Write(s.b[start:s.i])
		return nil
	})
	if err != nil {
		return err
	}
	if kind := mediaKindOf(typ); kind != 0 {
		m.Media |= kind
		if s.mediaItems < MaxMediaItems {
			m.Items = append(m.Items, MediaItem{Kind: kind, Hash: payload.Sum64()})
			s.mediaItems++
		}
	} else {
		if hasText {
			sb.WriteString(text)
		}
		sb.WriteString(inner.String())
	}
	return nil
}

// blockText reads the text an Anthropic content block nests: a tool
// result's content (a string or a list of blocks), a tool call's input
// (its JSON as sent), a thinking block's thinking.
func (s *scanner) blockText(m *Message, sb *strings.Builder, key []byte, param string) error {
	param += "." + string(key)
	switch c := s.peek(); {
	case c == 'n':
		return s.literal("null")
	case c == '"':
		v, _, err := s.stringValue()
		sb.WriteString(v)
		return err
	case c == '[' && string(key) == "content" && !s.inBlock:
		// one level: a tool result's blocks are text and images
		s.inBlock = true
		defer func() { s.inBlock = false }()
		return s.array(5, func(j int) error { return s.contentPart(m, sb, param+"["+strconv.Itoa(j)+"]") })
	case string(key) == "input":
		start := s.i
		if err := s.skip(5); err != nil {
			return err
		}
		sb.Write(s.b[start:s.i])
		return nil
	case c == '[' || c == '{':
		return s.skip(5)
	}
	if err := s.skip(5); err != nil {
		return err
	}
	return fieldError(param, "must be a string")
}

// mediaKindOf maps an OpenAI or vLLM content-part type to its media kind.
func mediaKindOf(partType string) MediaKind {
	switch partType {
	case "image_url", "input_image", "image", "image_embeds", "image_pil":
		return MediaImage
	case "input_audio", "audio_url", "audio":
		return MediaAudio
	case "video_url", "video":
		return MediaVideo
	}
	return 0
}
