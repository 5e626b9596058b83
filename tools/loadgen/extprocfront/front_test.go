package extprocfront

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// picker is a minimal ExternalProcessor: it sends every request to dest
// (refusing paths under /refuse with 429) and echoes bodies back as
// streamed mutations, as a full-duplex processor does.
type picker struct {
	extprocv3.UnimplementedExternalProcessorServer
	dest string
}

func streamed(body []byte, eos bool) *extprocv3.BodyResponse {
	return &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{
		Mutation: &extprocv3.BodyMutation_StreamedResponse{StreamedResponse: &extprocv3.StreamedBodyResponse{Body: body, EndOfStream: eos}}}}}
}

func (p *picker) Process(st extprocv3.ExternalProcessor_ProcessServer) error {
	for {
		req, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var out *extprocv3.ProcessingResponse
		switch r := req.Request.(type) {
		case *extprocv3.ProcessingRequest_RequestHeaders:
			for _, h := range r.RequestHeaders.GetHeaders().GetHeaders() {
				if h.GetKey() == ":path" && strings.HasPrefix(string(h.GetRawValue()), "/refuse") {
					return st.Send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &extprocv3.ImmediateResponse{
						Status: &typev3.HttpStatus{Code: typev3.StatusCode_TooManyRequests}, Body: []byte("shed")}}})
				}
			}
			md, _ := structpb.NewStruct(map[string]any{"envoy.lb": map[string]any{"x-gateway-destination-endpoint": p.dest}})
			out = &extprocv3.ProcessingResponse{DynamicMetadata: md, Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{
				Response: &extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{
					{Header: &corev3.HeaderValue{Key: "x-gateway-destination-endpoint", RawValue: []byte(p.dest)}}}}}}}}
		case *extprocv3.ProcessingRequest_RequestBody:
			out = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: streamed(r.RequestBody.GetBody(), r.RequestBody.GetEndOfStream())}}
		case *extprocv3.ProcessingRequest_ResponseHeaders:
			out = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{}}}
		case *extprocv3.ProcessingRequest_ResponseBody:
			out = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: streamed(r.ResponseBody.GetBody(), r.ResponseBody.GetEndOfStream())}}
		}
		if err := st.Send(out); err != nil {
			return err
		}
	}
}

// The front follows the picker's destination (past an address that
// refuses connections), streams bodies through it both ways, passes its
// refusals on, and counts what it saw.
func TestFront(t *testing.T) {
	pod := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(append([]byte("echo:"), b...))
	}))
	defer pod.Close()
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	_ = dead.Close()

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	podAddr := strings.TrimPrefix(pod.URL, "http://")
	extprocv3.RegisterExternalProcessorServer(srv, &picker{dest: deadAddr + "," + podAddr})
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var failures []error
	front := New(conn, Options{OnError: func(_ *http.Request, err error) { failures = append(failures, err) }})
	defer front.Close()
	fs := httptest.NewServer(front)
	defer fs.Close()

	body := strings.Repeat("x", 40<<10) // more than one 16 KiB chunk
	resp, err := http.Post(fs.URL+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(got) != "echo:"+body || resp.Header.Get(ServedByHeader) != podAddr {
		t.Fatalf("%d, %d bytes, served by %q", resp.StatusCode, len(got), resp.Header.Get(ServedByHeader))
	}
	resp, err = http.Post(fs.URL+"/refuse", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	got, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || string(got) != "shed" {
		t.Fatalf("the picker's refusal: %d %q", resp.StatusCode, got)
	}
	seen := front.Seen()
	if seen.Requests != 2 || seen.Immediate != 1 || seen.UpstreamErrors != 0 || seen.Served[podAddr] != 1 || seen.MaxChunk == 0 || len(failures) != 0 {
		t.Fatalf("seen %+v, failures %v", seen, failures)
	}
	if len(seen.Decisions) != 1 || seen.Decisions[0] <= 0 { // the refusal routed nothing
		t.Fatalf("decisions %v, want the one routed request's", seen.Decisions)
	}

}
