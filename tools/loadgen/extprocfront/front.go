// Package extprocfront plays Envoy's part in front of an endpoint
// picker's ext_proc server, so that a load generator can drive any picker
// that speaks Envoy's ExternalProcessor (Hermod's, the llm-d router's EPP)
// the way Envoy would, and only the router differs: an HTTP proxy with the
// ext_proc filter (request and response bodies FULL_DUPLEX_STREAMED) and
// an ORIGINAL_DST cluster that sends each request to the address in
// x-gateway-destination-endpoint (checked against the envoy.lb metadata;
// the next address when a connection fails, as override_host does).
package extprocfront

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
)

// DestinationHeader is where a picker names the endpoints of a request.
const DestinationHeader = "X-Gateway-Destination-Endpoint"

// Options configure a Front.
type Options struct {
	// Timeout bounds each request, the picker's stream included (0: 1m).
	Timeout time.Duration
	// OnError, when set, hears every request the front could not carry
	// through (a protocol violation by the picker, say); the client then
	// got what could be sent.
	OnError func(r *http.Request, err error)
}

// Front is the proxy; its ServeHTTP serves clients. Safe for concurrent
// use.
type Front struct {
	o        Options
	ext      extprocv3.ExternalProcessorClient
	upstream *http.Transport
	maxChunk atomic.Int64

	requests, immediate, upstreamErrs atomic.Int64
	mu                                sync.Mutex
	served                            map[string]int64
	decisions                         []time.Duration
}

// maxDecisions bounds the decision times a front keeps.
const maxDecisions = 1 << 20

// ServedByHeader names, on each answer, the endpoint that served it
// (host:port), unless the picker set it already: the header Hermod's
// gateway answers with, so a load generator tells the pods apart
// whatever the router.
const ServedByHeader = "X-Decoder-Host-Port"

// New returns a front driving the ExternalProcessor on conn.
func New(conn grpc.ClientConnInterface, o Options) *Front {
	if o.Timeout <= 0 {
		o.Timeout = time.Minute
	}
	return &Front{o: o, ext: extprocv3.NewExternalProcessorClient(conn),
		upstream: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 64}, served: map[string]int64{}}
}

// Close closes the front's idle connections to the endpoints.
func (f *Front) Close() { f.upstream.CloseIdleConnections() }

// Seen is what the front saw.
type Seen struct {
	// Requests is every request served; Immediate those the picker
	// answered itself (a refusal); UpstreamErrors those no endpoint took.
	Requests, Immediate, UpstreamErrors int64
	// Served counts requests by the endpoint that served them.
	Served map[string]int64
	// MaxChunk is the largest body chunk the picker sent back.
	MaxChunk int64
	// Decisions are how long the picker took to route each request, as
	// Envoy waits for it: from the stream's opening (the request's
	// headers and body sent as they arrive) to the answer naming its
	// endpoint, in the order they came (at most the first 1,048,576).
	Decisions []time.Duration
}

// Seen returns what the front saw so far.
func (f *Front) Seen() Seen {
	f.mu.Lock()
	served := make(map[string]int64, len(f.served))
	for k, v := range f.served {
		served[k] = v
	}
	decisions := append([]time.Duration(nil), f.decisions...)
	f.mu.Unlock()
	return Seen{Requests: f.requests.Load(), Immediate: f.immediate.Load(), UpstreamErrors: f.upstreamErrs.Load(), Served: served, MaxChunk: f.maxChunk.Load(), Decisions: decisions}
}

// fullDuplex is the filter's processing mode, as Envoy announces it in
// its first message.
var fullDuplex = &extprocv3.ProtocolConfiguration{
	RequestBodyMode:  filterv3.ProcessingMode_FULL_DUPLEX_STREAMED,
	ResponseBodyMode: filterv3.ProcessingMode_FULL_DUPLEX_STREAMED,
}

// ServeHTTP implements http.Handler.
func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	ctx, cancel := context.WithTimeout(r.Context(), f.o.Timeout)
	defer cancel()
	if err := f.serve(ctx, w, r); err != nil && r.Context().Err() == nil && f.o.OnError != nil {
		f.o.OnError(r, err)
	}
}

// exchange is one request's ext_proc stream.
type exchange struct {
	st       extprocv3.ExternalProcessor_ProcessClient
	maxChunk *atomic.Int64
}

