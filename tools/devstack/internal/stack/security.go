package stack

import (
	"github.com/hermod/hermod/libs/bootstrap"
)

// secretEnv are the variables that hold backend secrets themselves: the
// children reach the same external etcd and NATS, so they get them (every
// other HERMOD_* variable is devstack's own).
var secretEnv = []string{bootstrap.EnvEtcdPassword, bootstrap.EnvNATSPassword, bootstrap.EnvNATSToken}

// securityArgs hands a child of identity its etcd (and, unless etcdOnly,
// NATS) TLS and credential flags: devstack's own for an external etcd or
// NATS, the generated ones of the embedded servers under --tls. Paths
// only: secrets go by files or secretEnv.
func (s *stack) securityArgs(identity string, etcdOnly bool) []string {
	e, n := s.etcdSecurity(identity), s.natsSecurity(identity)
	flags := [][2]string{
		{"etcd-ca-file", e.TLS.CAFile}, {"etcd-cert-file", e.TLS.CertFile}, {"etcd-key-file", e.TLS.KeyFile},
		{"etcd-server-name", e.TLS.ServerName}, {"etcd-username", e.Username}, {"etcd-password-file", e.PasswordFile},
	}
	if !etcdOnly {
		flags = append(flags, [][2]string{
			{"nats-ca-file", n.TLS.CAFile}, {"nats-cert-file", n.TLS.CertFile}, {"nats-key-file", n.TLS.KeyFile},
			{"nats-user", n.User}, {"nats-password-file", n.PasswordFile}, {"nats-token-file", n.TokenFile},
			{"nats-nkey-file", n.NKeyFile}, {"nats-creds-file", n.CredsFile},
		}...)
	}
	var args []string
	for _, f := range flags {
		if f[1] != "" {
			args = append(args, "--"+f[0], f[1])
		}
	}
	return args
}
