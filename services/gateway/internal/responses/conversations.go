package responses

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	responsesv1 "github.com/hermod/hermod/libs/api/hermod/responses/v1"
	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/libs/retry"
	"github.com/hermod/hermod/services/gateway/internal/auth"
)

// The Conversations API (/v1/conversations): a conversation is one record
// of the responses store holding its metadata and its items, oldest
// first. A response created with `conversation` reads the items as its
// context and, once it completes, appends its input and output items.
// Every change is a read and a compare-and-swap (Swap) of the record,
// again on a conflict, so that changes racing on one conversation (two
// responses completing at once) all land.

// Bounds of what a client sends, as OpenAI's API states them.
const (
	maxItemsPerAdd      = 20
	maxMetadataPairs    = 16
	maxMetadataKeyLen   = 64
	maxMetadataValueLen = 512
	// swapAttempts bounds the read-and-swap loop of one change; each lost
	// race means another change landed, so the loop ends unless that
	// many writers change one conversation at once.
	swapAttempts = 64
)

// conversation is what the store keeps for a conversation.
type conversation struct {
	CreatedAt int64             `json:"created_at"`
	Metadata  map[string]string `json:"metadata"`
	Items     []InputItem       `json:"items"`
	// Owner is the principal that created it (auth.Principal).
	Owner string `json:"owner,omitempty"`
}

// conversationObject is the Conversation object of the API.
type conversationObject struct {
	ID        string            `json:"id"`
	Object    string            `json:"object"`
	CreatedAt int64             `json:"created_at"`
	Metadata  map[string]string `json:"metadata"`
}

// ConversationRef is a Response's conversation.
type ConversationRef struct {
	ID string `json:"id"`
}

func (c *conversation) object(id string) conversationObject {
	md := c.Metadata
	if md == nil {
		md = map[string]string{}
	}
	return conversationObject{ID: id, Object: "conversation", CreatedAt: c.CreatedAt, Metadata: md}
}

// errConversationFull is a change that would take a conversation past
// MaxConversationItems.
var errConversationFull = errors.New("conversation full")

// registerConversations adds the Conversations API's routes to mux.
func (h *Handler) registerConversations(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/conversations", h.onConversation("conversation_create", h.createConversation))
	mux.HandleFunc("GET /v1/conversations/{id}", h.onConversation("conversation_get", h.getConversation))
	mux.HandleFunc("POST /v1/conversations/{id}", h.onConversation("conversation_update", h.updateConversation))
	mux.HandleFunc("DELETE /v1/conversations/{id}", h.onConversation("conversation_delete", h.deleteConversation))
	mux.HandleFunc("GET /v1/conversations/{id}/items", h.onConversation("conversation_items", h.listConversationItems))
	mux.HandleFunc("POST /v1/conversations/{id}/items", h.onConversation("conversation_add_items", h.addConversationItems))
	mux.HandleFunc("GET /v1/conversations/{id}/items/{item}", h.onConversation("conversation_get_item", h.getConversationItem))
	mux.HandleFunc("DELETE /v1/conversations/{id}/items/{item}", h.onConversation("conversation_delete_item", h.deleteConversationItem))
}

// onConversation is the handler of op: counted, and 503 without a store.
func (h *Handler) onConversation(op string, serve func(w http.ResponseWriter, r *http.Request)) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		w := &statusWriter{ResponseWriter: rw}
		defer h.count(op, w)
		if !h.noStore(w) {
			serve(w, r)
		}
	}
}

// conversationError answers a failed read or change of conversation id.
func (h *Handler) conversationError(w http.ResponseWriter, err error, id, param string) {
	switch {
	case errors.Is(err, errConversationFull):
		openai.WriteError(w, http.StatusBadRequest, openai.TypeInvalidRequest, "conversation_too_large", param,
			fmt.Sprintf("conversation %s cannot hold more than %d items", id, h.o.MaxConversationItems), 0)
	case status.Code(err) == codes.NotFound:
		openai.WriteError(w, http.StatusNotFound, openai.TypeInvalidRequest, "not_found", param, fmt.Sprintf("Conversation with id '%s' not found.", id), 0)
	case status.Code(err) == codes.InvalidArgument:
		openai.WriteError(w, http.StatusBadRequest, openai.TypeInvalidRequest, "conversation_too_large", param,
			"the conversation is too large to store: "+status.Convert(err).Message(), 0)
	case status.Code(err) == codes.Aborted:
		openai.WriteError(w, http.StatusConflict, openai.TypeInvalidRequest, "conflict", param,
			fmt.Sprintf("conversation %s is being changed by too many requests at once; try again", id), 1)
	default:
		h.storeError(w, err, id, param)
	}
}

