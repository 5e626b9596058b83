package app

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	responsesv1 "github.com/hermod/hermod/libs/api/hermod/responses/v1"
	"github.com/hermod/hermod/libs/bootstrap"
	"github.com/hermod/hermod/testkit/certs"
)

// The attack of the issue, replayed against a responses service run with
// --grpc-tls-client-auth require: a plaintext Put and a Put without a
// client certificate do not connect, a Put from the picker's identity is
// denied, and the gateway's stored response is intact.
func TestResponsesRefuseUnauthenticatedPut(t *testing.T) {
	dir := t.TempDir()
	ca, err := certs.NewCA("responses test CA")
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := ca.WriteCA(caFile); err != nil {
		t.Fatal(err)
	}
	security := func(identity, clientAuth string) bootstrap.GRPCSecurity {
		kp, err := ca.Server(identity)
		if err != nil {
			t.Fatal(err)
		}
		f, err := kp.Write(dir, identity)
		if err != nil {
			t.Fatal(err)
		}
		return bootstrap.GRPCSecurity{CAFile: caFile, CertFile: f.Cert, KeyFile: f.Key, ClientAuth: clientAuth}
	}
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() {
		ran <- Run(ctx, Config{Config: bootstrap.Config{Pool: "p1", GRPC: security("responses", "require")},
			Listen: addr, MetricsListen: "127.0.0.1:0"}, slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil {
			t.Error(err)
		}
	})
	store := func(g bootstrap.GRPCSecurity) responsesv1.ResponsesStoreClient {
		svc, err := bootstrap.Start(context.Background(), bootstrap.Options{Name: "hermod-client", NoPool: true, Config: bootstrap.Config{GRPC: g}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(svc.Close)
		return dialStore(t, addr, svc.GRPCDialOptions()...)
	}
	put := func(c responsesv1.ResponsesStoreClient, data string) error {
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer ccancel()
		_, err := c.Put(cctx, &responsesv1.PutRequest{Response: &responsesv1.StoredResponse{Id: "resp_1", CreatedAtUnixMs: 1, Data: []byte(data)}})
		return err
	}
	gateway := store(security("gateway", "none"))
	deadline := time.Now().Add(10 * time.Second)
	for err := put(gateway, "the user's"); err != nil; err = put(gateway, "the user's") {
		if time.Now().After(deadline) {
			t.Fatalf("the gateway's Put: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	if err := put(dialStore(t, addr, grpc.WithTransportCredentials(insecure.NewCredentials())), "attacker"); status.Code(err) != codes.Unavailable {
		t.Errorf("plaintext Put: %v", err)
	}
	if err := put(store(bootstrap.GRPCSecurity{CAFile: caFile}), "attacker"); status.Code(err) != codes.Unavailable {
		t.Errorf("Put without a client certificate: %v", err)
	}
	if err := put(store(security("picker", "none")), "attacker"); status.Code(err) != codes.PermissionDenied {
		t.Errorf("Put from the picker's identity: %v", err)
	}
	gctx, gcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer gcancel()
	got, err := gateway.Get(gctx, &responsesv1.GetRequest{Id: "resp_1"})
	if err != nil || string(got.GetResponse().GetData()) != "the user's" {
		t.Fatalf("stored response %q, %v", got.GetResponse().GetData(), err)
	}
}

func dialStore(t *testing.T, addr string, opts ...grpc.DialOption) responsesv1.ResponsesStoreClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return responsesv1.NewResponsesStoreClient(conn)
}

// freeAddr is a loopback address with a port free a moment ago (the
// service has no hook that reports its bound address).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		t.Fatal(err)
	}
	return addr
}
