// Package stackstate is the state file hermod-devstack writes once its
// stack is ready (--state-file): where every service and pod listens.
// Tests and benchmarks that start a devstack read it.
package stackstate

import (
	"encoding/json"
	"fmt"
	"os"
)

// State is the running stack.
type State struct {
	Pool    string `json:"pool"`
	Model   string `json:"model"`
	Gateway string `json:"gateway"` // host:port of the OpenAI API
	// Gateways are every gateway replica's host:port (the first is
	// Gateway).
	Gateways []string `json:"gateways"`
	// GatewayOps are every gateway replica's ops host:port (/metrics,
	// /health, /ready), in the order of Gateways.
	GatewayOps []string `json:"gateway_ops"`
	// Valkey is the in-flight server's host:port (devstack --valkey).
	Valkey        string    `json:"valkey,omitempty"`
	NATSURL       string    `json:"nats_url"`
	EtcdEndpoints []string  `json:"etcd_endpoints"`
	Pickers       []Service `json:"pickers"`
	Collector     Service   `json:"collector"`
	Indexer       Service   `json:"indexer"`
	Responses     Service   `json:"responses"`
	// Autoscaler is set when the fleet is autoscaled (--variants).
	Autoscaler Service        `json:"autoscaler,omitempty"`
	Pods       []Pod          `json:"pods"`
	PIDs       map[string]int `json:"pids"`
	// Security is set when the stack runs with --tls: the settings a
	// client (hermodctl's identity) needs to reach etcd and NATS, keyed by
	// the flag names of bootstrap.EtcdSecurityFlags and NATSSecurityFlags
	// (files, never secrets). hermodctl --state-file reads it.
	Security map[string]string `json:"security,omitempty"`
	// TLS is set when the stack runs with --tls: the CA and each
	// identity's certificate, for tests that call the services' gRPC
	// servers themselves (as envoy, as the gateway, ...).
	TLS *TLS `json:"tls,omitempty"`
}

// TLS is the material devstack --tls generated.
type TLS struct {
	// CAFile is the PEM CA that signed every certificate.
	CAFile string `json:"ca_file"`
	// Identities are the certificates by identity (spiffe://hermod/<name>):
	// gateway, picker, envoy, hermodctl, ...; each has the server and the
	// client usages.
	Identities map[string]CertFiles `json:"identities"`
}

// CertFiles are a certificate and its key.
type CertFiles struct {
	CertFile string `json:"cert_file"`
	KeyFile  string `json:"key_file"`
}

// Service is a child service's addresses.
type Service struct {
	Name string `json:"name"`
	GRPC string `json:"grpc,omitempty"`
	Ops  string `json:"ops"` // /metrics, /health, /ready
}

// Pod is one simulated pod.
type Pod struct {
	Name    string  `json:"name"`
	Address string  `json:"address"` // host:port of its HTTP server
	Speed   float64 `json:"speed"`
	PID     int     `json:"pid"`
}

// Write saves the state at path atomically (a reader never sees half a
// file).
func (s *State) Write(path string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	return nil
}

// Read loads a state file; a missing file is an error satisfying
// errors.Is(err, fs.ErrNotExist).
func Read(path string) (*State, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("state file: %w", err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	return &s, nil
}
