package proxy

import (
	"net/http"

	"github.com/hermod/hermod/libs/requestid"
)

// RequestIDHeader is the request id header: the gateway's own id for each
// request, whatever the client sends.
const RequestIDHeader = "X-Request-Id"

// ClientRequestIDHeader carries the x-request-id a client sent (when
// valid), upstream and back on the response, for the client's
// correlation.
const ClientRequestIDHeader = "X-Client-Request-Id"

// PriorityHeader is the header (as the picker sees it, lower case) that
// carries the priority flow control classified a request with:
// x-gateway-inference-priority, or the priority of the objective
// x-gateway-inference-objective names.
const PriorityHeader = "x-gateway-inference-priority"

// RequestIDs gives every request a new random id before next serves it,
// on the request (for the handlers, the picker and the events) and on the
// response, errors included. The id names the request inside Hermod (its
// decision, its completion, its in-flight lease), so it is never the
// client's: a client reusing one id would otherwise steer its requests
// to one lease and out of the in-flight counts. A valid client
// x-request-id (1 to 128 characters of letters, digits and -_.:/+=) is
// kept as X-Client-Request-Id, upstream and on the response, as Envoy
// keeps an external request id only when told to trust it.
func RequestIDs(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(ClientRequestIDHeader)
		if client := r.Header.Get(RequestIDHeader); requestid.Valid(client) {
			r.Header.Set(ClientRequestIDHeader, client)
			w.Header().Set(ClientRequestIDHeader, client)
		}
		id := requestid.New()
		r.Header.Set(RequestIDHeader, id)
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