// loadConversation reads a conversation that belongs to ctx's principal
// (another's is NotFound) and the revision it was read at.
func (h *Handler) loadConversation(ctx context.Context, id string) (*conversation, uint64, error) {
	res, err := h.o.Store.Get(ctx, &responsesv1.GetRequest{Id: id})
	if err != nil {
		return nil, 0, err
	}
	var c conversation
	if err := json.Unmarshal(res.GetResponse().GetData(), &c); err != nil {
		return nil, 0, status.Errorf(codes.DataLoss, "stored conversation %s is unreadable", id)
	}
	if c.Owner != auth.Principal(ctx) {
		return nil, 0, status.Errorf(codes.NotFound, "conversation %s: not found", id)
	}
	return &c, res.GetResponse().GetRevision(), nil
}

// changeConversation applies change to conversation id and stores the
// outcome, reading it again and reapplying change whenever another change
// landed in between. It returns the conversation as stored. Each store
// call has StoreTimeout.
func (h *Handler) changeConversation(ctx context.Context, id string, change func(*conversation) error) (*conversation, error) {
	for range swapAttempts {
		sctx, cancel := context.WithTimeout(ctx, h.o.StoreTimeout)
		c, rev, err := h.loadConversation(sctx, id)
		cancel()
		if err != nil {
			return nil, err
		}
		if err := change(c); err != nil {
			return nil, err
		}
		if len(c.Items) > h.o.MaxConversationItems {
			return nil, errConversationFull
		}
		data, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		sctx, cancel = context.WithTimeout(ctx, h.o.StoreTimeout)
		_, err = h.o.Store.Swap(sctx, &responsesv1.SwapRequest{Revision: rev,
			Response: &responsesv1.StoredResponse{Id: id, CreatedAtUnixMs: c.CreatedAt * 1000, Data: data}})
		cancel()
		if status.Code(err) != codes.Aborted {
			return c, err
		}
	}
	return nil, status.Errorf(codes.Aborted, "conversation %s: %d changes in a row lost the race", id, swapAttempts)
}

// appendToConversation adds a completed turn's items to its conversation,
// through store outages for up to StoreRetryFor (the turn is done; its
// items must not be lost to a blip).
func (h *Handler) appendToConversation(ctx context.Context, id string, items []InputItem) error {
	ctx = context.WithoutCancel(ctx)
	wait, until := retry.Backoff(50*time.Millisecond, time.Second), time.Now().Add(h.o.StoreRetryFor)
	for {
		_, err := h.changeConversation(ctx, id, func(c *conversation) error {
			c.Items = append(c.Items, items...)
			return nil
		})
		switch status.Code(err) {
		case codes.OK:
			return nil
		case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted:
			if time.Now().Before(until) {
				retry.Sleep(ctx, wait.NextBackOff())
				continue
			}
		}
		h.storeErr.WithLabelValues("conversation_append").Inc()
		h.o.Logger.Error("conversation not updated", "conversation", id, "err", err)
		return fmt.Errorf("%w: %w", errConversationNotUpdated, err)
	}
}

// conversationNotUpdated answers a turn that was generated (and stored)
// but whose items could not be added to its conversation.
func (h *Handler) conversationNotUpdated(w http.ResponseWriter, err error, id string) {
	code, msg := conversationFailure(err, id)
	switch {
	case status.Code(err) == codes.NotFound:
		openai.WriteError(w, http.StatusNotFound, openai.TypeInvalidRequest, code, "conversation", msg, 0)
	case errors.Is(err, errConversationFull), status.Code(err) == codes.InvalidArgument:
		openai.WriteError(w, http.StatusBadRequest, openai.TypeInvalidRequest, code, "conversation", msg, 0)
	default:
		openai.WriteError(w, http.StatusServiceUnavailable, openai.TypeUnavailable, code, "conversation", msg, 1)
	}
}

// conversationFailure is the error code and message of a turn whose items
// did not reach its conversation.
func conversationFailure(err error, id string) (code, msg string) {
	msg = "the response was generated but its items could not be added to conversation " + id
	switch {
	case status.Code(err) == codes.NotFound:
		return "conversation_not_updated", msg + ": the conversation was deleted"
	case errors.Is(err, errConversationFull), status.Code(err) == codes.InvalidArgument:
		return "conversation_too_large", msg + ": it is full"
	}
	return "conversation_not_updated", msg + ": the responses store did not answer; send the request again"
}

