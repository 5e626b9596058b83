package responses

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
)

// replay streams a stored response as the events its creation streamed
// (GET /v1/responses/{id}?stream=true): created, in progress, each output
// item with its text, then its final state. starting_after skips the
// events up to that sequence number.
func replay(w http.ResponseWriter, resp *Response, startingAfter int) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	replayEvents(w, resp, startingAfter)
}

// replayEvents writes replay's events.
func replayEvents(w http.ResponseWriter, resp *Response, startingAfter int) {
	seq := 0
	emit := func(typ string, fields map[string]any) {
		defer func() { seq++ }()
		if seq <= startingAfter {
			return
		}
		_, _ = w.Write(frameOf(typ, seq, fields))
	}
	inProgress := *resp
	inProgress.Status, inProgress.Output, inProgress.Usage, inProgress.Error, inProgress.IncompleteDetails = "in_progress", []OutputItem{}, nil, nil, nil
	emit("response.created", map[string]any{"response": inProgress})
	emit("response.in_progress", map[string]any{"response": inProgress})
	for i, item := range resp.Output {
		added := item
		added.Status, added.Content = "in_progress", []OutputText{}
		emit("response.output_item.added", map[string]any{"output_index": i, "item": added})
		for j, part := range item.Content {
			emit("response.content_part.added", map[string]any{"item_id": item.ID, "output_index": i, "content_index": j,
				"part": OutputText{Type: part.Type, Text: "", Annotations: []any{}}})
			if part.Text != "" {
				emit("response.output_text.delta", map[string]any{"item_id": item.ID, "output_index": i, "content_index": j, "delta": part.Text})
			}
			emit("response.output_text.done", map[string]any{"item_id": item.ID, "output_index": i, "content_index": j, "text": part.Text})
			emit("response.content_part.done", map[string]any{"item_id": item.ID, "output_index": i, "content_index": j, "part": part})
		}
		emit("response.output_item.done", map[string]any{"output_index": i, "item": item})
	}
	final := "response.completed"
	switch resp.Status {
	case "incomplete":
		final = "response.incomplete"
	case "failed":
		final = "response.failed"
	}
	emit(final, map[string]any{"response": resp})
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// retrieveOptions reads a retrieve's stream and starting_after (-1:
// none; ok false when it is not a non-negative integer): query
// parameters, as OpenAI documents them, or fields of a JSON body, as
// OpenAI's SDKs send them on this GET.
func retrieveOptions(r *http.Request) (stream bool, after int, ok bool) {
	q := r.URL.Query()
	stream, _ = strconv.ParseBool(q.Get("stream"))
	after, ok = -1, true
	if v := q.Get("starting_after"); v != "" {
		n, err := strconv.Atoi(v)
		after, ok = n, err == nil && n >= 0
	}
	if r.Body == nil || r.ContentLength == 0 {
		return stream, after, ok
	}
	var body struct {
		Stream        *bool `json:"stream"`
		StartingAfter *int  `json:"starting_after"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&body); err != nil {
		return stream, after, ok
	}
	if body.Stream != nil {
		stream = *body.Stream
	}
	if body.StartingAfter != nil {
		after, ok = *body.StartingAfter, *body.StartingAfter >= 0
	}
	return stream, after, ok
}
