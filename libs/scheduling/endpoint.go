package scheduling

import (
	"net"
	"strconv"
	"time"

	"github.com/cespare/xxhash/v2"
)

// Endpoint is one model-server endpoint (a vLLM pod, or one data-parallel rank
// of it) as the scheduler sees it. An Endpoint value is an immutable snapshot:
// whoever owns the endpoint set replaces the pointer when labels, models or
// metrics change, so plugins may keep references for the length of a cycle
// without locks.
type Endpoint struct {
	// Name identifies the endpoint within its pool (the pod name). Stateful
	// plugins key their state by it.
	Name string
	// Address is the IP or host name the endpoint is reached at.
	Address string
	// Port is the serving port.
	Port int
	// Labels are the pod labels (role, context-length range, ...).
	Labels map[string]string
	// Models are the model names the endpoint serves (base model and LoRA
	// adapters), from the models data source. Nil means unknown.
	Models []string
	// Metrics are the latest scraped engine metrics; nil until the first
	// scrape arrives.
	Metrics *Metrics
	// NodeAddress is the IP of the node the endpoint runs on (a pod's
	// status.hostIP); empty when unknown. Node-level exporters are reached
	// there (dcgm-data-source's useNodeAddress).
	NodeAddress string

	hostPort string
	nameHash uint64
}

// NewEndpoint returns an endpoint with its host:port precomputed.
func NewEndpoint(name, address string, port int, labels map[string]string) *Endpoint {
	e := &Endpoint{Name: name, Address: address, Port: port, Labels: labels}
	e.hostPort = net.JoinHostPort(address, strconv.Itoa(port))
	e.nameHash = NameHash(name)
	return e
}

// NameHash is the 64-bit hash per-endpoint state is keyed by on hot paths.
func NameHash(name string) uint64 { return xxhash.Sum64String(name) }

// NameHash returns NameHash(e.Name), precomputed by NewEndpoint.
func (e *Endpoint) NameHash() uint64 {
	if e.nameHash != 0 {
		return e.nameHash
	}
	return NameHash(e.Name)
}

// WithMetrics returns a copy of e carrying m. The copy shares labels and
// models with e (they are never mutated in place).
func (e *Endpoint) WithMetrics(m *Metrics) *Endpoint {
	c := *e
	c.Metrics = m
	return &c
}

// HostPort returns "address:port" (brackets around IPv6 addresses).
func (e *Endpoint) HostPort() string {
	if e.hostPort == "" {
		return net.JoinHostPort(e.Address, strconv.Itoa(e.Port))
	}
	return e.hostPort
}

// Serves reports whether the endpoint serves model. An endpoint whose model
// list is unknown serves every model.
func (e *Endpoint) Serves(model string) bool {
	if e.Models == nil || model == "" {
		return true
	}
	for _, m := range e.Models {
		if m == model {
			return true
		}
	}
	return false
}

// Metrics is one scrape of an endpoint's engine metrics (vLLM names in the
// comments). Missing gauges are zero.
type Metrics struct {
	// WaitingRequests is vllm:num_requests_waiting.
	WaitingRequests int
	// RunningRequests is vllm:num_requests_running.
	RunningRequests int
	// KVCacheUsage is vllm:kv_cache_usage_perc, a fraction in [0, 1].
	KVCacheUsage float64
	// BlockSize and NumGPUBlocks come from vllm:cache_config_info; zero when
	// the engine does not report them.
	BlockSize    int
	NumGPUBlocks int
	// MaxLoRAs, RunningLoRAs and WaitingLoRAs come from the newest series of
	// vllm:lora_requests_info.
	MaxLoRAs     int
	RunningLoRAs []string
	WaitingLoRAs []string
	// PromptTokens and OutputTokens are the engine's counters of prompt
	// tokens prefilled and output tokens generated since it started
	// (vllm:prompt_tokens_total, vllm:generation_tokens_total): how far
	// the requests in flight have got.
	PromptTokens, OutputTokens float64
	// UpdatedAt is when the scrape was taken.
	UpdatedAt time.Time
	// Attributes are what the data layer's other sources said of the
	// endpoint (dcgm-extractor's GPUUtilization/dcgm-extractor, say), by
	// attribute key; nil when there are none. Never mutated once set.
	Attributes map[string]float64
}

// The keys upstream's core-metrics-extractor stores the engine gauges
// under; Attribute answers them from the gauges.
const (
	AttributeWaitingQueueSize    = "WaitingQueueSize"
	AttributeRunningRequestsSize = "RunningRequestsSize"
	AttributeKVCacheUsagePercent = "KVCacheUsagePercent"
	AttributeMaxActiveModels     = "MaxActiveModels"
	AttributeActiveModels        = "ActiveModels"
	AttributeWaitingModels       = "WaitingModels"
)

// Attribute returns the endpoint attribute under key: one of the data
// layer's (Metrics.Attributes), or an engine gauge under the key upstream's
// core-metrics-extractor gives it (KVCacheUsagePercent is the 0..1
// fraction, as upstream keeps it). ok is false when the endpoint has no
// such attribute (no scrape yet, or no source producing it).
func (e *Endpoint) Attribute(key string) (v float64, ok bool) {
	m := e.Metrics
	if m == nil {
		return 0, false
	}
	if v, ok := m.Attributes[key]; ok {
		return v, true
	}
	switch key {
	case AttributeWaitingQueueSize:
		return float64(m.WaitingRequests), true
	case AttributeRunningRequestsSize:
		return float64(m.RunningRequests), true
	case AttributeKVCacheUsagePercent:
		return m.KVCacheUsage, true
	case AttributeMaxActiveModels:
		return float64(m.MaxLoRAs), true
	case AttributeActiveModels:
		return float64(len(m.RunningLoRAs)), true
	case AttributeWaitingModels:
		return float64(len(m.WaitingLoRAs)), true
	}
	return 0, false
}

// Target is an endpoint chosen by a profile, with the port traffic goes to
// (a profile handler may rewrite it, e.g. pd-profile-handler's primaryPort).
type Target struct {
	Endpoint *Endpoint
	Port     int
}

// HostPort returns the address traffic for this target is sent to.
func (t Target) HostPort() string {
	if t.Port == 0 || t.Port == t.Endpoint.Port {
		return t.Endpoint.HostPort()
	}
	return net.JoinHostPort(t.Endpoint.Address, strconv.Itoa(t.Port))
}
