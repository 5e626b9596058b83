package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/hermod/hermod/testkit/childproc"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/bootstrap"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/libs/tlsconfig"
	"github.com/hermod/hermod/tools/devstack/stackstate"
)

// devstack is a running hermod-devstack process: the whole stack as
// `make run` starts it, on free ports.
type devstack struct {
	t     testing.TB
	cmd   *exec.Cmd
	logs  *childproc.Output
	state stackstate.State
	// stateFile is where the devstack keeps its state (rewritten when a
	// child restarts).
	stateFile string
	done      chan error
}

// startStack runs hermod-devstack with extra flags and waits until it is
// ready (it writes its state file then). The stack stops (by SIGINT, as a
// Ctrl-C would) when the test ends, and must stop cleanly.
func startStack(t testing.TB, extra ...string) *devstack {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the whole stack; skipped with -short")
	}
	dir := t.TempDir()
	stateFile := filepath.Join(dir, "state.json")
	simBase := freePorts(t, 8)
	kvBase := freePorts(t, 16)
	gw := freePorts(t, 1)
	args := slices.Concat([]string{"--bin-dir", binDir, "--state-file", stateFile, "--data-dir", filepath.Join(dir, "data"),
		"--listen", fmt.Sprintf("127.0.0.1:%d", gw), "--nats-port", "0", "--etcd-port", "0",
		"--sim-base-port", fmt.Sprint(simBase), "--kv-base-port", fmt.Sprint(kvBase)}, tlsArgs(), extra)
	cmd := exec.Command(bin("hermod-devstack"), args...)
	logs := &childproc.Output{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &devstack{t: t, cmd: cmd, logs: logs, stateFile: stateFile, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	t.Cleanup(s.stop)
	deadline := time.Now().Add(90 * time.Second)
	for {
		if st, err := stackstate.Read(stateFile); err == nil {
			if e2eTLS && (st.TLS == nil || len(st.Security) == 0) {
				t.Fatalf("HERMOD_E2E_TLS=1 but the devstack's state has no security settings")
			}
			s.state = *st
			s.trustAPI(t)
			return s
		} else if !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		select {
		case err := <-s.done:
			t.Fatalf("hermod-devstack exited while starting: %v\n%s", err, logs.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("hermod-devstack not ready after 90s:\n%s", logs.String())
		}
	}
}

// stop sends SIGINT and waits for a clean exit.
func (s *devstack) stop() {
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-s.done:
		if err != nil {
			s.t.Errorf("hermod-devstack did not stop cleanly: %v\n%s", err, tail(s.logs.String(), 60))
		}
	case <-time.After(45 * time.Second):
		_ = s.cmd.Process.Kill()
		s.t.Errorf("hermod-devstack did not stop within 45s after SIGINT\n%s", tail(s.logs.String(), 60))
	}
}

func tail(s string, lines int) string {
	ls := strings.Split(s, "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

// hermodctl flags reaching this stack.
func (s *devstack) ctlFlags() []string {
	return append([]string{"--pool", s.state.Pool, "--etcd-endpoints", strings.Join(s.state.EtcdEndpoints, ","), "--nats-url", s.state.NATSURL}, s.securityArgs()...)
}

// e2eTLS: with HERMOD_E2E_TLS=1 (make e2e-tls) every devstack runs with
// --tls, and the tests reach its etcd, NATS and gRPC servers with the
// state file's security settings and certificates.
var e2eTLS = os.Getenv("HERMOD_E2E_TLS") == "1"

// tlsArgs are the devstack flags of the run's mode.
func tlsArgs() []string {
	if e2eTLS {
		return []string{"--tls"}
	}
	return nil
}

// security returns the state's etcd and NATS settings (hermodctl's
// identity under --tls; none without).
func (s *devstack) security(t testing.TB) (bootstrap.EtcdSecurity, bootstrap.NATSSecurity) {
	t.Helper()
	var e bootstrap.EtcdSecurity
	var n bootstrap.NATSSecurity
	fs := flag.NewFlagSet("security", flag.ContinueOnError)
	e.RegisterFlags(fs)
	n.RegisterFlags(fs)
	for name, v := range s.state.Security {
		if err := fs.Set(name, v); err != nil {
			t.Fatalf("state security %s: %v", name, err)
		}
	}
	return e, n
}

// securityArgs are the state's security settings as flags.
func (s *devstack) securityArgs() []string {
	var args []string
	for _, name := range slices.Sorted(maps.Keys(s.state.Security)) {
		args = append(args, "--"+name, s.state.Security[name])
	}
	return args
}

// connectNATS connects to the stack's NATS; the connection closes when
// the test ends.
func (s *devstack) connectNATS(t testing.TB, name string) *nats.Conn {
	t.Helper()
	_, n := s.security(t)
	nc, err := n.Connect(context.Background(), s.state.NATSURL, name, bus.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// etcdClient connects to the stack's etcd; the client closes when the
// test ends.
func (s *devstack) etcdClient(t testing.TB) *clientv3.Client {
	t.Helper()
	e, _ := s.security(t)
	cli, err := e.NewClient(context.Background(), s.state.EtcdEndpoints)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// grpcServerArgs are the gRPC TLS flags of a service the test starts as
// identity (none without --tls).
func (s *devstack) grpcServerArgs(identity string) []string {
	if s.state.TLS == nil {
		return nil
	}
	f := s.state.TLS.Identities[identity]
	return []string{"--grpc-tls-ca-file", s.state.TLS.CAFile, "--grpc-tls-cert-file", f.CertFile, "--grpc-tls-key-file", f.KeyFile, "--grpc-tls-client-auth", "require"}
}

// grpcCreds are a gRPC client's credentials as identity: mutual TLS
// under --tls, plaintext without.
func (s *devstack) grpcCreds(t testing.TB, identity string) grpc.DialOption {
	t.Helper()
	if s.state.TLS == nil {
		return grpc.WithTransportCredentials(insecure.NewCredentials())
	}
	f := s.state.TLS.Identities[identity]
	cfg, err := tlsconfig.ClientFiles{CAFile: s.state.TLS.CAFile, CertFile: f.CertFile, KeyFile: f.KeyFile}.Config()
	if err != nil {
		t.Fatal(err)
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(cfg))
}

func (s *devstack) url(path string) string {
	return s.state.APIScheme() + "://" + s.state.Gateway + path
}

// plainAt is s with its API reached over plain HTTP at addr (an Envoy
// stand-in in front of its pickers).
func (s *devstack) plainAt(addr string) *devstack {
	c := *s
	c.state.Gateway, c.state.GatewayScheme = addr, ""
	return &c
}

// apiCAs holds, per gateway address, the CA a stack serving the OpenAI
// API over HTTPS (--tls) signed its certificate with: the suite's HTTP
// clients (http.DefaultTransport, which the SDKs use, and the load
// transports) trust exactly it there, as a user who installed the stack's
// CA would.
var apiCAs sync.Map // address -> *x509.CertPool

func init() { http.DefaultTransport.(*http.Transport).DialTLSContext = dialAPI }

// dialAPI opens a TLS connection to a gateway of a started stack,
// verifying its certificate against that stack's CA.
func dialAPI(ctx context.Context, network, addr string) (net.Conn, error) {
	pool, ok := apiCAs.Load(addr)
	if !ok {
		return nil, fmt.Errorf("https to %s: no started stack serves its API there", addr)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	d := tls.Dialer{Config: &tls.Config{RootCAs: pool.(*x509.CertPool), ServerName: host, MinVersion: tls.VersionTLS12}}
	return d.DialContext(ctx, network, addr)
}

// trustAPI makes the suite's clients trust s's CA on its gateways'
// addresses when it serves the API over HTTPS.
func (s *devstack) trustAPI(t testing.TB) {
	t.Helper()
	if s.state.APIScheme() != "https" {
		return
	}
	ca, err := os.ReadFile(s.state.TLS.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatalf("the stack's CA %s does not parse", s.state.TLS.CAFile)
	}
	for _, gw := range append([]string{s.state.Gateway}, s.state.Gateways...) {
		apiCAs.Store(gw, pool)
		t.Cleanup(func() { apiCAs.CompareAndDelete(gw, pool) })
	}
}

// result is one request's outcome as the client saw it.
type result struct {
	requestID string
	status    int
	streamed  bool
	body      string
	err       error
	servedBy  string
}

// send sends one request through the gateway and reads it to the end.
func (s *devstack) send(ctx context.Context, path, body string, stream bool) result {
	r := result{streamed: stream}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url(path), strings.NewReader(body))
	if err != nil {
		r.err = err
		return r
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.err = err
		return r
	}
	defer resp.Body.Close()
	r.status, r.requestID, r.servedBy = resp.StatusCode, resp.Header.Get("X-Request-Id"), resp.Header.Get("X-Decoder-Host-Port")
	b, err := io.ReadAll(resp.Body)
	r.body, r.err = string(b), err
	last := "data: [DONE]\n\n"
	if strings.HasPrefix(path, "/v1/messages") { // Anthropic's stream ends with its message_stop event
		last = "data: {\"type\":\"message_stop\"}\n\n"
	}
	if err == nil && stream && !strings.HasSuffix(r.body, last) {
		r.err = fmt.Errorf("stream did not end with %q: %q", last, tail(r.body, 3))
	}
	if err == nil && !stream && !json.Valid(b) {
		r.err = fmt.Errorf("body is not JSON: %q", r.body)
	}
	return r
}

func (r result) ok() bool { return r.err == nil && r.status == http.StatusOK }

// mixedRequest returns the i-th request of a mixed workload: completions
// and chat, streamed and not, with shared prefixes.
func mixedRequest(model string, i int) (path, body string, stream bool) {
	stream = i%2 == 1
	user := fmt.Sprintf("conversation %d: tell me about routing, part %d", i%7, i)
	if i%3 == 0 {
		return "/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":%q,"max_tokens":8,"stream":%t}`, model, user, stream), stream
	}
	return "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":%q}],"max_tokens":8,"stream":%t}`, model, user, stream), stream
}

// readSSE reads a stream's first event, for tests that hold streams open.
func readFirstEvent(body io.Reader) (*bufio.Reader, error) {
	br := bufio.NewReader(body)
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return br, err
		}
		if bytes.HasPrefix(line, []byte("data:")) {
			return br, nil
		}
	}
}

func completionOf(pool, decisionID string) *eventsv1.RequestCompleted {
	return &eventsv1.RequestCompleted{DecisionId: decisionID, Pool: pool}
}
