// Package stackstate is the state file hermod-devstack writes once its
// stack is ready (--state-file): where every service and pod listens.
// Tests and benchmarks that start a devstack read it.
package stackstate

import (
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// State is the running stack.
type State struct {
	Pool    string `json:"pool"`
	Model   string `json:"model"`
	Gateway string `json:"gateway"` // host:port of the OpenAI API
	// GatewayScheme is how the API is reached: "https" (hermod-devstack
	// --api-tls, trusting TLS.CAFile) or "" for http.
	GatewayScheme string `json:"gateway_scheme,omitempty"`
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
	Autoscaler Service `json:"autoscaler,omitempty"`
	Pods       []Pod   `json:"pods"`
	// PIDs are the process ids of the children that run now, by name
	// (a child between an exit and its restart is absent).
	PIDs map[string]int `json:"pids"`
	// Children are every child process devstack supervises, in start
	// order (an autoscaled fleet's pods come and go). The file is
	// rewritten (atomically) whenever one starts, becomes ready or exits.
	Children []Child `json:"children"`
	// Security is set when the stack runs with --tls: the settings a
	// client (hermodctl's identity) needs to reach etcd and NATS, keyed by
	// the flag names of bootstrap.EtcdSecurityFlags and NATSSecurityFlags
	// (files, never secrets). hermodctl --state-file reads it.
	Security map[string]string `json:"security,omitempty"`
	// TLS is set when the stack runs with --tls: the CA and each
	// identity's certificate, for tests that call the services' gRPC
	// servers themselves (as envoy, as the gateway, ...).
	TLS *TLS `json:"tls,omitempty"`
	// Control is the control endpoint's host:port (devstack
	// --control-listen): GET /backends, POST /backends/{nats|etcd}/{i}/
	// {stop|kill|start}.
	Control string `json:"control,omitempty"`
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

// Child is one supervised child process: devstack restarts it when it
// exits, with the same arguments on the same ports, after a backoff.
type Child struct {
	Name string `json:"name"` // unique: "picker-1", "vllm-sim-0", "gateway", ...
	// Role is what the child is: RolePod, RolePicker, RoleGateway, ...
	Role string `json:"role"`
	// PID is the running process's id; 0 while the child is down (State
	// ChildBackoff, ChildExited or ChildFailed): never signal a 0.
	PID int `json:"pid,omitempty"`
	// Ports are the child's listening ports on 127.0.0.1 by use: "grpc",
	// "ops" (/metrics, /health, /ready), "http" (a gateway's OpenAI API,
	// a pod's server), "kv" and "kv_replay" (a pod's ZeroMQ KV events),
	// "redis".
	Ports map[string]int `json:"ports,omitempty"`
	// Probe is the readiness check devstack runs after each start: an
	// http:// URL that must answer 200, or "redis-ping HOST:PORT".
	Probe string `json:"probe,omitempty"`
	// Liveness is the check devstack runs while the child is ready (same
	// forms as Probe): failing it 3 times in a row, 2 s apart, kills the
	// process, which then restarts.
	Liveness string `json:"liveness,omitempty"`
	// State is ChildStarting, ChildReady, ChildBackoff, ChildExited or
	// ChildFailed.
	State string `json:"state"`
	// Restarts counts the starts after the first.
	Restarts int `json:"restarts"`
	// LastStart is when the current (or last) process started.
	LastStart time.Time `json:"last_start"`
	// ReadySince is when the current process passed its probe (zero
	// while it has not).
	ReadySince time.Time `json:"ready_since,omitzero"`
	// LastExit is how the previous process ended ("signal: killed",
	// "exit status 1"; a process the liveness probe killed says so),
	// LastExitAt when.
	LastExit   string    `json:"last_exit,omitempty"`
	LastExitAt time.Time `json:"last_exit_at,omitzero"`
	// Restart is false for a child devstack leaves down once it exits
	// (--no-restart).
	Restart bool `json:"restart"`
}

// The roles of the children.
const (
	RolePod        = "pod"
	RolePicker     = "picker"
	RoleGateway    = "gateway"
	RoleCollector  = "collector"
	RoleIndexer    = "indexer"
	RoleResponses  = "responses"
	RoleAutoscaler = "autoscaler"
	RoleValkey     = "valkey"
)

// The states of a child.
const (
	ChildStarting = "starting" // started, not yet ready
	ChildReady    = "ready"    // passed its readiness probe
	ChildBackoff  = "backoff"  // exited; restarts after a backoff
	ChildExited   = "exited"   // exited and is not restarted (--no-restart)
	ChildFailed   = "failed"   // never became ready: the stack stops
)

// Ready reports whether the child runs and passed its probe.
func (c Child) Ready() bool { return c.State == ChildReady && c.PID > 0 }

// Child returns the child called name.
func (s *State) Child(name string) (Child, bool) {
	for _, c := range s.Children {
		if c.Name == name {
			return c, true
		}
	}
	return Child{}, false
}

// ChildrenOf returns the children of role, in start order.
func (s *State) ChildrenOf(role string) []Child {
	var out []Child
	for _, c := range s.Children {
		if c.Role == role {
			out = append(out, c)
		}
	}
	return out
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

// APIScheme is the OpenAI API's URL scheme: http unless GatewayScheme
// says otherwise.
func (s *State) APIScheme() string {
	if s.GatewayScheme == "" {
		return "http"
	}
	return s.GatewayScheme
}
