// Package reservedheaders names the request headers that only Hermod may
// set: the routing headers its ways in (the gateway, the picker's Envoy
// ext_proc server) and its plugins write for the data plane and the
// model servers. A client's copies of them are removed at every way in,
// whatever the configuration, so that a client can neither choose where
// its request goes nor tell a pod (or the routing sidecar in front of it)
// where to prefill, encode or forward. It also names the headers a pick
// never sees (Unseen): credentials and transport headers.
package reservedheaders

import (
	"net/http"
	"slices"
	"strings"
)

// The reserved header names Hermod writes (lower case, as HTTP/2 and
// Envoy carry them).
const (
	// Destination carries the chosen endpoints to the data plane
	// (GIE's endpoint-picker protocol); its -subset and -served variants
	// are reserved by Prefixes.
	Destination = "x-gateway-destination-endpoint"
	// PrefillEndpoint and EncodeEndpoints tell a decode pod where the
	// prefill and encode stages ran (disagg-headers-handler).
	PrefillEndpoint = "mif-prefill-endpoint"
	EncodeEndpoints = "mif-encode-endpoints"
	// DataParallelHostPort carries the decode rank's own address when the
	// target is rewritten to its primary port (pd-profile-handler).
	DataParallelHostPort = "x-data-parallel-host-port"
	// DecoderHostPort and PrefillerHostPort name the pods that served
	// (response-header-handler, on responses); llm-d's routing sidecar
	// reads x-prefiller-host-port (and, before it, x-prefiller-url) on
	// requests as the prefill pod to call.
	DecoderHostPort   = "x-decoder-host-port"
	PrefillerHostPort = "x-prefiller-host-port"
	PrefillerURL      = "x-prefiller-url"
	// EncoderHostsPorts is llm-d's routing sidecar's list of encode pods.
	EncoderHostsPorts = "x-encoder-hosts-ports"
	// KVCacheSourceHostPort names the peer the routing sidecar pulls the
	// prompt's cached KV blocks from (p2p-source-producer).
	KVCacheSourceHostPort = "x-kv-cache-source-host-port"
	// DroppedReason is llm-d's answer of why flow control refused a
	// request (on responses).
	DroppedReason = "x-llm-d-request-dropped-reason"
)

// Names are the reserved headers by exact name; Prefixes reserve every
// header whose name starts with one of them.
var (
	Names    = []string{Destination, PrefillEndpoint, EncodeEndpoints, DataParallelHostPort, DecoderHostPort, PrefillerHostPort, PrefillerURL, EncoderHostsPorts, KVCacheSourceHostPort, DroppedReason}
	Prefixes = []string{Destination, "mif-"}
)

// Is reports whether a header name (any case) is reserved.
func Is(name string) bool {
	name = strings.ToLower(name)
	if slices.Contains(Names, name) {
		return true
	}
	for _, p := range Prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Strip removes every reserved header from h.
func Strip(h http.Header) {
	for k := range h {
		if Is(k) {
			delete(h, k)
		}
	}
}

// In returns the reserved names among the keys of names, lower case and
// sorted; nil when there are none.
func In[M ~map[string]V, V any](names M) []string {
	var out []string
	for k := range names {
		if Is(k) {
			out = append(out, strings.ToLower(k))
		}
	}
	slices.Sort(out)
	return out
}

// unseen are the request headers a pick never sees (lower case): a
// client's credentials, in every way its SDKs send them, and the
// transport's own headers, which say nothing of the request.
var unseen = []string{"authorization", "x-api-key", "proxy-authorization", "cookie",
	"content-length", "content-type", "accept-encoding", "user-agent", "accept", "transfer-encoding", "host"}

// Unseen reports whether a request header (any case) is kept from the
// picker and its plugins: credentials and transport headers.
func Unseen(name string) bool {
	for _, u := range unseen {
		if strings.EqualFold(name, u) {
			return true
		}
	}
	return false
}
