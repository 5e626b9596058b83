package bootstrap

import (
	"flag"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/hermod/hermod/libs/grpcauthz"
	"github.com/hermod/hermod/libs/telemetry"
	"github.com/hermod/hermod/libs/tlsconfig"
)

// GRPCSecurity is how a service's gRPC servers and clients are secured.
// The zero value is plaintext without authorisation (the devstack's
// default). Any file turns TLS on for both: servers present CertFile,
// clients verify servers with CAFile (empty: the system roots) and present
// CertFile when a server asks, so the certificate needs both the server
// and the client extended key usages. With ClientAuth optional or require,
// servers verify client certificates with CAFile and the authorisation
// policy applies (grpcauthz: DefaultPolicy, or AuthzFile over it).
type GRPCSecurity struct {
	CAFile, CertFile, KeyFile string
	// ClientAuth: none, optional or require (see tlsconfig.ClientAuth).
	ClientAuth string
	// ServerName, when set, is the name clients verify servers'
	// certificates for instead of the dialed host.
	ServerName string
	// AuthzFile is a grpcauthz policy file overriding the default table.
	AuthzFile string
}

// RegisterFlags adds --grpc-tls-ca-file, --grpc-tls-cert-file,
// --grpc-tls-key-file, --grpc-tls-client-auth, --grpc-tls-server-name and
// --grpc-authz-file to fs.
func (g *GRPCSecurity) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&g.CAFile, "grpc-tls-ca-file", "", "PEM CA bundle: verifies gRPC servers (clients) and client certificates (servers); any --grpc-tls-* file turns TLS on (reloaded when it changes)")
	fs.StringVar(&g.CertFile, "grpc-tls-cert-file", "", "PEM certificate of this service's gRPC server, also presented as its client certificate (server and client auth usages; reloaded when it changes)")
	fs.StringVar(&g.KeyFile, "grpc-tls-key-file", "", "PEM key of --grpc-tls-cert-file")
	fs.StringVar(&g.ClientAuth, "grpc-tls-client-auth", string(tlsconfig.ClientAuthNone), "client certificates the gRPC server asks for: none, optional (verified if given) or require; optional and require enforce the authorisation policy (production: require)")
	fs.StringVar(&g.ServerName, "grpc-tls-server-name", "", "name gRPC servers' certificates are verified for (default: the dialed host)")
	fs.StringVar(&g.AuthzFile, "grpc-authz-file", "", "YAML policy of which peer identity (spiffe://hermod/<name>) may call which gRPC method, over the default table; needs --grpc-tls-client-auth optional or require")
}

// TLS says whether TLS is configured.
func (g GRPCSecurity) TLS() bool { return g.CAFile != "" || g.CertFile != "" || g.KeyFile != "" }

// grpcSecurity is what Start provisions from GRPCSecurity.
type grpcSecurity struct {
	tls   *tlsconfig.Source     // nil: plaintext
	authz *grpcauthz.Authorizer // nil: every call allowed
}

// setupGRPC loads the TLS material and the authorisation policy; Close
// stops the material's reloading.
func (s *Service) setupGRPC(g GRPCSecurity) error {
	mode, err := tlsconfig.ParseClientAuth(g.ClientAuth)
	if err != nil {
		return fmt.Errorf("--grpc-tls-client-auth: %w", err)
	}
	if !g.TLS() {
		if mode != tlsconfig.ClientAuthNone || g.ServerName != "" || g.AuthzFile != "" {
			return fmt.Errorf("--grpc-tls-client-auth, --grpc-tls-server-name and --grpc-authz-file need TLS (--grpc-tls-ca-file, --grpc-tls-cert-file, --grpc-tls-key-file)")
		}
		s.Log.Info("grpc plaintext: no --grpc-tls-* files")
		return nil
	}
	if g.AuthzFile != "" && mode == tlsconfig.ClientAuthNone {
		return fmt.Errorf("--grpc-authz-file %s: authorisation needs client certificates (--grpc-tls-client-auth optional or require)", g.AuthzFile)
	}
	src, err := tlsconfig.New(tlsconfig.Options{Name: "grpc", CAFile: g.CAFile, CertFile: g.CertFile, KeyFile: g.KeyFile,
		ClientAuth: mode, ServerName: g.ServerName, Logger: s.Log, Registerer: s.Registry})
	if err != nil {
		return fmt.Errorf("grpc tls: %w", err)
	}
	s.OnClose(src.Close)
	s.grpc.tls = src
	policy := "none (no client certificates)"
	if mode != tlsconfig.ClientAuthNone {
		p, from := grpcauthz.DefaultPolicy(), "default"
		if g.AuthzFile != "" {
			if p, err = grpcauthz.LoadPolicy(g.AuthzFile); err != nil {
				return fmt.Errorf("--grpc-authz-file: %w", err)
			}
			from = g.AuthzFile
		}
		s.grpc.authz = grpcauthz.NewAuthorizer(p, s.Log, s.Registry)
		policy = from
	}
	s.Log.Info("grpc tls", "client_auth", string(mode), "authz_policy", policy)
	if mode == tlsconfig.ClientAuthOptional {
		s.Log.Warn("grpc clients without a certificate are accepted as anonymous: they may call only what the policy allows any caller (production: --grpc-tls-client-auth require)")
	}
	return nil
}

// GRPCServerOptions are the options of every gRPC server of the service:
// telemetry's, then the TLS credentials and the authorisation
// interceptors when configured, then extra.
func (s *Service) GRPCServerOptions(extra ...grpc.ServerOption) ([]grpc.ServerOption, error) {
	opts := telemetry.GRPCServerOptions()
	if s.grpc.tls != nil {
		cfg, err := s.grpc.tls.ServerConfig()
		if err != nil {
			return nil, fmt.Errorf("grpc server (--grpc-tls-cert-file, --grpc-tls-key-file): %w", err)
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg)))
	}
	if s.grpc.authz != nil {
		opts = append(opts, s.grpc.authz.ServerOptions()...)
	}
	return append(opts, extra...), nil
}

// GRPCDialOptions are the options of every gRPC client of the service:
// its transport credentials (plaintext, or TLS with the current material
// at each connection), telemetry's, then extra.
func (s *Service) GRPCDialOptions(extra ...grpc.DialOption) []grpc.DialOption {
	creds := insecure.NewCredentials()
	if s.grpc.tls != nil {
		creds = clientCredentials{src: s.grpc.tls}
	}
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, telemetry.GRPCClientOptions()...)
	return append(opts, extra...)
}
