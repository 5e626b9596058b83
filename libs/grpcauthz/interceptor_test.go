package grpcauthz

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type stubStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s stubStream) Context() context.Context { return s.ctx }

// The stream interceptor refuses an anonymous ext_proc stream with
// PermissionDenied naming the caller and the method, and counts it.
func TestStreamDenied(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := NewAuthorizer(DefaultPolicy(), quietLog(), reg)
	called := false
	err := a.Stream(nil, stubStream{ctx: context.Background()}, &grpc.StreamServerInfo{FullMethod: ExtProcProcess},
		func(any, grpc.ServerStream) error { called = true; return nil })
	if status.Code(err) != codes.PermissionDenied || called || !strings.Contains(err.Error(), "anonymous may not call "+ExtProcProcess) {
		t.Fatalf("err %v, handler called %v", err, called)
	}
	if n := testutil.ToFloat64(a.denied.WithLabelValues(ExtProcProcess, "anonymous")); n != 1 {
		t.Errorf("denials %v", n)
	}
	if err := a.Stream(nil, stubStream{ctx: context.Background()}, &grpc.StreamServerInfo{FullMethod: "/grpc.health.v1.Health/Watch"},
		func(any, grpc.ServerStream) error { return nil }); err != nil {
		t.Errorf("health watch: %v", err)
	}
}
