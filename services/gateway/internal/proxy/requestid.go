package proxy

import (
	"net/http"

	"github.com/hermod/hermod/libs/requestid"
)

// RequestIDHeader is the request id header, kept when the client sends a
// valid one.
const RequestIDHeader = "X-Request-Id"

// PriorityHeader is the header (as the picker sees it, lower case) that
// carries the priority flow control classified a request with:
// x-gateway-inference-priority, or the priority of the objective
// x-gateway-inference-objective names.
const PriorityHeader = "x-gateway-inference-priority"

// RequestIDs gives every request an id before next serves it: the client's
// x-request-id when it is valid (1 to 128 characters of letters, digits and
// -_.:/+=), a new random one otherwise. The id is on the request (for the
// handlers) and on the response, errors included.
func RequestIDs(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(RequestIDHeader)
		if !requestid.Valid(id) {
			id = requestid.New()
			r.Header.Set(RequestIDHeader, id)
		}
		w.Header().Set(RequestIDHeader, id)
		next.ServeHTTP(w, r)
	})
}

// DroppedReasonHeader tells the client why flow control did not serve its
// request, as llm-d's router does: DroppedSaturated (shed, refused while
// saturated, or its band or the queue was full: 429, or 503 without
// queueing), DroppedTTLExpired (it waited its time to live in the queue
// while the pool had endpoints: 429) or DroppedNoEndpoints (the pool has
// no endpoint, and the wait for one ran out: 503).
const (
	DroppedReasonHeader = "x-llm-d-request-dropped-reason"
	DroppedSaturated    = "rejected-saturated"
	DroppedTTLExpired   = "rejected-ttl-expired"
	DroppedNoEndpoints  = "rejected-no-endpoints"
)
