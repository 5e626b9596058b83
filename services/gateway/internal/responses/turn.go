package responses

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	responsesv1 "github.com/hermod/hermod/libs/api/hermod/responses/v1"
	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/libs/retry"
)

// turn is one POST /v1/responses being served.
type turn struct {
	h       *Handler
	req     *Request
	input   []InputItem
	store   bool
	id      string
	msgID   string
	created time.Time
	// runToken is the background run this turn is (empty: none).
	runToken string
	// owner is the principal the response belongs to.
	owner string
}

func (t *turn) chatBody(chain []record) []byte {
	body := map[string]any{
		"model":    t.req.Model,
		"messages": messages(t.req.Instructions, chain, t.input),
		"stream":   t.req.Stream,
	}
	if t.req.Stream {
		body["stream_options"] = map[string]any{"include_usage": true}
	}
	if t.req.MaxOutputTokens != nil {
		body["max_tokens"] = *t.req.MaxOutputTokens
	}
	if t.req.Temperature != nil {
		body["temperature"] = *t.req.Temperature
	}
	if t.req.TopP != nil {
		body["top_p"] = *t.req.TopP
	}
	if t.req.User != "" {
		body["user"] = t.req.User
	}
	b, _ := json.Marshal(body)
	return b
}

// response builds the Response object with the given output text, status
// and usage.
func (t *turn) response(text, finish, status string, u *Usage) *Response {
	r := &Response{
		ID: t.id, Object: "response", CreatedAt: t.created.Unix(), Status: status, Model: t.req.Model,
		MaxOutputTokens: t.req.MaxOutputTokens, ParallelToolCalls: true, Store: t.store, Temperature: t.req.Temperature, TopP: t.req.TopP,
		Text: map[string]any{"format": map[string]any{"type": "text"}}, ToolChoice: "auto", Tools: []any{}, Truncation: "disabled",
		Usage: u, Metadata: t.req.Metadata, Output: []OutputItem{}, Background: t.req.Background,
	}
	if r.Metadata == nil {
		r.Metadata = map[string]string{}
	}
	if t.req.Instructions != "" {
		r.Instructions = &t.req.Instructions
	}
	if t.req.PreviousResponseID != "" {
		r.PreviousResponseID = &t.req.PreviousResponseID
	}
	if t.req.User != "" {
		r.User = &t.req.User
	}
	if t.req.conversation != "" {
		r.Conversation = &ConversationRef{ID: t.req.conversation}
	}
	if status != "in_progress" && status != "queued" {
		itemStatus := "completed"
		if finish == "length" {
			r.Status, itemStatus = "incomplete", "incomplete"
			r.IncompleteDetails = &Incomplete{Reason: "max_output_tokens"}
		}
		r.Output = []OutputItem{t.message(text, itemStatus)}
	}
	return r
}

func (t *turn) message(text, status string) OutputItem {
	return OutputItem{Type: "message", ID: t.msgID, Status: status, Role: "assistant",
		Content: []OutputText{{Type: "output_text", Text: text, Annotations: []any{}}}}
}

type chatUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func (c *chatUsage) usage() *Usage {
	if c == nil {
		return nil
	}
	u := &Usage{InputTokens: c.PromptTokens, OutputTokens: c.CompletionTokens, TotalTokens: c.PromptTokens + c.CompletionTokens}
	if c.PromptTokensDetails != nil {
		u.InputTokensDetails.CachedTokens = c.PromptTokensDetails.CachedTokens
	}
	return u
}

// fromChat turns a chat completion into the Response object.
func (t *turn) fromChat(body []byte) (*Response, error) {
	var c struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage *chatUsage `json:"usage"`
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, fmt.Errorf("the model server's answer is not a chat completion: %w", err)
	}
	if len(c.Choices) == 0 {
		return nil, errors.New("the model server's answer has no choices")
	}
	return t.response(c.Choices[0].Message.Content, c.Choices[0].FinishReason, "completed", c.Usage.usage()), nil
}

// What a client is told when its response could not be stored.
const (
	notStoredCode    = "response_not_stored"
	notStoredMessage = "the response was generated but could not be stored, so it cannot be retrieved or continued: send the request again, or with store: false"
)

// commit stores the turn (unless store is false), then adds its items to
// its conversation (if any). A store that does not answer is tried again
// for up to StoreRetryFor; an error means the response is not stored (or,
// errConversationNotUpdated, not in its conversation), and the client
// must be told.
func (t *turn) commit(ctx context.Context, resp *Response, tail *eventTail) error {
	if err := t.put(ctx, resp, tail); err != nil {
		return err
	}
	if t.req.conversation == "" {
		return nil
	}
	items := append([]InputItem(nil), t.input...)
	for _, o := range resp.Output {
		item := InputItem{ID: o.ID, Type: o.Type, Role: o.Role, Status: o.Status, Content: make([]ContentBlock, len(o.Content))}
		for i, p := range o.Content {
			item.Content[i] = ContentBlock{Type: p.Type, Text: p.Text}
		}
		items = append(items, item)
	}
	return t.h.appendToConversation(ctx, t.req.conversation, items)
}

