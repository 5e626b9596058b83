package proxy

import (
	"net"
	"net/http"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
)

// DefaultDialTimeout bounds connecting to an endpoint, so that a dead one
// is left for the next fallback quickly.
const DefaultDialTimeout = 2 * time.Second

// NewTransport returns the transport to model servers: keep-alive pools
// sized for many concurrent requests per endpoint, a short connect
// timeout, no response-header timeout (a long non-streamed generation
// answers only at its end), bodies passed through uncompressed. With
// tracing, each request is a span whose context the model server gets.
func NewTransport(tracing bool) http.RoundTripper {
	t := &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: DefaultDialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          4096,
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: 0,
		DisableCompression:    true,
		WriteBufferSize:       64 << 10,
		ReadBufferSize:        64 << 10,
	}
	if tracing {
		return otelhttp.NewTransport(t)
	}
	return t
}
