package bootstrap

import (
	"context"
	"errors"
	"net"

	"google.golang.org/grpc/credentials"

	"github.com/hermod/hermod/libs/tlsconfig"
)

// clientCredentials are gRPC client credentials that take the TLS
// material current at each connection: a rotated CA bundle is used by
// the next connection, a rotated client certificate by the next handshake.
// Verification is crypto/tls's own (credentials.NewTLS).
type clientCredentials struct {
	src *tlsconfig.Source
}

func (c clientCredentials) current() credentials.TransportCredentials {
	return credentials.NewTLS(c.src.ClientConfig())
}

// ClientHandshake implements credentials.TransportCredentials.
func (c clientCredentials) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c.current().ClientHandshake(ctx, authority, conn)
}

// ServerHandshake implements credentials.TransportCredentials: these are
// a client's.
func (clientCredentials) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("grpc client credentials used by a server")
}

// Info implements credentials.TransportCredentials.
func (c clientCredentials) Info() credentials.ProtocolInfo { return c.current().Info() }

// Clone implements credentials.TransportCredentials.
func (c clientCredentials) Clone() credentials.TransportCredentials { return c }

// OverrideServerName implements credentials.TransportCredentials.
//
// Deprecated: as grpc's own; use grpc.WithAuthority.
func (clientCredentials) OverrideServerName(string) error {
	return errors.New("set the server name with --grpc-tls-server-name")
}