// errConversationNotUpdated is a turn whose items could not be added to
// its conversation.
var errConversationNotUpdated = errors.New("conversation not updated")

// readJSONBody decodes a request body into v; false when it was answered.
func (h *Handler) readJSONBody(w http.ResponseWriter, r *http.Request, v any) bool {
	body, ok := h.readBody(w, r)
	if !ok {
		return false
	}
	if len(body) == 0 {
		return true
	}
	if err := json.Unmarshal(body, v); err != nil {
		answerBadJSON(w, err)
		return false
	}
	return true
}

// metadataOK checks metadata; false when it was answered (refused).
func metadataOK(w http.ResponseWriter, md map[string]string) bool {
	if err := checkMetadata(md); err != nil {
		openai.WriteError(w, http.StatusBadRequest, openai.TypeInvalidRequest, "invalid_value", "metadata", err.Error(), 0)
		return false
	}
	return true
}

// checkMetadata applies OpenAI's bounds on metadata.
func checkMetadata(md map[string]string) error {
	if len(md) > maxMetadataPairs {
		return fmt.Errorf("metadata holds %d pairs; at most %d are allowed", len(md), maxMetadataPairs)
	}
	for k, v := range md {
		if utf8.RuneCountInString(k) > maxMetadataKeyLen {
			return fmt.Errorf("metadata key %.20q... is longer than %d characters", k, maxMetadataKeyLen)
		}
		if utf8.RuneCountInString(v) > maxMetadataValueLen {
			return fmt.Errorf("metadata value of %q is longer than %d characters", k, maxMetadataValueLen)
		}
	}
	return nil
}

// parseItems reads the items of a create or an add (1 to 20 messages;
// none when optional).
func parseItems(raw json.RawMessage, optional bool) ([]InputItem, error) {
	if len(raw) == 0 || string(raw) == "null" {
		if optional {
			return nil, nil
		}
		return nil, errors.New("items is required")
	}
	if string(raw) == "[]" && optional {
		return nil, nil
	}
	if raw[0] != '[' {
		return nil, errors.New("items must be a list of messages")
	}
	items, err := parseInput(raw)
	if err != nil {
		return nil, err
	}
	if len(items) > maxItemsPerAdd {
		return nil, fmt.Errorf("%d items; at most %d may be added at a time", len(items), maxItemsPerAdd)
	}
	return items, nil
}

func (h *Handler) createConversation(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Items    json.RawMessage   `json:"items"`
		Metadata map[string]string `json:"metadata"`
	}
	if !h.readJSONBody(w, r, &body) {
		return
	}
	if !metadataOK(w, body.Metadata) {
		return
	}
	items, err := parseItems(body.Items, true)
	if err != nil {
		openai.WriteError(w, http.StatusBadRequest, openai.TypeInvalidRequest, "invalid_value", "items", err.Error(), 0)
		return
	}
	now := time.Now()
	c := &conversation{CreatedAt: now.Unix(), Metadata: body.Metadata, Items: items, Owner: auth.Principal(r.Context())}
	if c.Items == nil {
		c.Items = []InputItem{}
	}
	data, err := json.Marshal(c)
	if err != nil {
		openai.WriteError(w, http.StatusInternalServerError, openai.TypeServer, "internal_error", "", err.Error(), 0)
		return
	}
	id := newID("conv_")
	ctx, cancel := h.storeCtx(r)
	defer cancel()
	if _, err := h.o.Store.Put(ctx, &responsesv1.PutRequest{Response: &responsesv1.StoredResponse{Id: id, CreatedAtUnixMs: now.UnixMilli(), Data: data}}); err != nil {
		h.conversationError(w, err, id, "")
		return
	}
	writeJSON(w, http.StatusOK, c.object(id))
}

func (h *Handler) getConversation(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ctx, cancel := h.storeCtx(r)
	defer cancel()
	c, _, err := h.loadConversation(ctx, id)
	if err != nil {
		h.conversationError(w, err, id, "")
		return
	}
	writeJSON(w, http.StatusOK, c.object(id))
}

