package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hermod/hermod/testkit/childproc"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
)

// The GIE endpoint-picker protocol end to end: an Envoy stand-in (the
// ext_proc filter in FULL_DUPLEX_STREAMED mode and an ORIGINAL_DST
// cluster) in front of the devstack's sim pods, routed by the running
// hermod-picker with no gateway in the path. Requests are served and
// spread, every one is decided and completed once by the picker itself,
// in-flight counts return to zero, and a picker that sees no endpoint
// answers 503.
func TestExtProcEnvoyMode(t *testing.T) {
	s := startStack(t, "--pods", "3", "--slow-pods", "0", "--speed", "20")
	ev := s.follow(t)
	model := s.state.Model
	picker := s.state.Pickers[0]
	envoy := newEnvoyStandIn(t, s, picker.GRPC)
	viaEnvoy := *s
	viaEnvoy.state.Gateway = envoy.addr

	t.Run("requests are routed, served and completed once", func(t *testing.T) {
		const n = 30
		results := viaEnvoy.load(context.Background(), n, 6, func(i int) (string, string, bool) { return mixedRequest(model, i) }, nil)
		served := map[string]int{}
		for i, r := range results {
			if !r.ok() {
				t.Fatalf("request %d (stream %t): status %d, %v: %s", i, r.streamed, r.status, r.err, r.body)
			}
			if r.requestID == "" || r.servedBy == "" {
				t.Fatalf("request %d: no x-request-id or x-decoder-host-port from the picker's header mutations", i)
			}
			served[r.servedBy]++
		}
		if len(served) < 2 {
			t.Errorf("%d requests went to %d pods: %v", n, len(served), served)
		}
		waitFor(t, 10*time.Second, "one decision and one completion per request", func() bool {
			for _, r := range results {
				if d, c := ev.counts(r.requestID); d != 1 || c != 1 {
					return false
				}
			}
			return true
		})
		for _, r := range results {
			c := ev.completion(r.requestID)
			if c.GetReporter() != picker.Name || c.GetOutcome() != eventsv1.CompletionOutcome_COMPLETION_OUTCOME_SUCCESS ||
				c.GetEndpoint() != r.servedBy || c.GetStatusCode() != http.StatusOK || c.GetTtft() == nil ||
				c.GetCompletionTokens() == 0 || c.GetStreamed() != r.streamed {
				t.Errorf("request %s: completion %v", r.requestID, c)
			}
			if d := ev.decision(r.requestID); d.GetPrimaryEndpoint() != r.servedBy {
				t.Errorf("request %s: decided %s, served by %s", r.requestID, d.GetPrimaryEndpoint(), r.servedBy)
			}
		}
		waitFor(t, 5*time.Second, "no request in flight", func() bool { return s.projection(t, 0).InFlight == 0 })
		if got := metricValue(t, "http://"+picker.Ops+"/metrics", `hermod_picker_extproc_streams_total{outcome="success"}`); got != n {
			t.Errorf("extproc success streams %v, want %d", got, n)
		}
		if m := envoy.maxChunk.Load(); m == 0 || m > 62000 {
			t.Errorf("largest body chunk from the picker: %d bytes", m)
		}
		t.Logf("served per pod: %v", served)
	})

	t.Run("a client gone mid-stream is completed as canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		body := fmt.Sprintf(`{"model":%q,"prompt":"hold on","max_tokens":4000,"ignore_eos":true,"stream":true}`, model)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+envoy.addr+"/v1/completions", strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			cancel()
			t.Fatalf("stream: %v %v", err, resp)
		}
		id := resp.Header.Get("X-Request-Id")
		if _, err := readFirstEvent(resp.Body); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, "the stream in flight", func() bool { return s.projection(t, 0).InFlight == 1 })
		cancel()
		_ = resp.Body.Close()
		waitFor(t, 10*time.Second, "its completion", func() bool { _, c := ev.counts(id); return c == 1 })
		if c := ev.completion(id); c.GetOutcome() != eventsv1.CompletionOutcome_COMPLETION_OUTCOME_CANCELED {
			t.Errorf("completion %v", c)
		}
		waitFor(t, 5*time.Second, "no request in flight", func() bool { return s.projection(t, 0).InFlight == 0 })
	})

	t.Run("a picker that sees no endpoint answers 503", func(t *testing.T) {
		empty := startPicker(t, s, "extproc-empty")
		viaEmpty := *s
		viaEmpty.state.Gateway = newEnvoyStandIn(t, s, empty.grpc).addr
		r := viaEmpty.send(context.Background(), "/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"nobody home"}`, model), false)
		if r.status != http.StatusServiceUnavailable || r.err != nil {
			t.Fatalf("status %d, %v: %s", r.status, r.err, r.body)
		}
		var eb struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(r.body), &eb); err != nil || eb.Error.Type != "service_unavailable" || eb.Error.Message == "" {
			t.Errorf("error body %q: %v", r.body, err)
		}
	})
}

// completion returns a request's last completion.
func (e *events) completion(requestID string) *eventsv1.RequestCompleted {
	e.mu.Lock()
	defer e.mu.Unlock()
	if cs := e.completions[requestID]; len(cs) > 0 {
		return cs[len(cs)-1]
	}
	return nil
}

