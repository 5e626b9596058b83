package scheduling

import "context"

// ServedVerifier is implemented by plugins that look, when a response's
// headers arrive, at which endpoint the data plane says served the request
// (upstream's destination-endpoint-served-verifier). Only a server on the
// data plane's response path calls them: the picker's Envoy ext_proc
// server, with the dynamic metadata Envoy sends with the response headers.
// The headers they set go to the client with the response.
type ServedVerifier interface {
	Plugin
	VerifyServed(ctx context.Context, resp *ServedResponse)
}

// ServedResponse is what a ServedVerifier is told of a response whose
// headers arrived.
type ServedResponse struct {
	// RequestID is the request's id.
	RequestID string
	// Chosen are the addresses ("host:port") the request was routed to:
	// the primary target first, then the fallbacks.
	Chosen []string
	// Metadata is the dynamic metadata the data plane sent with the
	// response headers, by namespace, as JSON values (map[string]any,
	// string, float64, bool, []any, nil); nil when it sent none.
	Metadata map[string]any
	// Headers collects the response headers verifiers set for the client.
	Headers map[string]string
}

// SetHeader sets a response header for the client.
func (r *ServedResponse) SetHeader(name, value string) {
	if r.Headers == nil {
		r.Headers = make(map[string]string, 1)
	}
	r.Headers[name] = value
}

// VerifiesServed reports whether a plugin of the configuration is a
// ServedVerifier (a response path need not gather what VerifyServed
// reads otherwise).
func (s *Scheduler) VerifiesServed() bool {
	for _, p := range s.plugins {
		if _, ok := p.(ServedVerifier); ok {
			return true
		}
	}
	return false
}

// VerifyServed runs the served verifiers, in declaration order.
func (s *Scheduler) VerifyServed(ctx context.Context, resp *ServedResponse) {
	for _, p := range s.plugins {
		if v, ok := p.(ServedVerifier); ok {
			v.VerifyServed(ctx, resp)
		}
	}
}