func (h *Handler) updateConversation(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var body struct {
		Metadata map[string]string `json:"metadata"`
	}
	if !h.readJSONBody(w, r, &body) {
		return
	}
	if body.Metadata == nil {
		openai.WriteError(w, http.StatusBadRequest, openai.TypeInvalidRequest, "missing_required_parameter", "metadata", "you must provide metadata", 0)
		return
	}
	if !metadataOK(w, body.Metadata) {
		return
	}
	c, err := h.changeConversation(r.Context(), id, func(c *conversation) error {
		c.Metadata = body.Metadata
		return nil
	})
	if err != nil {
		h.conversationError(w, err, id, "")
		return
	}
	writeJSON(w, http.StatusOK, c.object(id))
}

func (h *Handler) deleteConversation(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ctx, cancel := h.storeCtx(r)
	defer cancel()
	if _, _, err := h.loadConversation(ctx, id); err != nil {
		h.conversationError(w, err, id, "")
		return
	}
	if _, err := h.o.Store.Delete(ctx, &responsesv1.DeleteRequest{Id: id}); err != nil {
		h.conversationError(w, err, id, "")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "conversation.deleted", "deleted": true})
}

func (h *Handler) listConversationItems(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	page, ok := readPageQuery(w, r)
	if !ok {
		return
	}
	ctx, cancel := h.storeCtx(r)
	defer cancel()
	c, _, err := h.loadConversation(ctx, id)
	if err != nil {
		h.conversationError(w, err, id, "")
		return
	}
	writeJSON(w, http.StatusOK, page.of(c.Items))
}

func (h *Handler) addConversationItems(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var body struct {
		Items json.RawMessage `json:"items"`
	}
	if !h.readJSONBody(w, r, &body) {
		return
	}
	items, err := parseItems(body.Items, false)
	if err != nil {
		openai.WriteError(w, http.StatusBadRequest, openai.TypeInvalidRequest, "invalid_value", "items", err.Error(), 0)
		return
	}
	if _, err := h.changeConversation(r.Context(), id, func(c *conversation) error {
		c.Items = append(c.Items, items...)
		return nil
	}); err != nil {
		h.conversationError(w, err, id, "")
		return
	}
	writeJSON(w, http.StatusOK, itemList(items, false))
}

func (h *Handler) getConversationItem(w http.ResponseWriter, r *http.Request) {
	id, itemID := r.PathValue("id"), r.PathValue("item")
	ctx, cancel := h.storeCtx(r)
	defer cancel()
	c, _, err := h.loadConversation(ctx, id)
	if err != nil {
		h.conversationError(w, err, id, "")
		return
	}
	for _, it := range c.Items {
		if it.ID == itemID {
			writeJSON(w, http.StatusOK, it)
			return
		}
	}
	openai.WriteError(w, http.StatusNotFound, openai.TypeInvalidRequest, "not_found", "", fmt.Sprintf("Item with id '%s' not found.", itemID), 0)
}

func (h *Handler) deleteConversationItem(w http.ResponseWriter, r *http.Request) {
	id, itemID := r.PathValue("id"), r.PathValue("item")
	errNoItem := errors.New("no such item")
	c, err := h.changeConversation(r.Context(), id, func(c *conversation) error {
		for i, it := range c.Items {
			if it.ID == itemID {
				c.Items = append(c.Items[:i], c.Items[i+1:]...)
				return nil
			}
		}
		return errNoItem
	})
	if errors.Is(err, errNoItem) {
		openai.WriteError(w, http.StatusNotFound, openai.TypeInvalidRequest, "not_found", "", fmt.Sprintf("Item with id '%s' not found.", itemID), 0)
		return
	}
	if err != nil {
		h.conversationError(w, err, id, "")
		return
	}
	writeJSON(w, http.StatusOK, c.object(id))
}

// conversationOf reads a create request's conversation field: an id, or
// an object with one.
func conversationOf(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var id string
	if err := json.Unmarshal(raw, &id); err == nil {
		if id == "" {
			return "", errors.New("conversation must not be empty")
		}
		return id, nil
	}
	var obj struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.ID == "" {
		return "", errors.New(`conversation must be a conversation id or {"id": "<conversation id>"}`)
	}
	return obj.ID, nil
}

// loadConversationContext reads the conversation a create request names
// as the context of its turn; false when it was answered (refused).
func (h *Handler) loadConversationContext(w http.ResponseWriter, r *http.Request, id string) ([]record, bool) {
	ctx, cancel := h.storeCtx(r)
	defer cancel()
	c, _, err := h.loadConversation(ctx, id)
	if err != nil {
		h.conversationError(w, err, id, "conversation")
		return nil, false
	}
	return []record{{Input: c.Items}}, true
}
