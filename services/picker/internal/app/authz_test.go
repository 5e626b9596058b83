package app

import (
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/hermod/hermod/libs/grpcauthz"
)

// The default authorisation policy names Envoy's ext_proc method as the
// picker serves it (libs does not depend on go-control-plane).
func TestAuthzPolicyNamesExtProc(t *testing.T) {
	if grpcauthz.ExtProcProcess != extprocv3.ExternalProcessor_Process_FullMethodName {
		t.Fatalf("grpcauthz.ExtProcProcess %q, served %q", grpcauthz.ExtProcProcess, extprocv3.ExternalProcessor_Process_FullMethodName)
	}
	if !grpcauthz.DefaultPolicy().Allowed(extprocv3.ExternalProcessor_Process_FullMethodName, grpcauthz.Peer{Verified: true, Identity: grpcauthz.Envoy}) {
		t.Fatal("envoy may not call ext_proc")
	}
}
