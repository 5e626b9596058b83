package proxy

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/hermod/hermod/libs/reservedheaders"
)

// hopHeaders are meaningful for one connection only (RFC 9110 7.6.1);
// they are never forwarded.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// framingHeaders belong to the gateway's own connections: no
// configuration forwards them.
var framingHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length", "Host"}

// gatewayHop reports whether a request header is for the gateway's hop
// only unless --forward-headers names it: the client's cookies and
// proxy credentials.
func gatewayHop(name string) bool {
	return name == "Cookie" || strings.HasPrefix(name, "Proxy-")
}

// CheckForwardHeaders checks a --forward-headers list: a reserved routing
// header or one of a connection's framing cannot be forwarded.
func CheckForwardHeaders(names []string) error {
	for _, name := range names {
		c := http.CanonicalHeaderKey(strings.TrimSpace(name))
		switch {
		case c == "":
			return fmt.Errorf("forward headers: an empty name")
		case reservedheaders.Is(c):
			return fmt.Errorf("forward headers: %s is a routing header only Hermod sets; a client's copy is never forwarded", c)
		case containsFold(framingHeaders, c):
			return fmt.Errorf("forward headers: %s belongs to the client's connection and cannot be forwarded", c)
		}
	}
	return nil
}

func containsFold(list []string, name string) bool {
	for _, s := range list {
		if strings.EqualFold(s, name) {
			return true
		}
	}
	return false
}

// upstreamHeaders copies the client's request headers to a model
// server's request: without hop-by-hop headers, without the routing
// headers only Hermod sets (whatever the configuration), and without the
// gateway hop's own (Cookie, Proxy-*) unless forwarded by name.
func (h *Handler) upstreamHeaders(dst, src http.Header) {
	for k, v := range src {
		if reservedheaders.Is(k) || (gatewayHop(k) && !h.forwarded[k]) {
			continue
		}
		dst[k] = append(dst[k][:0:0], v...)
	}
	for _, f := range src.Values("Connection") {
		for name := range strings.SplitSeq(f, ",") {
			dst.Del(strings.TrimSpace(name))
		}
	}
	for _, k := range hopHeaders {
		if k == "Proxy-Authorization" && h.forwarded[k] {
			continue
		}
		dst.Del(k)
	}
}

// pickHeaders are the request headers the picker sees (lower-case names,
// first values): no credentials, and no reserved routing header a client
// sent.
func pickHeaders(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		if len(v) > 0 && !reservedheaders.Unseen(k) && !reservedheaders.Is(k) {
			out[strings.ToLower(k)] = v[0]
		}
	}
	return out
}

// copyHeaders copies a model server's response headers into the
// client's, without hop-by-hop headers.
func copyHeaders(dst, src http.Header) {
	for k, v := range src {
		dst[k] = append(dst[k][:0:0], v...)
	}
	for _, f := range src.Values("Connection") {
		for name := range strings.SplitSeq(f, ",") {
			dst.Del(strings.TrimSpace(name))
		}
	}
	for _, k := range hopHeaders {
		dst.Del(k)
	}
}