// eventTail is a streamed background run's last events, stored with its
// outcome at index from of the response's event log.
type eventTail struct {
	from   int
	events [][]byte
}

// put stores the turn's response (unless store is false), with tail.
func (t *turn) put(ctx context.Context, resp *Response, tail *eventTail) error {
	if !t.store {
		return nil
	}
	data, err := json.Marshal(record{Input: t.input, Response: resp, Owner: t.owner})
	if err != nil {
		return err
	}
	put := &responsesv1.PutRequest{Response: &responsesv1.StoredResponse{
		Id: t.id, PreviousResponseId: t.req.PreviousResponseID, CreatedAtUnixMs: t.created.UnixMilli(), Data: data}, RunToken: t.runToken}
	if tail != nil {
		put.Events, put.EventsFrom = tail.events, int64(tail.from)
	}
	ctx = context.WithoutCancel(ctx) // stored even if the client went
	wait, until := retry.Backoff(50*time.Millisecond, time.Second), time.Now().Add(t.h.o.StoreRetryFor)
	for {
		sctx, cancel := context.WithTimeout(ctx, t.h.o.StoreTimeout)
		_, err = t.h.o.Store.Put(sctx, put)
		cancel()
		code := status.Code(err)
		if err == nil || code == codes.InvalidArgument || code == codes.FailedPrecondition || time.Now().After(until) {
			break
		}
		retry.Sleep(ctx, wait.NextBackOff())
	}
	switch {
	case err == nil:
	case t.runToken != "" && status.Code(err) == codes.FailedPrecondition:
		t.h.o.Logger.Info("background run superseded", "id", t.id, "err", err)
	default:
		t.h.storeErr.WithLabelValues("put").Inc()
		t.h.o.Logger.Error("response not stored", "id", t.id, "err", err)
	}
	return err
}

// maxChatEventBytes bounds one event of the chat stream a Responses
// stream is made of (a chunk is a few hundred bytes).
const maxChatEventBytes = 1 << 20

// streamWriter receives the chat completion stream and writes Responses
// stream events to the client: response.created and in_progress, the
// output item and content part opened, a response.output_text.delta per
// chunk, then the done events and response.completed. An error answer
// passes through unchanged.
type streamWriter struct {
	w       http.ResponseWriter
	t       *turn
	header  http.Header
	code    int
	started bool
	pending []byte
	text    strings.Builder
	reason  string
	usage   *Usage
	done    bool
	seq     int
	err     error
	// final is the outcome a streamed background run stored.
	final *Response
}

func newStreamWriter(w http.ResponseWriter, t *turn) *streamWriter {
	return &streamWriter{w: w, t: t, header: http.Header{}}
}

func (s *streamWriter) Header() http.Header { return s.header }

func (s *streamWriter) WriteHeader(code int) {
	if s.code != 0 {
		return
	}
	s.code = code
	if code != http.StatusOK {
		copyHeader(s.w.Header(), s.header)
		s.w.WriteHeader(code)
	}
}

func (s *streamWriter) Flush() {
	if !s.started && s.code == http.StatusOK {
		return // the Responses stream's headers are not written yet
	}
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *streamWriter) Write(p []byte) (int, error) {
	if s.code == 0 {
		s.WriteHeader(http.StatusOK)
	}
	if s.code != http.StatusOK {
		return s.w.Write(p)
	}
	if !s.started {
		s.start()
	}
	s.pending = append(s.pending, p...)
	for {
		i := bytes.Index(s.pending, []byte("\n\n"))
		if i < 0 {
			if len(s.pending) > maxChatEventBytes {
				// not a chat stream's event: the stream fails rather than
				// the gateway holding the whole answer
				s.err = fmt.Errorf("the model server sent an event of more than %d bytes", maxChatEventBytes)
				s.pending = nil
				return 0, s.err
			}
			break
		}
		event := s.pending[:i]
		s.pending = s.pending[i+2:]
		if err := s.chunk(event); err != nil {
			return 0, err
		}
	}
	return len(p), s.err
}

func (s *streamWriter) start() {
	s.started = true
	h := s.w.Header()
	copyPassHeaders(h, s.header)
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	s.w.WriteHeader(http.StatusOK)
	inProgress := s.t.response("", "", "in_progress", nil)
	s.event("response.created", map[string]any{"response": inProgress})
	s.event("response.in_progress", map[string]any{"response": inProgress})
	item := s.t.message("", "in_progress")
	item.Content = []OutputText{}
	s.event("response.output_item.added", map[string]any{"output_index": 0, "item": item})
	s.event("response.content_part.added", map[string]any{"item_id": s.t.msgID, "output_index": 0, "content_index": 0,
		"part": OutputText{Type: "output_text", Text: "", Annotations: []any{}}})
	s.Flush()
}

