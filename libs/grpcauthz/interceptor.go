package grpcauthz

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hermod/hermod/libs/telemetry"
)

// Authorizer enforces a policy on a server's calls.
type Authorizer struct {
	policy *Policy
	log    *slog.Logger
	denied *prometheus.CounterVec
}

// NewAuthorizer enforces policy; denials are logged at debug level (a
// denied caller can repeat itself) and counted on reg (nil: not counted)
// as hermod_grpc_authz_denied_total{method, peer}.
func NewAuthorizer(policy *Policy, log *slog.Logger, reg prometheus.Registerer) *Authorizer {
	if log == nil {
		log = slog.Default()
	}
	denied := telemetry.NewCounterVec("hermod_grpc_authz_denied_total",
		"gRPC calls refused by the authorisation policy, by full method and caller identity (anonymous, authenticated or the identity name).", "method", "peer")
	if reg != nil {
		if err := reg.Register(denied); err != nil {
			log.Warn("authz metrics not registered", "error", err)
		}
	}
	return &Authorizer{policy: policy, log: log, denied: denied}
}

// authorize returns nil or the PermissionDenied error of a refused call.
func (a *Authorizer) authorize(ctx context.Context, fullMethod string) error {
	p := PeerFromContext(ctx)
	if a.policy.Allowed(fullMethod, p) {
		return nil
	}
	label := p.Identity
	switch {
	case !p.Verified:
		label = "anonymous"
	case label == "":
		label = Authenticated
	}
	a.denied.WithLabelValues(fullMethod, label).Inc()
	a.log.Debug("grpc call denied", "method", fullMethod, "peer", p.String())
	return status.Errorf(codes.PermissionDenied, "%s may not call %s", p, fullMethod)
}

// Unary is the unary server interceptor.
func (a *Authorizer) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := a.authorize(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// Stream is the stream server interceptor.
func (a *Authorizer) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := a.authorize(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return handler(srv, ss)
}

// ServerOptions are the interceptors as server options.
func (a *Authorizer) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(a.Unary), grpc.ChainStreamInterceptor(a.Stream)}
}
