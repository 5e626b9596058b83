package bootstrap

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
	"github.com/hermod/hermod/testkit/certs"
)

// pickerStub answers Pick and Complete, and remembers the certificate
// serial the server presented on the last call's connection.
type pickerStub struct {
	pickerv1.UnimplementedPickerServiceServer
}

func (pickerStub) Pick(context.Context, *pickerv1.PickRequest) (*pickerv1.PickResponse, error) {
	return &pickerv1.PickResponse{DecisionId: "d1"}, nil
}

func (pickerStub) Complete(context.Context, *pickerv1.CompleteRequest) (*pickerv1.CompleteResponse, error) {
	return &pickerv1.CompleteResponse{}, nil
}

// testPKI is a CA, and the files of certificates it issued, by identity.
type testPKI struct {
	ca     *certs.CA
	dir    string
	caFile string
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	ca, err := certs.NewCA("bootstrap test CA")
	if err != nil {
		t.Fatal(err)
	}
	p := &testPKI{ca: ca, dir: t.TempDir()}
	p.caFile = filepath.Join(p.dir, "ca.crt")
	if err := ca.WriteCA(p.caFile); err != nil {
		t.Fatal(err)
	}
	return p
}

// files issues a certificate of identity (server and client usages) and
// returns the security config that uses it.
func (p *testPKI) files(t *testing.T, identity, clientAuth string) GRPCSecurity {
	t.Helper()
	kp, err := p.ca.Server(identity)
	if err != nil {
		t.Fatal(err)
	}
	f, err := kp.Write(p.dir, identity)
	if err != nil {
		t.Fatal(err)
	}
	return GRPCSecurity{CAFile: p.caFile, CertFile: f.Cert, KeyFile: f.Key, ClientAuth: clientAuth}
}

// serveGRPC starts a service with g and a picker stub and health server
// on loopback; it returns the service and the address.
func serveGRPC(t *testing.T, g GRPCSecurity) (*Service, string) {
	t.Helper()
	s := start(t, Options{Name: "hermod-picker", NoPool: true, Config: Config{GRPC: g}})
	opts, err := s.GRPCServerOptions()
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(opts...)
	pickerv1.RegisterPickerServiceServer(gs, pickerStub{})
	healthpb.RegisterHealthServer(gs, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = gs.Serve(lis) }()
	t.Cleanup(func() { gs.Stop(); <-done })
	return s, lis.Addr().String()
}