// pickerProc is a hermod-picker started by a test.
type pickerProc struct{ grpc, ops string }

// startPicker runs a hermod-picker of its own pool (with no endpoint) on
// the stack's NATS and etcd, until the test ends.
func startPicker(t *testing.T, s *devstack, pool string) pickerProc {
	t.Helper()
	base := freePorts(t, 2)
	p := pickerProc{grpc: fmt.Sprintf("127.0.0.1:%d", base), ops: fmt.Sprintf("127.0.0.1:%d", base+1)}
	args := []string{"--pool", pool, "--replica", pool, "--listen", p.grpc, "--metrics-listen", p.ops,
		"--etcd-endpoints", strings.Join(s.state.EtcdEndpoints, ","), "--nats-url", s.state.NATSURL}
	// under --tls: the stack's etcd and NATS settings, and the picker's
	// own identity on gRPC
	cmd := exec.Command(bin("hermod-picker"), slices.Concat(args, s.securityArgs(), s.grpcServerArgs("picker"))...)
	logs := &childproc.Output{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("hermod-picker %s did not stop cleanly: %v\n%s", pool, err, tail(logs.String(), 30))
			}
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("hermod-picker %s did not stop within 20s", pool)
		}
	})
	waitFor(t, 20*time.Second, "hermod-picker "+pool+" to be ready", func() bool {
		resp, err := http.Get("http://" + p.ops + "/ready")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

// envoyStandIn plays Envoy for the test: an HTTP proxy with the ext_proc
// filter (request and response bodies FULL_DUPLEX_STREAMED, trailers
// SEND) and an ORIGINAL_DST cluster that sends each request to the
// address in x-gateway-destination-endpoint (the next one when a
// connection fails, as override_host does).
type envoyStandIn struct {
	t        *testing.T
	addr     string
	ext      extprocv3.ExternalProcessorClient
	upstream *http.Transport
	maxChunk atomic.Int64
}

func newEnvoyStandIn(t *testing.T, s *devstack, pickerAddr string) *envoyStandIn {
	t.Helper()
	conn, err := grpc.NewClient(pickerAddr, s.grpcCreds(t, "envoy")) // Envoy's identity may call ext_proc
	if err != nil {
		t.Fatal(err)
	}
	e := &envoyStandIn{t: t, ext: extprocv3.NewExternalProcessorClient(conn),
		upstream: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 16}}
	srv := httptest.NewServer(e)
	e.addr = srv.Listener.Addr().String()
	t.Cleanup(func() {
		srv.Close()
		e.upstream.CloseIdleConnections()
		_ = conn.Close()
	})
	return e
}

// fullDuplex is the filter's processing mode, as Envoy announces it in
// its first message.
var fullDuplex = &extprocv3.ProtocolConfiguration{
	RequestBodyMode:  filterv3.ProcessingMode_FULL_DUPLEX_STREAMED,
	ResponseBodyMode: filterv3.ProcessingMode_FULL_DUPLEX_STREAMED,
}

func (e *envoyStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
	defer cancel()
	if err := e.serve(ctx, w, r); err != nil && r.Context().Err() == nil {
		e.t.Errorf("envoy stand-in: %s %s: %v", r.Method, r.URL.Path, err)
	}
}

// exchange is one request's ext_proc stream.
type exchange struct {
	st       extprocv3.ExternalProcessor_ProcessClient
	maxChunk *atomic.Int64
}

func (e *envoyStandIn) serve(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	st, err := e.ext.Process(ctx)
	if err != nil {
		return fmt.Errorf("open the ext_proc stream: %w", err)
	}
	x := &exchange{st: st, maxChunk: &e.maxChunk}
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
		writeImmediate(w, ir)
		return nil
	}
	m := answer.GetRequestHeaders().GetResponse().GetHeaderMutation()
	out := r.Header.Clone()
	applyMutation(out, m)
	dest := out.Get("X-Gateway-Destination-Endpoint")
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
	resp, err := e.forward(ctx, r, out, dest, body)
	if err != nil {
		// Envoy's local reply goes through the filter's response path too.
		resp = &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{"Content-Type": {"text/plain"}},
			Body: io.NopCloser(strings.NewReader("upstream connect error"))}
	}
	defer resp.Body.Close()
	return x.relay(w, resp)
}

// forward sends the request to the first destination that accepts a
// connection.
func (e *envoyStandIn) forward(ctx context.Context, r *http.Request, h http.Header, dest string, body []byte) (*http.Response, error) {
	var lastErr error
	for _, addr := range strings.Split(dest, ",") {
		req, err := http.NewRequestWithContext(ctx, r.Method, "http://"+addr+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header = h.Clone()
		if cl := h.Get("Content-Length"); cl != strconv.Itoa(len(body)) {
			return nil, fmt.Errorf("content-length %q for a body of %d bytes", cl, len(body))
		}
		req.ContentLength = int64(len(body))
		resp, err := e.upstream.RoundTrip(req)
		if err == nil {
			return resp, nil
		}
		lastErr = err
	}
	return nil, lastErr
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
