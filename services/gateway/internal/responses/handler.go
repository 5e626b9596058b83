// Package responses serves the OpenAI Responses API (/v1/responses) on
// top of the gateway's chat completions: a request's conversation (the
// chain of earlier responses from the responses store, then its own
// input) becomes one chat completion, routed through the picker like any
// other, so prefix-aware routing sees the whole conversation. The answer
// comes back as a Response object (or Responses stream events) and is
// stored unless store is false; a stream is stored only once it
// completes.
package responses

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	responsesv1 "github.com/hermod/hermod/libs/api/hermod/responses/v1"
	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/services/gateway/internal/auth"
	"github.com/hermod/hermod/services/gateway/internal/reqbody"
)

// Options configure the handler.
type Options struct {
	// Store is the responses service; nil answers 503.
	Store responsesv1.ResponsesStoreClient
	// Chat serves POST /v1/chat/completions (the gateway's proxy).
	Chat http.Handler
	// MaxChain bounds a conversation: the most responses it may hold,
	// the new one included; 0 is 100.
	MaxChain int
	// MaxBodyBytes bounds a request body; 0 is 16 MiB.
	MaxBodyBytes int64
	// StoreTimeout bounds each store call; 0 is 5s.
	StoreTimeout time.Duration
	// StoreRetryFor is how long a response that could not be stored is
	// tried again before the client is told it was not; 0 is 10s.
	StoreRetryFor time.Duration
	// MaxConversationItems bounds a conversation's items; 0 is 10000.
	MaxConversationItems int
	Logger               *slog.Logger
	Registerer           prometheus.Registerer
}

// Handler serves /v1/responses.
type Handler struct {
	o        Options
	requests *prometheus.CounterVec
	storeErr *prometheus.CounterVec
}

// New returns the handler.
func New(o Options) *Handler {
	if o.MaxChain <= 0 {
		o.MaxChain = 100
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 16 << 20
	}
	if o.StoreTimeout <= 0 {
		o.StoreTimeout = 5 * time.Second
	}
	if o.StoreRetryFor <= 0 {
		o.StoreRetryFor = 10 * time.Second
	}
	if o.MaxConversationItems <= 0 {
		o.MaxConversationItems = 10000
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Handler{o: o,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hermod_gateway_responses_requests_total", Help: "Responses API requests by operation and HTTP status.",
		}, []string{"op", "code"}),
		storeErr: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hermod_gateway_responses_store_errors_total", Help: "Responses store calls that failed (the response was served but not stored, for op=put).",
		}, []string{"op"}),
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(h.requests, h.storeErr)
	}
	return h
}

// Register adds the Responses and Conversations API routes to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/responses", h.create)
	mux.HandleFunc("GET /v1/responses/{id}", h.onStored("get", h.get))
	mux.HandleFunc("DELETE /v1/responses/{id}", h.onStored("delete", h.remove))
	mux.HandleFunc("GET /v1/responses/{id}/input_items", h.onStored("input_items", h.inputItems))
	mux.HandleFunc("POST /v1/responses/{id}/cancel", h.onStored("cancel", h.cancel))
	h.registerConversations(mux)
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(p)
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (h *Handler) count(op string, w *statusWriter) {
	h.requests.WithLabelValues(op, strconv.Itoa(w.code)).Inc()
}

func (h *Handler) storeCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), h.o.StoreTimeout)
}

func (h *Handler) noStore(w http.ResponseWriter) bool {
	if h.o.Store != nil {
		return false
	}
	openai.WriteError(w, http.StatusServiceUnavailable, openai.TypeUnavailable, "responses_store_unavailable", "", "the Responses API needs the responses store: start the gateway with --responses-address", 0)
	return true
}

// storeError answers a failed store call about a response id.
func (h *Handler) storeError(w http.ResponseWriter, err error, id, param string) {
	switch status.Code(err) {
	case codes.NotFound:
		msg := fmt.Sprintf("Response with id '%s' not found.", id)
		if param == "previous_response_id" {
			msg = fmt.Sprintf("Previous response with id '%s' not found.", id)
		}
		openai.WriteError(w, http.StatusNotFound, openai.TypeInvalidRequest, "not_found", param, msg, 0)
	case codes.OutOfRange:
		openai.WriteError(w, http.StatusBadRequest, openai.TypeInvalidRequest, "conversation_too_long", param, status.Convert(err).Message(), 0)
	case codes.InvalidArgument:
		openai.WriteError(w, http.StatusBadRequest, openai.TypeInvalidRequest, "invalid_value", param, status.Convert(err).Message(), 0)
	default: // the detail (addresses and all) is for the log only
		h.o.Logger.Warn("responses store call failed", "id", id, "err", err)
		openai.WriteError(w, http.StatusServiceUnavailable, openai.TypeUnavailable, "responses_store_unavailable", "", "the responses store did not answer; try again", 1)
	}
}