func (f *Front) serve(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	opened := time.Now()
	st, err := f.ext.Process(ctx)
	if err != nil {
		return fmt.Errorf("open the ext_proc stream: %w", err)
	}
	x := &exchange{st: st, maxChunk: &f.maxChunk}
	hs := []string{":method", r.Method, ":path", r.URL.RequestURI(), ":authority", r.Host, ":scheme", "http"}
	for k, vs := range r.Header {
		for _, v := range vs {
			hs = append(hs, strings.ToLower(k), v)
		}
	}
	if err := st.Send(&extprocv3.ProcessingRequest{ProtocolConfig: fullDuplex, Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: headerMap(hs...)}}}); err != nil {
		return fmt.Errorf("send the request headers: %w", err)
	}
	// In full duplex the body goes to the processor as it arrives, without
	// waiting for the headers' answer.
	sent := make(chan error, 1)
	go func() { sent <- x.sendBody(r.Body) }()
	answer, err := st.Recv()
	if err != nil {
		return errors.Join(fmt.Errorf("the request headers' answer: %w", err), <-sent)
	}
	if ir := answer.GetImmediateResponse(); ir != nil {
		if err := <-sent; err != nil {
			return err
		}
		f.immediate.Add(1)
		writeImmediate(w, ir)
		return nil
	}
	decided := time.Since(opened)
	f.mu.Lock()
	if len(f.decisions) < maxDecisions {
		f.decisions = append(f.decisions, decided)
	}
	f.mu.Unlock()
	m := answer.GetRequestHeaders().GetResponse().GetHeaderMutation()
	out := r.Header.Clone()
	applyMutation(out, m)
	dest := out.Get(DestinationHeader)
	md := answer.GetDynamicMetadata().GetFields()["envoy.lb"].GetStructValue().GetFields()["x-gateway-destination-endpoint"].GetStringValue()
	if dest == "" || dest != md {
		return errors.Join(fmt.Errorf("destination header %q, metadata %q", dest, md), <-sent)
	}
	body, err := x.recvBody(true)
	if serr := <-sent; serr != nil {
		return serr
	}
	if err != nil {
		return err
	}
	resp, served, err := f.forward(ctx, r, out, dest, body)
	if err != nil {
		f.upstreamErrs.Add(1)
		// Envoy's local reply goes through the filter's response path too.
		resp = &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{"Content-Type": {"text/plain"}},
			Body: io.NopCloser(strings.NewReader("upstream connect error"))}
	}
	defer resp.Body.Close()
	if err == nil {
		f.mu.Lock()
		f.served[served]++
		f.mu.Unlock()
	}
	if err == nil && resp.Header.Get(ServedByHeader) == "" {
		resp.Header.Set(ServedByHeader, served)
	}
	return x.relay(w, resp)
}

// forward sends the request to the first destination that accepts a
// connection, and names it.
func (f *Front) forward(ctx context.Context, r *http.Request, h http.Header, dest string, body []byte) (*http.Response, string, error) {
	var lastErr error
	for _, addr := range strings.Split(dest, ",") {
		req, err := http.NewRequestWithContext(ctx, r.Method, "http://"+addr+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			return nil, "", err
		}
		req.Header = h.Clone()
		if cl := h.Get("Content-Length"); cl != strconv.Itoa(len(body)) {
			return nil, "", fmt.Errorf("content-length %q for a body of %d bytes", cl, len(body))
		}
		req.ContentLength = int64(len(body))
		resp, err := f.upstream.RoundTrip(req)
		if err == nil {
			return resp, addr, nil
		}
		lastErr = err
	}
	return nil, "", lastErr
}

// sendBody streams the client's body to the processor, 16 KiB at a time.
func (x *exchange) sendBody(body io.Reader) error {
	buf := make([]byte, 16<<10)
	for {
		n, err := io.ReadFull(body, buf)
		eos := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
		if err != nil && !eos {
			return fmt.Errorf("read the client's body: %w", err)
		}
		if serr := x.st.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
			RequestBody: &extprocv3.HttpBody{Body: append([]byte(nil), buf[:n]...), EndOfStream: eos}}}); serr != nil {
			if errors.Is(serr, io.EOF) {
				return nil // the processor answered and ended the stream
			}
			return fmt.Errorf("send a body chunk: %w", serr)
		}
		if eos {
			return nil
		}
	}
}

