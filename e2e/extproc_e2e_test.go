package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermod/hermod/testkit/childproc"

	"google.golang.org/grpc"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/tools/loadgen/extprocfront"
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
	viaEnvoy := s.plainAt(envoy.addr)

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
		if m := envoy.front.Seen().MaxChunk; m == 0 || m > 62000 {
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
		viaEmpty := s.plainAt(newEnvoyStandIn(t, s, empty.grpc).addr)
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

// envoyStandIn plays Envoy for the test: the shared front
// (tools/loadgen/extprocfront) on a test server, each request it could not
// carry through failing the test.
type envoyStandIn struct {
	addr  string
	front *extprocfront.Front
}

func newEnvoyStandIn(t *testing.T, s *devstack, pickerAddr string) *envoyStandIn {
	t.Helper()
	conn, err := grpc.NewClient(pickerAddr, s.grpcCreds(t, "envoy")) // Envoy's identity may call ext_proc
	if err != nil {
		t.Fatal(err)
	}
	front := extprocfront.New(conn, extprocfront.Options{OnError: func(r *http.Request, err error) {
		t.Errorf("envoy stand-in: %s %s: %v", r.Method, r.URL.Path, err)
	}})
	srv := httptest.NewServer(front)
	t.Cleanup(func() {
		srv.Close()
		front.Close()
		_ = conn.Close()
	})
	return &envoyStandIn{addr: srv.Listener.Addr().String(), front: front}
}
