package responses

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	responsesv1 "github.com/hermod/hermod/libs/api/hermod/responses/v1"
	"github.com/hermod/hermod/libs/openai"
	"github.com/hermod/hermod/services/gateway/internal/auth"
)

// A background response (background: true) is stored queued and handed
// to the responses service, whose runners send the request back to a
// gateway with RunHeader ("<id> <token>") until it is answered: that
// gateway serves it as the response id and stores the outcome only while
// the run still holds the job (so a cancelled response stays cancelled).
// Retrieval reads the run's state while the stored response is queued.

// RunHeader names the background run a request is.
const RunHeader = "Hermod-Background-Run"

// backgroundRun is the run a request carries.
type backgroundRun struct {
	id, token string
	queued    *record
}

// submit stores a background request queued and hands it to the
// responses service; false when it was answered (refused).
func (h *Handler) submit(w http.ResponseWriter, r *http.Request, t *turn, body []byte) (*Response, bool) {
	queued := t.response("", "", "queued", nil)
	data, err := json.Marshal(record{Input: t.input, Response: queued, Owner: t.owner})
	if err != nil {
		openai.WriteError(w, http.StatusInternalServerError, openai.TypeServer, "internal_error", "", err.Error(), 0)
		return nil, false
	}
	ctx, cancel := h.storeCtx(r)
	defer cancel()
	_, err = h.o.Store.Submit(ctx, &responsesv1.SubmitRequest{
		Response: &responsesv1.StoredResponse{Id: t.id, PreviousResponseId: t.req.PreviousResponseID, CreatedAtUnixMs: t.created.UnixMilli(), Data: data},
		Request:  body, Headers: runHeaders(r.Header),
	})
	if status.Code(err) == codes.FailedPrecondition {
		openai.WriteError(w, http.StatusBadRequest, openai.TypeInvalidRequest, "unsupported_value", "background", status.Convert(err).Message(), 0)
		return nil, false
	}
	if err != nil {
		h.storeError(w, err, t.id, "")
		return nil, false
	}
	return queued, true
}

// runHeaders are the request headers a run sends again: the client's
// credentials and routing hints, not the connection's own.
func runHeaders(in http.Header) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		switch http.CanonicalHeaderKey(k) {
		case "Connection", "Content-Length", "Transfer-Encoding", "Host", "Accept-Encoding", "Keep-Alive", "Te", "Upgrade",
			"Proxy-Authorization", "Proxy-Connection", RunHeader:
			continue
		}
		out[k] = strings.Join(v, ", ")
	}
	return out
}

type runKey struct{}

// AuthenticateRuns admits the background runs the responses service
// sends (RunHeader) without the client's credentials: the store, which
// knows each run's token, vouches for a run, which then acts for the
// response's owner and goes to open. Every other request goes to guarded.
func (h *Handler) AuthenticateRuns(guarded, open http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := r.Header.Get(RunHeader)
		if v == "" {
			guarded.ServeHTTP(w, r)
			return
		}
		if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" {
			openai.WriteError(w, http.StatusBadRequest, openai.TypeInvalidRequest, "invalid_request", "", RunHeader+" is only for POST /v1/responses", 0)
			return
		}
		if h.noStore(w) {
			return
		}
		run, ok := h.verifyRun(w, r, v)
		if !ok {
			return
		}
		ctx := auth.WithPrincipal(context.WithValue(r.Context(), runKey{}, run), run.queued.Owner)
		open.ServeHTTP(w, r.WithContext(ctx))
	})
}

// verifyRun has the store vouch for a run ("<id> <token>") and loads its
// queued response; false when it was answered (refused).
func (h *Handler) verifyRun(w http.ResponseWriter, r *http.Request, v string) (*backgroundRun, bool) {
	id, token, ok := strings.Cut(v, " ")
	if !ok || id == "" || token == "" {
		openai.WriteError(w, http.StatusBadRequest, openai.TypeInvalidRequest, "invalid_value", "", RunHeader+" must be '<response id> <run token>'", 0)
		return nil, false
	}
	ctx, cancel := h.storeCtx(r)
	defer cancel()
	_, err := h.o.Store.GetBackground(ctx, &responsesv1.GetBackgroundRequest{Id: id, RunToken: token})
	var rec *record
	if err == nil {
		rec, err = h.loadAny(ctx, id)
	}
	if !h.commitRun(w, err, id) {
		return nil, false
	}
	return &backgroundRun{id: id, token: token, queued: rec}, true
}

// runOf is the verified background run a request is, if any; false when
// it was answered (a run header that AuthenticateRuns did not verify).
func (h *Handler) runOf(w http.ResponseWriter, r *http.Request) (*backgroundRun, bool) {
	run, _ := r.Context().Value(runKey{}).(*backgroundRun)
	if run == nil && r.Header.Get(RunHeader) != "" {
		openai.WriteError(w, http.StatusForbidden, openai.TypeInvalidRequest, "invalid_request", "", RunHeader+" was not verified", 0)
		return nil, false
	}
	return run, true
}

// commitRun stores a run's outcome; false when it was answered: 409 when
// the run no longer holds the job (cancelled), 503 when the store did not
// take it (the runner tries again).
func (h *Handler) commitRun(w http.ResponseWriter, err error, id string) bool {
	switch {
	case err == nil:
		return true
	case status.Code(err) == codes.FailedPrecondition:
		openai.WriteError(w, http.StatusConflict, openai.TypeInvalidRequest, "run_superseded", "", "background response "+id+" was cancelled or is run elsewhere", 0)
	default:
		h.storeError(w, err, id, "")
	}
	return false
}

// withRunState gives a stored background response the state of its run
// while the record still says queued: in progress, failed or cancelled.
func (h *Handler) withRunState(ctx context.Context, rec *record) (*record, error) {
	resp := rec.Response
	if !resp.Background || (resp.Status != "queued" && resp.Status != "in_progress") {
		return rec, nil
	}
	res, err := h.o.Store.GetBackground(ctx, &responsesv1.GetBackgroundRequest{Id: resp.ID})
	if status.Code(err) == codes.NotFound {
		return rec, nil
	}
	if err != nil {
		return nil, err
	}
	job := res.GetJob()
	switch job.GetStatus() {
	case "completed":
		return h.load(ctx, resp.ID) // finished since it was read
	case "in_progress", "cancelled", "failed":
		out := *resp
		out.Status = job.GetStatus()
		if job.GetStatus() == "failed" {
			out.Error = &ResponseError{Code: "server_error", Message: job.GetError()}
		}
		return &record{Input: rec.Input, Response: &out}, nil
	}
	return rec, nil
}

// cancelBackground cancels a background response and answers its state.
func (h *Handler) cancelBackground(w http.ResponseWriter, r *http.Request, rec *record) {
	ctx, cancel := h.storeCtx(r)
	defer cancel()
	if _, err := h.o.Store.Cancel(ctx, &responsesv1.CancelRequest{Id: rec.Response.ID}); err != nil && status.Code(err) != codes.NotFound {
		h.storeError(w, err, rec.Response.ID, "")
		return
	}
	out, err := h.withRunState(ctx, rec)
	if err != nil {
		h.storeError(w, err, rec.Response.ID, "")
		return
	}
	writeJSON(w, http.StatusOK, out.Response)
}