// chunk handles one SSE event of the chat stream.
func (s *streamWriter) chunk(event []byte) error {
	sc := bufio.NewScanner(bytes.NewReader(event))
	sc.Buffer(nil, maxChatEventBytes)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimSpace(data)
		if string(data) == "[DONE]" {
			s.done = true
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *chatUsage `json:"usage"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(data, &c); err != nil {
			continue // not a chunk: ignored, as OpenAI clients do
		}
		if c.Error != nil {
			s.err = errors.New(c.Error.Message)
			return nil
		}
		if c.Usage != nil {
			s.usage = c.Usage.usage()
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != "" {
				s.text.WriteString(ch.Delta.Content)
				s.event("response.output_text.delta", map[string]any{"item_id": s.t.msgID, "output_index": 0, "content_index": 0, "delta": ch.Delta.Content})
			}
			if ch.FinishReason != nil && *ch.FinishReason != "" {
				s.reason = *ch.FinishReason
			}
		}
	}
	s.Flush()
	return nil
}

func (s *streamWriter) event(typ string, fields map[string]any) {
	if _, err := s.w.Write(s.frame(typ, fields)); err != nil && s.err == nil {
		s.err = err // the client left, or a run's log cannot take more: the stream stops
	}
}

// frame is the next event, numbered.
func (s *streamWriter) frame(typ string, fields map[string]any) []byte {
	defer func() { s.seq++ }()
	return frameOf(typ, s.seq, fields)
}

// frameOf is a Responses stream event as it is sent.
func frameOf(typ string, seq int, fields map[string]any) []byte {
	fields["type"] = typ
	fields["sequence_number"] = seq
	b, _ := json.Marshal(fields)
	return fmt.Appendf(nil, "event: %s\ndata: %s\n\n", typ, b)
}

// sinkTail is, for a streamed background run, the events still to
// append with its outcome, last among them; nil otherwise.
func (s *streamWriter) sinkTail(last []byte) *eventTail {
	sink, ok := s.w.(*eventSink)
	if !ok {
		return nil
	}
	events, from := sink.tail(last)
	return &eventTail{from: from, events: events}
}

// ended records that a streamed background run stored its outcome and
// last events.
func (s *streamWriter) ended(resp *Response, tail *eventTail) {
	if sink, ok := s.w.(*eventSink); ok {
		sink.committed(len(tail.events))
	}
	s.final = resp
}

// finish closes the stream once the chat completion is over: completed
// (and stored) when the model server finished it, failed otherwise (and
// not stored).
func (s *streamWriter) finish(ctx context.Context) {
	if s.code != 0 && s.code != http.StatusOK {
		return
	}
	if !s.started {
		if s.code == 0 { // nothing written at all
			openai.WriteError(s.w, http.StatusBadGateway, openai.TypeServer, "bad_upstream_response", "", "the model server sent nothing", 0)
			return
		}
		s.start()
	}
	if !s.done || s.err != nil || ctx.Err() != nil {
		msg := "the stream ended before the model server finished"
		if s.err != nil {
			msg = s.err.Error()
		}
		failed := s.t.response("", "", "failed", s.usage)
		failed.Output = []OutputItem{}
		failed.Error = &ResponseError{Code: "server_error", Message: msg}
		frame := s.frame("response.failed", map[string]any{"response": failed})
		if tail := s.sinkTail(frame); tail != nil {
			// a background run's failure is its outcome: stored, and
			// its job over
			if s.t.put(ctx, failed, tail) == nil {
				s.ended(failed, tail)
				return
			}
		}
		_, _ = s.w.Write(frame)
		s.Flush()
		return
	}
	text := s.text.String()
	resp := s.t.response(text, s.reason, "completed", s.usage)
	item := resp.Output[0]
	s.event("response.output_text.done", map[string]any{"item_id": s.t.msgID, "output_index": 0, "content_index": 0, "text": text})
	s.event("response.content_part.done", map[string]any{"item_id": s.t.msgID, "output_index": 0, "content_index": 0, "part": item.Content[0]})
	s.event("response.output_item.done", map[string]any{"output_index": 0, "item": item})
	name := "response.completed"
	if resp.Status == "incomplete" {
		name = "response.incomplete"
	}
	final := s.frame(name, map[string]any{"response": resp})
	tail := s.sinkTail(final)
	// stored before the client hears it is complete: a following turn
	// may name it at once
	err := s.t.commit(ctx, resp, tail)
	if tail != nil && errors.Is(err, errConversationNotUpdated) {
		err = nil // stored, its events with it (logged and counted)
	}
	if err != nil {
		s.seq-- // the final event was not sent: its number is the failure's
		failed := *resp
		failed.Status, failed.Error = "failed", &ResponseError{Code: notStoredCode, Message: notStoredMessage}
		if errors.Is(err, errConversationNotUpdated) {
			code, msg := conversationFailure(err, s.t.req.conversation)
			failed.Error = &ResponseError{Code: code, Message: msg}
		}
		s.event("response.failed", map[string]any{"response": failed})
		s.Flush()
		return
	}
	if tail != nil {
		s.ended(resp, tail)
		return
	}
	_, _ = s.w.Write(final)
	s.Flush()
}