// load reads a stored response that belongs to ctx's principal: another
// principal's is NotFound, as an unknown one is.
func (h *Handler) load(ctx context.Context, id string) (*record, error) {
	rec, err := h.loadAny(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec.Owner != auth.Principal(ctx) {
		return nil, status.Errorf(codes.NotFound, "response %s: not found", id)
	}
	return rec, nil
}

// loadAny reads a stored response whoever owns it.
func (h *Handler) loadAny(ctx context.Context, id string) (*record, error) {
	res, err := h.o.Store.Get(ctx, &responsesv1.GetRequest{Id: id})
	if err != nil {
		return nil, err
	}
	var rec record
	if err := json.Unmarshal(res.GetResponse().GetData(), &rec); err != nil || rec.Response == nil {
		return nil, status.Errorf(codes.DataLoss, "stored response %s is unreadable", id)
	}
	return &rec, nil
}

// onStored is the handler of op on a stored response ({id}): counted, and
// 503 without a store.
func (h *Handler) onStored(op string, serve func(w http.ResponseWriter, r *http.Request, id string)) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		w := &statusWriter{ResponseWriter: rw}
		defer h.count(op, w)
		if !h.noStore(w) {
			serve(w, r, r.PathValue("id"))
		}
	}
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request, id string) {
	ctx, cancel := h.storeCtx(r)
	defer cancel()
	rec, err := h.load(ctx, id)
	if err == nil {
		rec, err = h.withRunState(ctx, rec)
	}
	if err != nil {
		h.storeError(w, err, id, "")
		return
	}
	if stream, after, ok := retrieveOptions(r); stream {
		if !ok {
			openai.WriteError(w, http.StatusBadRequest, openai.TypeInvalidRequest, "invalid_value", "starting_after", "starting_after must be a non-negative integer", 0)
			return
		}
		if rec.Response.Background {
			h.streamBackground(w, r, id, after)
			return
		}
		replay(w, rec.Response, after)
		return
	}
	writeJSON(w, http.StatusOK, rec.Response)
}

// cancel answers POST /v1/responses/{id}/cancel: only a background
// response can be cancelled; another stored response is refused (400)
// and an unknown one is 404.
func (h *Handler) cancel(w http.ResponseWriter, r *http.Request, id string) {
	ctx, cancel := h.storeCtx(r)
	defer cancel()
	rec, err := h.load(ctx, id)
	if err != nil {
		h.storeError(w, err, id, "")
		return
	}
	if !rec.Response.Background {
		openai.WriteError(w, http.StatusBadRequest, openai.TypeInvalidRequest, "invalid_request", "",
			"only responses created with background=true can be cancelled; response "+id+" was not", 0)
		return
	}
	h.cancelBackground(w, r, rec)
}

func (h *Handler) remove(w http.ResponseWriter, r *http.Request, id string) {
	ctx, cancel := h.storeCtx(r)
	defer cancel()
	if _, err := h.load(ctx, id); err != nil {
		h.storeError(w, err, id, "")
		return
	}
	if _, err := h.o.Store.Delete(ctx, &responsesv1.DeleteRequest{Id: id}); err != nil {
		h.storeError(w, err, id, "")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "response", "deleted": true})
}

func (h *Handler) inputItems(w http.ResponseWriter, r *http.Request, id string) {
	page, ok := readPageQuery(w, r)
	if !ok {
		return
	}
	ctx, cancel := h.storeCtx(r)
	defer cancel()
	rec, err := h.load(ctx, id)
	if err != nil {
		h.storeError(w, err, id, "")
		return
	}
	writeJSON(w, http.StatusOK, page.of(rec.Input))
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		openai.WriteError(w, http.StatusInternalServerError, openai.TypeServer, "internal_error", "", err.Error(), 0)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// answerBadJSON answers a body that did not decode: the field of the
// wrong type, or invalid JSON.
func answerBadJSON(w http.ResponseWriter, err error) {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		openai.WriteError(w, http.StatusBadRequest, openai.TypeInvalidRequest, "invalid_type", typeErr.Field, typeErr.Field+": wrong type ("+typeErr.Value+")", 0)
		return
	}
	openai.WriteError(w, http.StatusBadRequest, openai.TypeInvalidRequest, "invalid_json", "", "the request body is not valid JSON", 0)
}

