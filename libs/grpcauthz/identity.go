// Package grpcauthz decides which peer may call which gRPC method of a
// Hermod service, from the identity in the peer's verified client
// certificate.
//
// Identity scheme: a Hermod peer is named by a URI SAN
// spiffe://hermod/<name> in its certificate (name: gateway, picker,
// indexer, responses, collector, autoscaler, envoy, hermodctl, ...). The
// subject CN (by convention hermod-<name>) and DNS SANs are not
// identities: they are for people and for server names. A certificate the
// CA verified that has no such URI is "authenticated" without a name.
//
// A Policy maps full method names ("/hermod.picker.v1.PickerService/Pick")
// to the identities that may call them; DefaultPolicy is the table every
// service starts with, and a YAML file (DecodePolicy) may override it.
// The policy applies only when servers verify client certificates (TLS
// client auth optional or require): without them no call has an identity.
package grpcauthz

import (
	"context"
	"crypto/x509"
	"strings"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// TrustDomain is the host of every identity URI.
const TrustDomain = "hermod"

// IdentityURIPrefix prefixes every identity URI: spiffe://hermod/<name>.
const IdentityURIPrefix = "spiffe://" + TrustDomain + "/"

// Peer is who called.
type Peer struct {
	// Verified: the caller presented a certificate the CA verified.
	Verified bool
	// Identity is the name in the verified certificate's identity URI
	// ("" without one).
	Identity string
}

// String names the peer for logs and errors.
func (p Peer) String() string {
	switch {
	case !p.Verified:
		return "anonymous"
	case p.Identity == "":
		return "authenticated (no hermod identity)"
	}
	return IdentityURIPrefix + p.Identity
}

// PeerFromContext is the caller of a server call: its verified
// certificate's identity, if any.
func PeerFromContext(ctx context.Context) Peer {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return Peer{}
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return Peer{}
	}
	return Peer{Verified: true, Identity: IdentityOf(info.State.VerifiedChains[0][0])}
}

// IdentityOf is the name in a certificate's identity URI, "" without one
// (or with more than one: an ambiguous certificate names no one).
func IdentityOf(cert *x509.Certificate) string {
	id := ""
	for _, u := range cert.URIs {
		if u.Scheme != "spiffe" || u.Host != TrustDomain || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			continue
		}
		name, ok := strings.CutPrefix(u.Path, "/")
		if !ok || !validName(name) {
			continue
		}
		if id != "" && id != name {
			return ""
		}
		id = name
	}
	return id
}

// validName: an identity name is lower-case letters, digits and dashes.
func validName(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}
