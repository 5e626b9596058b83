package grpcauthz

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
	"github.com/hermod/hermod/testkit/certs"
)

// BenchmarkAuthorize is what the interceptor adds to an allowed call: the
// peer's identity from its verified chain and the policy's lookup.
func BenchmarkAuthorize(b *testing.B) {
	ca, err := certs.NewCA("bench")
	if err != nil {
		b.Fatal(err)
	}
	kp, err := ca.Client(Gateway)
	if err != nil {
		b.Fatal(err)
	}
	ctx := peer.NewContext(context.Background(), &peer.Peer{AuthInfo: credentials.TLSInfo{
		State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{kp.Cert, ca.Cert}}}}})
	a := NewAuthorizer(DefaultPolicy(), quietLog(), nil)
	info := &grpc.UnaryServerInfo{FullMethod: pickerv1.PickerService_Pick_FullMethodName}
	handler := func(context.Context, any) (any, error) { return nil, nil }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Unary(ctx, nil, info, handler); err != nil {
			b.Fatal(err)
		}
	}
}
