package auth

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// TenantHeader names the principal of a request when the gateway takes
// no API keys and trusts the proxy in front of it, which authenticated the
// client (TenantTrust). With API keys it is ignored: the key's name is the
// principal.
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

// TenantTrust says whose tenant header a gateway without API keys
// believes: the one a trusted proxy in front sets, on requests arriving
// from Proxies. The zero value believes none: every request is the one
// anonymous principal.
type TenantTrust struct {
	// Header is the tenant header's name ("" is TenantHeader).
	Header string
	// Proxies are the addresses the trusted proxies connect from.
	Proxies []netip.Prefix
}

// ParseTrustedProxies reads a comma-separated list of addresses and
// CIDR prefixes.
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: not an address or a CIDR prefix", f)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// trusts reports whether a request from remote (host:port) is a trusted
// proxy's.
func (t TenantTrust) trusts(remote string) bool {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return false
	}
	a := ap.Addr().Unmap()
	for _, p := range t.Proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Tenants makes the tenant header the principal of each request, for a
// gateway without API keys, when a trusted proxy sent it; from anyone
// else the header is ignored (the request is anonymous). The header is
// removed either way, so it never reaches a model server.
func Tenants(trust TenantTrust, next http.Handler) http.Handler {
	name := trust.Header
	if name == "" {
		name = TenantHeader
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.Header.Get(name)
		r.Header.Del(name)
		r.Header.Del(TenantHeader)
		if p != "" && !trust.trusts(r.RemoteAddr) {
			p = ""
		}
		next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
	})
}
