package stack

import (
	"flag"
	"slices"
	"strings"
	"testing"

	"github.com/hermod/hermod/libs/bootstrap"
)

// The children get every security flag devstack was given, by the names
// the services take, and the secret variables but no other HERMOD_*.
func TestSecurityArgsAndSecretEnv(t *testing.T) {
	var o Options
	fs := flag.NewFlagSet("devstack", flag.ContinueOnError)
	o.Etcd.RegisterFlags(fs)
	o.NATS.RegisterFlags(fs)
	var args []string
	for _, name := range slices.Concat(bootstrap.EtcdSecurityFlags, bootstrap.NATSSecurityFlags) {
		args = append(args, "--"+name, "/"+name)
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	s := &stack{o: o}
	if got := s.securityArgs("gateway", false); !slices.Equal(got, args) {
		t.Errorf("securityArgs(false) = %v, want %v", got, args)
	}
	if got := s.securityArgs("vllm-sim", true); len(got) != 2*len(bootstrap.EtcdSecurityFlags) || slices.ContainsFunc(got, func(a string) bool { return strings.HasPrefix(a, "--nats") }) {
		t.Errorf("securityArgs(true) = %v", got)
	}
	t.Setenv("HERMOD_ETCD_PASSWORD", "x")
	t.Setenv("HERMOD_CONFIG", "y")
	env := childEnv()
	if !slices.Contains(env, "HERMOD_ETCD_PASSWORD=x") || slices.Contains(env, "HERMOD_CONFIG=y") {
		t.Errorf("child env: %v", env)
	}
}
