package coord

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"

	registryv1 "github.com/hermod/hermod/libs/api/hermod/registry/v1"
)

// EndpointSpec is an endpoint that Hermod did not start (a model server on a
// VM, bare metal or a Slurm node) as an operator describes it: the
// arguments of `hermodctl endpoints register` and an entry of the
// collector's endpoints file. The field names (yaml and json tags) are the
// names of hermodctl's flags; Name and Address are its NAME and HOST:PORT
// arguments.
type EndpointSpec struct {
	// Name is the endpoint's name in the registry (no '/'). Required.
	Name string `json:"name" yaml:"name"`
	// Address is the server's OpenAI API and /metrics, host:port.
	// Required.
	Address string `json:"address" yaml:"address"`
	// Model is the base model it serves. Required.
	Model string `json:"model" yaml:"model"`
	// ServedModels is every model name it serves, LoRA adapters too
	// (default: the base model; the base model is put first when missing).
	ServedModels []string `json:"served-models,omitempty" yaml:"served-models,omitempty"`
	// Labels are the endpoint's labels (e.g. llm-d.ai/role: decode).
	Labels map[string]string `json:"labels,omitempty" yaml:"labels,omitempty"`
	// KVEvents is its ZMQ PUB socket of KV-cache events, tcp://host:port.
	KVEvents string `json:"kv-events,omitempty" yaml:"kv-events,omitempty"`
	// KVEventsTopic is the topic of its KV-cache events.
	KVEventsTopic string `json:"kv-events-topic,omitempty" yaml:"kv-events-topic,omitempty"`
	// KVReplay is its ZMQ ROUTER socket that replays KV-cache events,
	// tcp://host:port.
	KVReplay string `json:"kv-replay,omitempty" yaml:"kv-replay,omitempty"`
	// DataParallelRank is its data-parallel rank, if it is one of several
	// on a host.
	DataParallelRank int `json:"data-parallel-rank,omitempty" yaml:"data-parallel-rank,omitempty"`
}

// SpecError is an EndpointSpec field with an invalid value.
type SpecError struct {
	// Field is the field's tag name: name, address, model, labels,
	// kv-events, ... (hermodctl's flag without "--").
	Field string
	// Err says what is wrong.
	Err error
}

func (e *SpecError) Error() string { return fmt.Sprintf("%s: %v", e.Field, e.Err) }

func (e *SpecError) Unwrap() error { return e.Err }

// Endpoint checks s and returns the registry entry it stands for in pool
// (without RegisteredAt). Each failure is a *SpecError; all are returned,
// joined.
func (s EndpointSpec) Endpoint(pool string) (*registryv1.Endpoint, error) {
	return s.check(pool, true)
}

// EndpointModelOptional is Endpoint for entries that may leave the model
// out, as the llm-d router's endpoints files do. Without Model the first
// served model is the base model; without either, both stay empty and the
// consumers use the models the collector reads from the endpoint's
// /v1/models, as for a pod Kubernetes discovery finds without
// hermod.io/model.
func (s EndpointSpec) EndpointModelOptional(pool string) (*registryv1.Endpoint, error) {
	return s.check(pool, false)
}

func (s EndpointSpec) check(pool string, modelRequired bool) (*registryv1.Endpoint, error) {
	var errs []error
	fail := func(field string, err error) { errs = append(errs, &SpecError{Field: field, Err: err}) }
	if err := ValidatePoolName(pool); err != nil {
		return nil, err
	}
	if err := ValidateEndpointName(s.Name); err != nil {
		fail("name", err)
	}
	host, port, err := splitHostPort(s.Address)
	if err != nil {
		fail("address", err)
	}
	if modelRequired && strings.TrimSpace(s.Model) == "" {
		fail("model", errors.New("required"))
	}
	if s.Model != strings.TrimSpace(s.Model) {
		fail("model", fmt.Errorf("%q has leading or trailing blanks", s.Model))
	}
	for i, m := range s.ServedModels {
		if m == "" || m != strings.TrimSpace(m) {
			fail("served-models", fmt.Errorf("model %d (%q) is empty or has leading or trailing blanks", i+1, m))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.Labels)) {
		if k == "" || strings.ContainsAny(k, " \t\r\n") {
			fail("labels", fmt.Errorf("%q is not a label key", k))
		}
	}
	for field, u := range map[string]string{"kv-events": s.KVEvents, "kv-replay": s.KVReplay} {
		if err := checkZMQEndpoint(u); err != nil {
			fail(field, err)
		}
	}
	if s.DataParallelRank < 0 || s.DataParallelRank > math.MaxInt32 {
		fail("data-parallel-rank", fmt.Errorf("%d is not a rank", s.DataParallelRank))
	}
	if len(errs) > 0 {
		slices.SortStableFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		return nil, errors.Join(errs...)
	}
	return s.endpoint(pool, host, port), nil
}

// endpoint builds the entry of a checked spec.
func (s EndpointSpec) endpoint(pool, host string, port int) *registryv1.Endpoint {
	served := slices.Clone(s.ServedModels)
	switch {
	case s.Model == "" && len(served) > 0:
		s.Model = served[0]
	case s.Model == "":
		served = nil
	case len(served) == 0:
		served = []string{s.Model}
	case !slices.Contains(served, s.Model):
		served = append([]string{s.Model}, served...)
	}
	ep := &registryv1.Endpoint{
		Name:             s.Name,
		Pool:             pool,
		Address:          host,
		Port:             int32(port), //nolint:gosec // 1..65535, checked
		Model:            s.Model,
		ServedModels:     served,
		KvEventsEndpoint: s.KVEvents,
		KvEventsTopic:    s.KVEventsTopic,
		KvReplayEndpoint: s.KVReplay,
		DataParallelRank: int32(s.DataParallelRank), //nolint:gosec // checked
	}
	if len(s.Labels) > 0 {
		ep.Labels = maps.Clone(s.Labels)
	}
	return ep
}

// splitHostPort splits host:port; the host must not be empty and the port
// must be 1..65535.
func splitHostPort(hostPort string) (string, int, error) {
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		return "", 0, fmt.Errorf("%q is not host:port: %w", hostPort, err)
	}
	if host == "" {
		return "", 0, fmt.Errorf("%q has no host", hostPort)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return "", 0, fmt.Errorf("%q: the port must be 1 to 65535", hostPort)
	}
	return host, p, nil
}

// checkZMQEndpoint checks that u is empty or tcp://host:port.
func checkZMQEndpoint(u string) error {
	if u == "" {
		return nil
	}
	hostPort, ok := strings.CutPrefix(u, "tcp://")
	if !ok {
		return fmt.Errorf("%q is not tcp://host:port", u)
	}
	if _, _, err := splitHostPort(hostPort); err != nil {
		return fmt.Errorf("%q is not tcp://host:port: %w", u, err)
	}
	return nil
}