// readBody reads a request body within MaxBodyBytes; false when it was
// answered (refused).
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := reqbody.Read(w, r, h.o.MaxBodyBytes, 0)
	if err != nil {
		reqbody.Answer(err, h.o.MaxBodyBytes).Write(w)
		return nil, false
	}
	return body, true
}

// readCreate reads and checks a create request; false when it was
// answered (refused).
func (h *Handler) readCreate(w http.ResponseWriter, r *http.Request) (*Request, []InputItem, []byte, bool) {
	body, ok := h.readBody(w, r)
	if !ok {
		return nil, nil, nil, false
	}
	var req Request
	var err error
	if err = json.Unmarshal(body, &req); err != nil {
		answerBadJSON(w, err)
		return nil, nil, nil, false
	}
	if req.Background && req.Store != nil && !*req.Store {
		openai.WriteError(w, http.StatusBadRequest, openai.TypeInvalidRequest, "invalid_value", "store", "background responses must be stored: send store: true or leave it out", 0)
		return nil, nil, nil, false
	}
	if req.Model == "" {
		openai.WriteError(w, http.StatusBadRequest, openai.TypeInvalidRequest, "missing_required_parameter", "model", "you must provide a model parameter", 0)
		return nil, nil, nil, false
	}
	if req.conversation, err = conversationOf(req.Conversation); err != nil {
		openai.WriteError(w, http.StatusBadRequest, openai.TypeInvalidRequest, "invalid_value", "conversation", err.Error(), 0)
		return nil, nil, nil, false
	}
	if req.conversation != "" && req.PreviousResponseID != "" {
		openai.WriteError(w, http.StatusBadRequest, openai.TypeInvalidRequest, "mutually_exclusive_parameters", "conversation",
			"previous_response_id and conversation cannot be used together: a response continues either a chain of responses or a conversation", 0)
		return nil, nil, nil, false
	}
	input, err := parseInput(req.Input)
	if err != nil {
		openai.WriteError(w, http.StatusBadRequest, openai.TypeInvalidRequest, "invalid_value", "input", err.Error(), 0)
		return nil, nil, nil, false
	}
	if req.MaxOutputTokens != nil && *req.MaxOutputTokens < 1 {
		openai.WriteError(w, http.StatusBadRequest, openai.TypeInvalidRequest, "invalid_value", "max_output_tokens", "max_output_tokens must be at least 1", 0)
		return nil, nil, nil, false
	}
	return &req, input, body, true
}

// loadChain loads the conversation a request continues (none without a
// previous response); false when it was answered (refused).
func (h *Handler) loadChain(w http.ResponseWriter, r *http.Request, previous string) ([]record, bool) {
	if previous == "" {
		return nil, true
	}
	var res *responsesv1.GetChainResponse
	err := status.Error(codes.OutOfRange, "no earlier responses allowed")
	if h.o.MaxChain > 1 {
		ctx, cancel := h.storeCtx(r)
		res, err = h.o.Store.GetChain(ctx, &responsesv1.GetChainRequest{Id: previous, Limit: int32(h.o.MaxChain - 1)})
		cancel()
	}
	if err != nil {
		if status.Code(err) == codes.OutOfRange {
			openai.WriteError(w, http.StatusBadRequest, openai.TypeInvalidRequest, "conversation_too_long", "previous_response_id",
				fmt.Sprintf("the conversation is longer than %d responses", h.o.MaxChain), 0)
			return nil, false
		}
		h.storeError(w, err, previous, "previous_response_id")
		return nil, false
	}
	chain := make([]record, 0, len(res.GetResponses()))
	for _, sr := range res.GetResponses() {
		var rec record
		if err := json.Unmarshal(sr.GetData(), &rec); err != nil {
			openai.WriteError(w, http.StatusInternalServerError, openai.TypeServer, "internal_error", "", "stored response "+sr.GetId()+" is unreadable", 0)
			return nil, false
		}
		if rec.Owner != auth.Principal(r.Context()) { // another principal's conversation
			h.storeError(w, status.Error(codes.NotFound, "not found"), previous, "previous_response_id")
			return nil, false
		}
		chain = append(chain, rec)
	}
	return chain, true
}