// recvBody reads streamed body chunks up to the one with end_of_stream.
func (x *exchange) recvBody(request bool) ([]byte, error) {
	var body []byte
	for {
		r, err := x.st.Recv()
		if err != nil {
			return nil, fmt.Errorf("receive a body chunk: %w", err)
		}
		br := r.GetResponseBody()
		if request {
			br = r.GetRequestBody()
		}
		sr := br.GetResponse().GetBodyMutation().GetStreamedResponse()
		if sr == nil {
			return nil, fmt.Errorf("want a streamed body chunk, got %v", r)
		}
		for {
			old := x.maxChunk.Load()
			if int64(len(sr.GetBody())) <= old || x.maxChunk.CompareAndSwap(old, int64(len(sr.GetBody()))) {
				break
			}
		}
		body = append(body, sr.GetBody()...)
		if sr.GetEndOfStream() {
			return body, nil
		}
	}
}

// relay passes the endpoint's response through the processor to the
// client: headers (mutated), then every chunk as the processor streams
// it back, flushed at once.
func (x *exchange) relay(w http.ResponseWriter, resp *http.Response) error {
	hs := []string{":status", strconv.Itoa(resp.StatusCode)}
	for k, vs := range resp.Header {
		for _, v := range vs {
			hs = append(hs, strings.ToLower(k), v)
		}
	}
	if err := x.st.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: headerMap(hs...)}}}); err != nil {
		return fmt.Errorf("send the response headers: %w", err)
	}
	answer, err := x.st.Recv()
	if err != nil {
		return fmt.Errorf("the response headers' answer: %w", err)
	}
	dst := w.Header()
	for k, vs := range resp.Header {
		dst[k] = vs
	}
	dst.Del("Content-Length") // the body is streamed back
	applyMutation(dst, answer.GetResponseHeaders().GetResponse().GetHeaderMutation())
	w.WriteHeader(resp.StatusCode)
	flush := func() { _ = http.NewResponseController(w).Flush() }
	flush()
	buf := make([]byte, 32<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		eos := errors.Is(rerr, io.EOF)
		if rerr != nil && !eos {
			return fmt.Errorf("read the endpoint's response: %w", rerr)
		}
		if n == 0 && !eos {
			continue
		}
		if err := x.st.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
			ResponseBody: &extprocv3.HttpBody{Body: append([]byte(nil), buf[:n]...), EndOfStream: eos}}}); err != nil {
			return fmt.Errorf("send a response chunk: %w", err)
		}
		back, err := x.recvUpTo(n, eos)
		if err != nil {
			return err
		}
		if _, err := w.Write(back); err != nil {
			return fmt.Errorf("write to the client: %w", err) // not reported when it went away
		}
		flush()
		if eos {
			break
		}
	}
	if err := x.st.CloseSend(); err != nil {
		return fmt.Errorf("close the ext_proc stream: %w", err)
	}
	if _, err := x.st.Recv(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("the processor did not end the stream: %w", err)
	}
	return nil
}

// recvUpTo reads the echo of a response chunk of n bytes (several
// messages when the processor splits it).
func (x *exchange) recvUpTo(n int, eos bool) ([]byte, error) {
	var out []byte
	for {
		r, err := x.st.Recv()
		if err != nil {
			return nil, fmt.Errorf("receive a response chunk: %w", err)
		}
		sr := r.GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse()
		if sr == nil {
			return nil, fmt.Errorf("want a streamed response chunk, got %v", r)
		}
		out = append(out, sr.GetBody()...)
		if (eos && sr.GetEndOfStream()) || (!eos && len(out) >= n) {
			return out, nil
		}
	}
}

func headerMap(kv ...string) *corev3.HeaderMap {
	hm := &corev3.HeaderMap{}
	for i := 0; i+1 < len(kv); i += 2 {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	return hm
}

// applyMutation removes, then sets, as Envoy applies a header mutation;
// pseudo-headers are left alone.
func applyMutation(h http.Header, m *extprocv3.HeaderMutation) {
	for _, name := range m.GetRemoveHeaders() {
		h.Del(name)
	}
	for _, o := range m.GetSetHeaders() {
		k := o.GetHeader().GetKey()
		if strings.HasPrefix(k, ":") {
			continue
		}
		v := o.GetHeader().GetValue()
		if raw := o.GetHeader().GetRawValue(); len(raw) > 0 {
			v = string(raw)
		}
		h.Set(k, v)
	}
}

func writeImmediate(w http.ResponseWriter, ir *extprocv3.ImmediateResponse) {
	applyMutation(w.Header(), ir.GetHeaders())
	w.WriteHeader(int(ir.GetStatus().GetCode()))
	_, _ = w.Write(ir.GetBody())
}
