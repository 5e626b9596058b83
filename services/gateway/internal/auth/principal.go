package auth

import (
	"context"
	"net/http"
)

// TenantHeader names the principal of a request when the gateway takes
// no API keys (a proxy in front of it authenticated the client). With API
// keys it is ignored: the key's name is the principal.
const TenantHeader = "X-Hermod-Tenant"

type principalKey struct{}

// WithPrincipal returns ctx acting for principal p.
func WithPrincipal(ctx context.Context, p string) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// Principal is who a request acts for: its API key's name, or its tenant
// header without keys; "" is anonymous.
func Principal(ctx context.Context) string {
	p, _ := ctx.Value(principalKey{}).(string)
	return p
}

// Tenants makes the tenant header the principal of each request, for a
// gateway without API keys. The header is removed, so it never reaches a
// model server.
func Tenants(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.Header.Get(TenantHeader)
		r.Header.Del(TenantHeader)
		next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
	})
}
