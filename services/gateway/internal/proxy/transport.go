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

// DefaultFirstByteTimeout bounds the wait for an endpoint's answer to
// begin (its response headers): generous, since a non-streamed generation
// answers only at its end, but an endpoint that accepts a request and
// never answers no longer pins the request, its flow-control slot and its
// in-flight count until the client leaves.
const DefaultFirstByteTimeout = 10 * time.Minute

// NewTransport returns the transport to model servers: keep-alive pools
// sized for many concurrent requests per endpoint, a short connect
// timeout, firstByte (0: DefaultFirstByteTimeout) as the response-header
// timeout (an endpoint past it is an error like a refused connection: the
// next target is tried), bodies passed through uncompressed. With
// tracing, each request is a span whose context the model server gets.
func NewTransport(tracing bool, firstByte time.Duration) http.RoundTripper {
	if firstByte <= 0 {
		firstByte = DefaultFirstByteTimeout
	}
	t := &http.Transport{
		ResponseHeaderTimeout: firstByte,
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