// create serves POST /v1/responses.
func (h *Handler) create(rw http.ResponseWriter, r *http.Request) {
	w := &statusWriter{ResponseWriter: rw}
	defer h.count("create", w)
	req, input, body, ok := h.readCreate(w, r)
	if !ok {
		return
	}
	store := req.Store == nil || *req.Store
	if req.PreviousResponseID != "" || store || req.conversation != "" {
		if h.noStore(w) {
			return
		}
	}
	run, ok := h.runOf(w, r)
	if !ok {
		return
	}
	var chain []record
	if req.conversation != "" {
		chain, ok = h.loadConversationContext(w, r, req.conversation)
	} else {
		chain, ok = h.loadChain(w, r, req.PreviousResponseID)
	}
	if !ok {
		return
	}
	t := &turn{h: h, req: req, input: input, store: store, id: newID("resp_"), msgID: newID("msg_"), created: time.Now(), owner: auth.Principal(r.Context())}
	switch {
	case run != nil:
		t.id, t.input, t.runToken = run.id, run.queued.Input, run.token
		t.created = time.Unix(run.queued.Response.CreatedAt, 0)
	case req.Background:
		queued, ok := h.submit(w, r, t, body)
		switch {
		case !ok:
		case req.Stream:
			h.streamBackground(w, r, t.id, -1)
		default:
			writeJSON(w, http.StatusOK, queued)
		}
		return
	}
	chatBody := t.chatBody(chain)
	inner, err := http.NewRequestWithContext(r.Context(), http.MethodPost, "/v1/chat/completions", bytes.NewReader(chatBody))
	if err != nil {
		openai.WriteError(w, http.StatusInternalServerError, openai.TypeServer, "internal_error", "", err.Error(), 0)
		return
	}
	inner.Header = r.Header.Clone()
	inner.Header.Del("Content-Length")
	inner.Header.Del(RunHeader)
	inner.Header.Set("Content-Type", "application/json")
	inner.ContentLength = int64(len(chatBody))
	inner.RemoteAddr = r.RemoteAddr
	switch {
	case req.Stream && run != nil:
		h.runStreamed(w, r, t, inner)
		return
	case req.Stream:
		sw := newStreamWriter(w, t)
		h.o.Chat.ServeHTTP(sw, inner)
		sw.finish(r.Context())
		return
	}
	rec := &captureWriter{header: http.Header{}}
	h.o.Chat.ServeHTTP(rec, inner)
	if rec.tooLarge {
		openai.WriteError(w, http.StatusBadGateway, openai.TypeServer, "bad_upstream_response", "", errAnswerTooLarge.Error(), 0)
		return
	}
	if rec.code != http.StatusOK {
		copyHeader(w.Header(), rec.header)
		w.WriteHeader(rec.code)
		_, _ = w.Write(rec.body.Bytes())
		return
	}
	copyPassHeaders(w.Header(), rec.header)
	resp, err := t.fromChat(rec.body.Bytes())
	if err != nil {
		openai.WriteError(w, http.StatusBadGateway, openai.TypeServer, "bad_upstream_response", "", err.Error(), 0)
		return
	}
	// A background run whose conversation could not be updated is stored
	// and completed all the same: the run is over (logged and counted).
	if err := t.commit(r.Context(), resp, nil); err != nil && (run == nil || !errors.Is(err, errConversationNotUpdated)) {
		switch {
		case run != nil:
			h.commitRun(w, err, run.id)
		case errors.Is(err, errConversationNotUpdated):
			h.conversationNotUpdated(w, err, req.conversation)
		case status.Code(err) == codes.InvalidArgument:
			openai.WriteError(w, http.StatusBadRequest, openai.TypeInvalidRequest, "response_too_large", "", "the response is too large to store: "+status.Convert(err).Message()+" (send store: false)", 0)
		default:
			openai.WriteError(w, http.StatusServiceUnavailable, openai.TypeUnavailable, notStoredCode, "", notStoredMessage, 1)
		}
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// captureWriter records a chat completion answer.
type captureWriter struct {
	header   http.Header
	code     int
	body     bytes.Buffer
	tooLarge bool
}

func (c *captureWriter) Header() http.Header { return c.header }
func (c *captureWriter) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
	}
}

func (c *captureWriter) Write(p []byte) (int, error) {
	if c.code == 0 {
		c.code = http.StatusOK
	}
	if c.body.Len()+len(p) > maxChatAnswerBytes {
		c.tooLarge = true
		return 0, errAnswerTooLarge
	}
	return c.body.Write(p)
}

// maxChatAnswerBytes bounds a chat completion a Responses turn holds (one
// answer of a model server; far above what any max_tokens gives).
const maxChatAnswerBytes = 64 << 20

var errAnswerTooLarge = errors.New("the model server's answer is too large")

func copyHeader(dst, src http.Header) {
	for k, v := range src {
		dst[k] = v
	}
}

// copyPassHeaders keeps the routing headers of the chat answer (which
// pod served it, the request id) on the Responses answer.
func copyPassHeaders(dst, src http.Header) {
	for k, v := range src {
		if k == "Content-Type" || k == "Content-Length" {
			continue
		}
		dst[k] = v
	}
}