// dial connects with opts; the connection closes when the test ends.
func dial(t *testing.T, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// client is a service (an identity's) dialing with its GRPCDialOptions.
func client(t *testing.T, g GRPCSecurity, addr string) pickerv1.PickerServiceClient {
	t.Helper()
	s := start(t, Options{Name: "hermod-client", NoPool: true, Config: Config{GRPC: g}})
	return pickerv1.NewPickerServiceClient(dial(t, addr, s.GRPCDialOptions()...))
}

func pickOnce(c pickerv1.PickerServiceClient, p *peer.Peer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var opts []grpc.CallOption
	if p != nil {
		opts = append(opts, grpc.Peer(p))
	}
	_, err := c.Pick(ctx, &pickerv1.PickRequest{RequestId: "r"}, opts...)
	return err
}

// Without flags the servers and clients speak plaintext, as before.
func TestGRPCPlaintextByDefault(t *testing.T) {
	_, addr := serveGRPC(t, GRPCSecurity{})
	if err := pickOnce(client(t, GRPCSecurity{}, addr), nil); err != nil {
		t.Fatal(err)
	}
	c := pickerv1.NewPickerServiceClient(dial(t, addr, grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err := pickOnce(c, nil); err != nil {
		t.Fatal(err)
	}
}

// Under require: a client without a certificate and one with another
// CA's are refused at the handshake; the gateway may Pick; the indexer's
// identity may not (PermissionDenied naming it and the method); health is
// open to any verified peer. Denials are counted.
func TestGRPCMutualTLSAndAuthorisation(t *testing.T) {
	p := newTestPKI(t)
	srv, addr := serveGRPC(t, p.files(t, "picker", "require"))

	t.Run("plaintext client", func(t *testing.T) {
		c := pickerv1.NewPickerServiceClient(dial(t, addr, grpc.WithTransportCredentials(insecure.NewCredentials())))
		if err := pickOnce(c, nil); status.Code(err) != codes.Unavailable {
			t.Fatalf("plaintext client: %v", err)
		}
	})
	t.Run("no client certificate", func(t *testing.T) {
		if err := pickOnce(client(t, GRPCSecurity{CAFile: p.caFile}, addr), nil); status.Code(err) != codes.Unavailable {
			t.Fatalf("client without a certificate: %v", err)
		}
	})
	t.Run("another CA", func(t *testing.T) {
		other := newTestPKI(t)
		g := other.files(t, "gateway", "none")
		g.CAFile = p.caFile // trusts the server, is not trusted by it
		if err := pickOnce(client(t, g, addr), nil); status.Code(err) != codes.Unavailable {
			t.Fatalf("another CA's certificate: %v", err)
		}
	})
	t.Run("gateway", func(t *testing.T) {
		var pr peer.Peer
		if err := pickOnce(client(t, p.files(t, "gateway", "none"), addr), &pr); err != nil {
			t.Fatal(err)
		}
		if info, ok := pr.AuthInfo.(credentials.TLSInfo); !ok || len(info.State.VerifiedChains) == 0 {
			t.Fatalf("the connection is not verified TLS: %+v", pr.AuthInfo)
		}
	})
	t.Run("wrong identity", func(t *testing.T) {
		err := pickOnce(client(t, p.files(t, "indexer", "none"), addr), nil)
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "spiffe://hermod/indexer") ||
			!strings.Contains(err.Error(), pickerv1.PickerService_Pick_FullMethodName) {
			t.Fatalf("indexer calling Pick: %v", err)
		}
		c := healthpb.NewHealthClient(dial(t, addr, start(t, Options{Name: "x", NoPool: true, Config: Config{GRPC: p.files(t, "indexer", "none")}}).GRPCDialOptions()...))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("health check: %v", err)
		}
	})
	if n := counter(t, srv.Registry, "hermod_grpc_authz_denied_total", pickerv1.PickerService_Pick_FullMethodName, "indexer"); n != 1 {
		t.Errorf("denials counted %v, want 1", n)
	}
}

// counter is the value of the counter name whose label values are values.
func counter(t *testing.T, g prometheus.Gatherer, name string, values ...string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i, l := range m.GetLabel() {
				if i >= len(values) || l.GetValue() != values[i] {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// The certificate files are rotated on disk: the next connection sees the
// new certificate without a restart, on the server and on the client side.
func TestGRPCCertificateRotation(t *testing.T) {
	p := newTestPKI(t)
	g := p.files(t, "picker", "require")
	srv, addr := serveGRPC(t, g)
	gw := p.files(t, "gateway", "none")
	served := func() string {
		t.Helper()
		c := client(t, gw, addr) // a new connection
		var pr peer.Peer
		if err := pickOnce(c, &pr); err != nil {
			t.Fatal(err)
		}
		return pr.AuthInfo.(credentials.TLSInfo).State.PeerCertificates[0].SerialNumber.String()
	}
	before := served()
	// a new CA: the server's certificate, its trusted CA bundle and the
	// gateway's certificate all change; the old gateway certificate stops
	// working once the server reloads
	next, err := certs.NewCA("rotated CA")
	if err != nil {
		t.Fatal(err)
	}
	bundle := append(append([]byte{}, p.ca.PEM...), next.PEM...)
	if err := os.WriteFile(p.caFile, bundle, 0o644); err != nil {
		t.Fatal(err)
	}
	p.ca = next
	p.files(t, "picker", "require") // same paths, new material
	if err := srv.grpc.tls.Reload(); err != nil {
		t.Fatal(err)
	}
	after := served()
	if after == before {
		t.Fatalf("the server still presents %s", before)
	}
	p.files(t, "gateway", "none") // the gateway's certificate from the new CA
	if got := served(); got != after {
		t.Fatalf("served %s, want %s", got, after)
	}
}

func TestGRPCSecurityConfig(t *testing.T) {
	p := newTestPKI(t)
	ok := p.files(t, "picker", "require")
	authz := filepath.Join(p.dir, "authz.yaml")
	if err := os.WriteFile(authz, []byte("rules: [{methods: ['/hermod.picker.v1.PickerService/Pick'], allow: [loadgen]}]"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		g    GRPCSecurity
		want string
	}{
		{"client auth without tls", GRPCSecurity{ClientAuth: "require"}, "need TLS"},
		{"authz without tls", GRPCSecurity{AuthzFile: authz}, "need TLS"},
		{"bad client auth", GRPCSecurity{ClientAuth: "always"}, "--grpc-tls-client-auth"},
		{"authz without client auth", GRPCSecurity{CAFile: ok.CAFile, CertFile: ok.CertFile, KeyFile: ok.KeyFile, AuthzFile: authz}, "--grpc-authz-file"},
		{"missing key", GRPCSecurity{CAFile: ok.CAFile, CertFile: ok.CertFile, KeyFile: filepath.Join(p.dir, "nope.key")}, "nope.key"},
		{"bad policy", GRPCSecurity{CAFile: ok.CAFile, CertFile: ok.CertFile, KeyFile: ok.KeyFile, ClientAuth: "require", AuthzFile: ok.CAFile}, "ca.crt"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Start(context.Background(), Options{Name: "x", NoPool: true, Config: Config{GRPC: c.g}, Logger: quiet()})
			if err == nil {
				s.Close()
				t.Fatal("started")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not mention %q", err, c.want)
			}
		})
	}
	// a client-only service (the gateway) needs no certificate, but cannot serve
	s := start(t, Options{Name: "x", NoPool: true, Config: Config{GRPC: GRPCSecurity{CAFile: ok.CAFile}}})
	if _, err := s.GRPCServerOptions(); err == nil {
		t.Error("served TLS without a certificate")
	}
	// the policy file applies over the default table
	g := ok
	g.AuthzFile = authz
	_, addr := serveGRPC(t, g)
	if err := pickOnce(client(t, p.files(t, "loadgen", "none"), addr), nil); err != nil {
		t.Errorf("loadgen allowed by the file: %v", err)
	}
	if err := pickOnce(client(t, p.files(t, "gateway", "none"), addr), nil); status.Code(err) != codes.PermissionDenied {
		t.Errorf("gateway replaced by the file's rule: %v", err)
	}
}

// The flags and their HERMOD_* variables fill GRPCSecurity.
func TestGRPCSecurityFlags(t *testing.T) {
	t.Setenv("HERMOD_GRPC_TLS_CLIENT_AUTH", "require")
	var cfg Config
	cmd := NewCommand("hermod-test", &cfg, Flags{})
	err := cmd.Run([]string{"--grpc-tls-ca-file", "ca.pem", "--grpc-tls-cert-file", "c.pem", "--grpc-tls-key-file", "k.pem",
		"--grpc-tls-server-name", "picker.hermod", "--grpc-authz-file", "authz.yaml"}, func(context.Context, *slog.Logger) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	want := GRPCSecurity{CAFile: "ca.pem", CertFile: "c.pem", KeyFile: "k.pem", ClientAuth: "require", ServerName: "picker.hermod", AuthzFile: "authz.yaml"}
	if cfg.GRPC != want {
		t.Fatalf("%+v, want %+v", cfg.GRPC, want)
	}
	if NewCommand("x", &cfg, Flags{NoGRPC: true}).Lookup("grpc-tls-ca-file") != nil {
		t.Error("NoGRPC registers the flags")
	}
}
